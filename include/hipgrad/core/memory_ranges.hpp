/// @file memory_ranges.hpp
/// @brief The check every op makes on its pointers: no output may overlap an input or another
///        output (a kernel writing where it, or another block, still reads gives silently wrong
///        results).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hipgrad/core/status.hpp"

namespace hipgrad {

/// Whether the memory ranges [a, a + a_bytes) and [b, b + b_bytes) overlap (never for a null
/// pointer or an empty range).
inline bool ranges_overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  if (a == nullptr || b == nullptr || a_bytes == 0 || b_bytes == 0) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

/// A named span of memory an op reads or writes (null pointers are skipped).
struct MemoryRange {
  const void* pointer;
  std::size_t bytes;
  const char* name;
};

/// invalid_argument naming the first output that overlaps an input or an earlier output.
/// (Arrays rather than initializer lists: nvcc's host pass misparses braced lists passed inline.)
template <std::size_t kOutputs, std::size_t kInputs>
Status check_outputs_disjoint(const MemoryRange (&outputs)[kOutputs], const MemoryRange (&inputs)[kInputs]) {
  for (std::size_t o = 0; o < kOutputs; ++o) {
    const MemoryRange& out = outputs[o];
    for (std::size_t earlier = 0; earlier < o; ++earlier) {
      if (ranges_overlap(out.pointer, out.bytes, outputs[earlier].pointer, outputs[earlier].bytes))
        return Status::invalid_argument(std::string(out.name) + " overlaps " + outputs[earlier].name);
    }
    for (const MemoryRange& in : inputs) {
      if (ranges_overlap(out.pointer, out.bytes, in.pointer, in.bytes))
        return Status::invalid_argument(std::string(out.name) + " overlaps " + in.name);
    }
  }
  return Status::ok();
}

}  // namespace hipgrad
