/// @file cross_block.hpp
/// @brief What blocks of one grid need to hand data to each other: a device-wide fence, loads that
///        bypass the non-coherent per-multiprocessor caches, and a pause for spin-waits.
///
/// A producer stores its data, calls thread_fence(), then publishes with an atomic; a consumer
/// that has seen the atomic's effect calls thread_fence() and reads with load_coherent(), which
/// never returns a stale copy from L1 (CUDA's ld.volatile goes to L2; on AMD a volatile load is
/// a glc load).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad {

/// Orders this thread's earlier memory accesses before its later ones for the whole device.
HIPGRAD_DEVICE HIPGRAD_INLINE void thread_fence() { __threadfence(); }

/// Reads *address from the device-coherent level of memory, one 32-bit word at a time.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T load_coherent(const T* address) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0, "load_coherent reads whole 32-bit words");
  constexpr int kWords = static_cast<int>(sizeof(T) / 4);
  const volatile std::uint32_t* words = reinterpret_cast<const volatile std::uint32_t*>(address);
  std::uint32_t copy[kWords];
  HIPGRAD_UNROLL
  for (int i = 0; i < kWords; ++i) copy[i] = words[i];
  T value;
  std::memcpy(&value, copy, sizeof(T));
  return value;
}

/// A short pause inside a spin-wait, to leave memory bandwidth and issue slots to others.
HIPGRAD_DEVICE HIPGRAD_INLINE void spin_pause() {
#if defined(HIPGRAD_BACKEND_CUDA)
  __nanosleep(32);
#else
  __builtin_amdgcn_s_sleep(1);
#endif
}

}  // namespace hipgrad
