/// @file device_intrinsics.hpp
/// @brief Warp size, lane id, shuffles with width, ballot, barriers, atomics and flags between
///        the blocks of a grid, one spelling for AMD and NVIDIA.
///
/// The shuffles are spelled like HIP's (`__shfl_xor` → `shfl_xor`) but are not named
/// `warp_shuffle*`: rocPRIM calls functions of that name unqualified, and argument-dependent lookup
/// would make its calls on hipgrad types ambiguous.
///
/// Warp-level calls here must be reached by every lane of the warp (convergent code): on NVIDIA
/// they are the `_sync` intrinsics with a full mask, on AMD the wavefront-wide ones.
#pragma once

#include <cstdint>
#include <type_traits>

#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad {

/// Lanes in a warp (wavefront) of the target being compiled. Device code only: the host pass of
/// an AMD build does not know the target (gfx90a runs 64 lanes, gfx1030 32), so host code asks
/// the device (hipDeviceProp_t::warpSize) and never instantiates kernels on this value.
HIPGRAD_DEVICE constexpr int warp_size() {
#if defined(HIPGRAD_BACKEND_CUDA)
  return 32;
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
  return __AMDGCN_WAVEFRONT_SIZE;
#else
  return 64;
#endif
}

/// A set of lanes, one bit each; 64 bits hold any warp size.
using LaneMask = std::uint64_t;

HIPGRAD_DEVICE HIPGRAD_INLINE int lane_id() {
#if defined(HIPGRAD_BACKEND_CUDA)
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return static_cast<int>(lane);
#else
  return static_cast<int>(__lane_id());
#endif
}

HIPGRAD_DEVICE HIPGRAD_INLINE void block_sync() { __syncthreads(); }

/// Leaves the multiprocessor to other warps for about `ns` nanoseconds (a hint) while polling.
HIPGRAD_DEVICE HIPGRAD_INLINE void sleep_nanoseconds(unsigned ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  __nanosleep(ns);
#elif defined(__HIP_DEVICE_COMPILE__)
  (void)ns;
  __builtin_amdgcn_s_sleep(4);  // 4 × 64 clocks
#else
  (void)ns;
#endif
}

/// Waits `ns` nanoseconds of the GPU's global timer, which counts time whatever the clocks do (its
/// low word wraps every 4.3 s, which the unsigned difference survives), sleeping between reads so
/// that the multiprocessor serves the blocks beside this one. NVIDIA sm_70+; elsewhere it returns
/// at once (callers use it only to spread work that clusters hold in step, and AMD has none).
HIPGRAD_DEVICE HIPGRAD_INLINE void wait_nanoseconds(unsigned ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  unsigned start, now;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(start));
  do {
    sleep_nanoseconds(256);
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(now));
  } while (now - start < ns);
#else
  (void)ns;
#endif
}

/// 2^x and 1/x on the special-function units with denormals flushed, a few ulp off the IEEE
/// results (NVIDIA: `ex2.approx.ftz`, `rcp.approx.ftz`; `__expf`/`__fdividef` would wrap each in
/// a range fix-up that makes tight loops issue-bound). AMD: exp2f and __fdividef.
HIPGRAD_DEVICE HIPGRAD_INLINE float fast_exp2(float x) {
#if defined(HIPGRAD_BACKEND_CUDA)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);
#endif
}

HIPGRAD_DEVICE HIPGRAD_INLINE float fast_reciprocal(float x) {
#if defined(HIPGRAD_BACKEND_CUDA)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return __fdividef(1.0f, x);
#endif
}

/// Stores `value` at `at` after every write the block made before its last barrier (the caller's
/// block_sync) is visible to the GPU: one thread of the block calls it.
HIPGRAD_DEVICE HIPGRAD_INLINE void release_flag(unsigned long long* at, unsigned long long value) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(at), "l"(value) : "memory");
#elif defined(__HIP_DEVICE_COMPILE__)
  __atomic_store_n(at, value, __ATOMIC_RELEASE);
#else
  *at = value;
#endif
}

/// The flag at `at`, read without ordering: several such reads are in flight at once, where each
/// acquiring read would hold the reads after it until it returned. Once the flags read are the
/// ones waited for, acquire_fence() makes what their release_flag published visible.
HIPGRAD_DEVICE HIPGRAD_INLINE unsigned long long read_flag(const unsigned long long* at) {
#if defined(__CUDA_ARCH__)
  unsigned long long value;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(at) : "memory");
  return value;
#elif defined(__HIP_DEVICE_COMPILE__)
  return __atomic_load_n(at, __ATOMIC_RELAXED);
#else
  return *at;
#endif
}

