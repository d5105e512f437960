/// @file vector_access.hpp
/// @brief Aligned vectors of N elements for 16-byte (or narrower) loads and stores.
#pragma once

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

template <int N, typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store_vector(T* ptr, const Vector<T, N>& v) {
  *reinterpret_cast<Vector<T, N>*>(ptr) = v;
}

}  // namespace hipgrad
