/// @file vector_access.hpp
/// @brief Aligned vectors of N elements for 16-byte (or narrower) loads and stores.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hipgrad/core/config.hpp"

namespace hipgrad {

/// N values of T moved as one access of sizeof(T)·N bytes (a power of two up to 16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vector {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "Vector length must be a power of two");
  T data[N];
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE T& operator[](int i) { return data[i]; }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE const T& operator[](int i) const { return data[i]; }
};

/// Elements of T in one 16-byte access.
template <typename T>
inline constexpr int kVector16 = 16 / static_cast<int>(sizeof(T));

/// Whether `ptr` is aligned for a Vector<T, N> access.
template <typename T, int N>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool is_vector_aligned(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % (sizeof(T) * N) == 0;
}

template <int N, typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE Vector<T, N> load_vector(const T* ptr) {
  return *reinterpret_cast<const Vector<T, N>*>(ptr);
}

namespace detail {
/// Element i of v as the low bits of a 32-bit word (elements of 2 or 4 bytes).
template <typename T, int N>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::uint32_t element_bits(const Vector<T, N>& v, int i) {
  if constexpr (sizeof(T) == 2) {
    std::uint16_t bits;
    __builtin_memcpy(&bits, &v.data[i], 2);
    return bits;
  } else {
    std::uint32_t bits;
    __builtin_memcpy(&bits, &v.data[i], 4);
    return bits;
  }
}

/// 32-bit word w of v.
template <typename T, int N>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::uint32_t vector_word(const Vector<T, N>& v, int w) {
  if constexpr (sizeof(T) == 2)
    return element_bits(v, 2 * w) | (element_bits(v, 2 * w + 1) << 16);
  else
    return element_bits(v, w);
}
}  // namespace detail

/// Stores v to global memory in one access. On NVIDIA, vectors of 4, 8 or 16 bytes of 2- or 4-byte
/// elements go as one st.global of 32-bit words: written as a Vector, nvcc split them into
/// up to seven 2- and 4-byte stores wherever the elements came from separate conversions, and
/// the single store made the kernels that had split stores faster.
/// The asm names no memory clobber, so that loads after it can still be scheduled before it:
/// no kernel reads back what it stores.
template <int N, typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store_vector(T* ptr, const Vector<T, N>& v) {
#if defined(HIPGRAD_BACKEND_CUDA) && defined(HIPGRAD_DEVICE_PASS)
  constexpr std::size_t kBytes = sizeof(Vector<T, N>);
  if constexpr ((sizeof(T) == 2 || sizeof(T) == 4) && kBytes == 16) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(ptr)),
                 "r"(detail::vector_word(v, 0)), "r"(detail::vector_word(v, 1)), "r"(detail::vector_word(v, 2)),
                 "r"(detail::vector_word(v, 3)));
    return;
  } else if constexpr ((sizeof(T) == 2 || sizeof(T) == 4) && kBytes == 8) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(__cvta_generic_to_global(ptr)),
                 "r"(detail::vector_word(v, 0)), "r"(detail::vector_word(v, 1)));
    return;
  } else if constexpr (sizeof(T) == 2 && kBytes == 4) {
    asm volatile("st.global.b32 [%0], %1;" ::"l"(__cvta_generic_to_global(ptr)), "r"(detail::vector_word(v, 0)));
    return;
  }
#endif
  *reinterpret_cast<Vector<T, N>*>(ptr) = v;
}

}  // namespace hipgrad