/// After read_flag has seen flags set by release_flag: the writes made visible before them are
/// visible to this thread's later reads (a relaxed read then this fence acquire together).
HIPGRAD_DEVICE HIPGRAD_INLINE void acquire_fence() {
#if defined(__CUDA_ARCH__)
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#elif defined(__HIP_DEVICE_COMPILE__)
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

/// Brings the lanes of the warp back together after divergent code (loops of per-thread trip
/// counts), so that the shuffles after it run as one instruction: without it, nvcc's shuffles
/// take a lane-by-lane fallback on NVIDIA. AMD wavefronts run in lockstep already.
HIPGRAD_DEVICE HIPGRAD_INLINE void warp_converge() {
#if defined(HIPGRAD_BACKEND_CUDA)
  __syncwarp();
#endif
}

/// The lanes of the warp whose `predicate` is true.
HIPGRAD_DEVICE HIPGRAD_INLINE LaneMask warp_ballot(bool predicate) {
#if defined(HIPGRAD_BACKEND_CUDA)
  return static_cast<LaneMask>(__ballot_sync(0xffffffffu, predicate));
#else
  return static_cast<LaneMask>(__ballot(predicate));
#endif
}

namespace detail {

/// kDownOrZero: lane (lane + delta) of the whole warp, or 0 past its end.
enum class ShuffleKind { kIndex, kUp, kDown, kXor, kDownOrZero };

template <ShuffleKind kKind>
HIPGRAD_DEVICE HIPGRAD_INLINE std::uint32_t shuffle_word(std::uint32_t word, int operand, int width) {
#if defined(HIPGRAD_BACKEND_CUDA)
  constexpr unsigned kAll = 0xffffffffu;
  if constexpr (kKind == ShuffleKind::kIndex) return __shfl_sync(kAll, word, operand, width);
  if constexpr (kKind == ShuffleKind::kUp) return __shfl_up_sync(kAll, word, operand, width);
  if constexpr (kKind == ShuffleKind::kDown) return __shfl_down_sync(kAll, word, operand, width);
  if constexpr (kKind == ShuffleKind::kXor) return __shfl_xor_sync(kAll, word, operand, width);
  if constexpr (kKind == ShuffleKind::kDownOrZero) {
    // The validity predicate stays inside the instruction: written as `valid ? word : 0` in C++,
    // nvcc branched on it and ran the shuffles in divergent code (one lane group at a time).
    std::uint32_t result;
    asm("{\n\t.reg .pred valid;\n\tshfl.sync.down.b32 %0|valid, %1, %2, 0x1f, 0xffffffff;\n\t@!valid mov.b32 %0, "
        "0;\n\t}"
        : "=r"(result)
        : "r"(word), "r"(operand));
    (void)width;
    return result;
  }
#else
  const int w = static_cast<int>(word);
  if constexpr (kKind == ShuffleKind::kIndex) return static_cast<std::uint32_t>(__shfl(w, operand, width));
  if constexpr (kKind == ShuffleKind::kUp) return static_cast<std::uint32_t>(__shfl_up(w, operand, width));
  if constexpr (kKind == ShuffleKind::kDown) return static_cast<std::uint32_t>(__shfl_down(w, operand, width));
  if constexpr (kKind == ShuffleKind::kXor) return static_cast<std::uint32_t>(__shfl_xor(w, operand, width));
  if constexpr (kKind == ShuffleKind::kDownOrZero) {
    const auto shuffled = static_cast<std::uint32_t>(__shfl_down(w, operand, width));
    return lane_id() + operand < width ? shuffled : 0u;
  }
#endif
}

/// Shuffles any trivially copyable value as a sequence of 32-bit words.
template <ShuffleKind kKind, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T shuffle(const T& value, int operand, int width) {
  static_assert(std::is_trivially_copyable_v<T>, "warp shuffles move trivially copyable values");
  constexpr int kWords = static_cast<int>((sizeof(T) + 3) / 4);
  std::uint32_t words[kWords] = {};
  __builtin_memcpy(words, &value, sizeof(T));
  HIPGRAD_UNROLL
  for (int i = 0; i < kWords; ++i) words[i] = shuffle_word<kKind>(words[i], operand, width);
  T result;
  __builtin_memcpy(&result, words, sizeof(T));
  return result;
}

}  // namespace detail

/// The value of lane `src_lane` (within each group of `width` lanes).
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T shfl(const T& value, int src_lane, int width = warp_size()) {
  return detail::shuffle<detail::ShuffleKind::kIndex>(value, src_lane, width);
}
/// The value of lane (lane − delta); lanes below delta keep their own.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T shfl_up(const T& value, int delta, int width = warp_size()) {
  return detail::shuffle<detail::ShuffleKind::kUp>(value, delta, width);
}
/// The value of lane (lane + delta); lanes past the group's end keep their own.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T shfl_down(const T& value, int delta, int width = warp_size()) {
  return detail::shuffle<detail::ShuffleKind::kDown>(value, delta, width);
}
/// The value of lane (lane + delta) of the whole warp; all-zero words past its end.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T shfl_down_or_zero(const T& value, int delta) {
  return detail::shuffle<detail::ShuffleKind::kDownOrZero>(value, delta, warp_size());
}
/// The value of lane (lane ^ lane_mask).
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T shfl_xor(const T& value, int lane_mask, int width = warp_size()) {
  return detail::shuffle<detail::ShuffleKind::kXor>(value, lane_mask, width);
}

/// The sum of `value` over each aligned run of `lanes` lanes (a power of two, at most the warp),
/// returned to every lane of the run. A butterfly adds the same pairs in every lane, so all of
/// them get the same bits.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T warp_butterfly_sum(T value, int lanes = warp_size()) {
  for (int stride = lanes / 2; stride > 0; stride /= 2) value = value + shfl_xor(value, stride);
  return value;
}

/// Atomic read-modify-write; return the old value. Results built on atomic_add of floats are
/// order-dependent: hipgrad's default paths never use them for outputs.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T atomic_add(T* address, T value) {
  return atomicAdd(address, value);
}
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T atomic_max(T* address, T value) {
  static_assert(std::is_integral_v<T>, "atomic_max is for integers");
  return atomicMax(address, value);
}
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T atomic_cas(T* address, T expected, T desired) {
  return atomicCAS(address, expected, desired);
}

}  // namespace hipgrad
