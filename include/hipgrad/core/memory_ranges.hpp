/// @file memory_ranges.hpp
/// @brief The checks every op makes on its pointers: each aligned to its element's size (an
///        element read across its natural boundary is a misaligned-address fault that ends the
///        caller's GPU context), and no output overlapping an input or another output (a kernel
///        writing where it, or another block, still reads gives silently wrong results).
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

/// A named span of memory an op reads or writes (null pointers are skipped), of elements of
/// `alignment` bytes (its address must be a multiple of it).
struct MemoryRange {
  const void* pointer;
  std::size_t bytes;
  const char* name;
  std::size_t alignment = 1;
};

/// invalid_argument naming the first range whose address is not a multiple of its alignment.
template <std::size_t kRanges>
Status check_aligned(const MemoryRange (&ranges)[kRanges]) {
  for (const MemoryRange& r : ranges) {
    if (r.alignment > 1 && reinterpret_cast<std::uintptr_t>(r.pointer) % r.alignment != 0)
      return Status::invalid_argument(std::string(r.name) + " is not aligned to its " + std::to_string(r.alignment) +
                                      "-byte elements");
  }
  return Status::ok();
}

/// invalid_argument naming the first range not aligned to its elements, or the first output
/// that overlaps an input or an earlier output.
/// (Arrays rather than initializer lists: nvcc's host pass misparses braced lists passed inline.)
template <std::size_t kOutputs, std::size_t kInputs>
Status check_memory_ranges(const MemoryRange (&outputs)[kOutputs], const MemoryRange (&inputs)[kInputs]) {
  HIPGRAD_RETURN_IF_ERROR(check_aligned(outputs));
  HIPGRAD_RETURN_IF_ERROR(check_aligned(inputs));
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
