/// @file async_copy.hpp
/// @brief 16-byte chunk copies from global to shared memory that zero-fill what lies outside the
///        source: asynchronous (cp.async) on sm_80+, through registers elsewhere. Used by the
///        tile GEMM's stage rings and by any kernel that stages tensors in shared memory.
///
/// On sm_80+ a whole chunk (16 valid bytes) is one `cp.async.cg` of 16 bytes. Copies are grouped
/// (commit) and waited for (wait<N>: at most N newer groups still in flight), then a barrier
/// publishes them. Elsewhere a whole chunk is a 16-byte load into registers and a store, complete
/// when it returns: commit and wait do nothing. On every target an edge chunk (0 to 15 valid
/// bytes) is staged through registers byte by byte and zero-filled, so that no access reaches
/// past the source's last element: a cp.async with a source size below 16 (zero-fill) is counted
/// as a 16-byte read by compute-sanitizer, which reports it when the source ends inside the chunk.
/// The synchronous shared stores of edge chunks are published by the same barrier as the
/// asynchronous copies.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad {

/// Copies `valid_bytes` (0 to 16, a multiple of the element size) from `global` to the 16-byte
/// chunk `shared` and zero-fills the rest. Only the first valid_bytes bytes at `global` are read
/// (none with 0: then `global` may be anything); with 16, `global` must be 16-byte aligned.
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_chunk(void* shared, const void* global, int valid_bytes) {
// cp.async exists on NVIDIA sm_80 and later: the feature the layers above test.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HIPGRAD_CP_ASYNC 1
#endif

#if defined(HIPGRAD_CP_ASYNC)
  if (valid_bytes == 16) {
    const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
    return;
  }
#endif
  uint4 v = make_uint4(0, 0, 0, 0);
  if (valid_bytes == 16) {
    v = *static_cast<const uint4*>(global);
  } else {
    // Unrolled with constant indices (v stays in registers); byte i is read only if it exists.
    auto* bytes = reinterpret_cast<unsigned char*>(&v);
    HIPGRAD_UNROLL
    for (int i = 0; i < 16; ++i) {
      if (i < valid_bytes) bytes[i] = static_cast<const unsigned char*>(global)[i];
    }
  }
  *static_cast<uint4*>(shared) = v;
}

#if defined(HIPGRAD_CP_ASYNC)
/// copy_chunk entirely by cp.async (NVIDIA sm_80 and later): the hardware reads `valid_bytes`
/// and zero-fills the rest, so that the chunk lands with the thread's other copies (and an
/// arrival that waits for them, mbarrier_arrive_when_copies_land, covers it too). `global` must
/// be 16-byte aligned whatever valid_bytes is (with 0 nothing is read).
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_chunk_async(void* shared, const void* global, int valid_bytes) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(valid_bytes));
}

/// copy_chunk_async of a chunk that is whole or absent: 16 bytes from `global` where `present`,
/// else 16 zeros and nothing read. Cheaper than a byte count: a count below 16 costs the address
/// arithmetic of the zero-filling form on every copy, a predicate only a compare.
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_whole_chunk_async(void* shared, const void* global, bool present) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile(
      "{\n .reg .pred absent;\n setp.eq.u32 absent, %2, 0;\n"
      " cp.async.cg.shared.global [%0], [%1], 16, absent;\n}\n" ::"r"(address),
      "l"(global), "r"(static_cast<std::uint32_t>(present)));
}
#endif

/// Closes the group of copies issued since the last commit (one group per pipeline stage).
HIPGRAD_DEVICE HIPGRAD_INLINE void commit_copies() {
#if defined(HIPGRAD_CP_ASYNC)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most kPending committed groups are still in flight; a barrier must follow
/// before other threads read what this thread copied.
template <int kPending>
HIPGRAD_DEVICE HIPGRAD_INLINE void wait_copies() {
#if defined(HIPGRAD_CP_ASYNC)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

}  // namespace hipgrad
