/// @file array.hpp
/// @brief A fixed-size array usable in device code, with element-wise + and max so that several
///        values can be reduced in one call (for example Σdy and Σdy·x together).
#pragma once

#include "hipgrad/core/config.hpp"

namespace hipgrad {

template <typename T, int N>
struct Array {
  static_assert(N > 0, "Array needs at least one element");
  T data[N];

  HIPGRAD_HOST_DEVICE static constexpr int size() { return N; }
  HIPGRAD_HOST_DEVICE constexpr T& operator[](int i) { return data[i]; }
  HIPGRAD_HOST_DEVICE constexpr const T& operator[](int i) const { return data[i]; }

  /// Every element set to `value`.
  HIPGRAD_HOST_DEVICE static constexpr Array filled(T value) {
    Array a{};
    for (int i = 0; i < N; ++i) a.data[i] = value;
    return a;
  }
};

template <typename T, int N>
HIPGRAD_HOST_DEVICE constexpr Array<T, N> operator+(const Array<T, N>& a, const Array<T, N>& b) {
  Array<T, N> r{};
  HIPGRAD_UNROLL
  for (int i = 0; i < N; ++i) r.data[i] = a.data[i] + b.data[i];
  return r;
}

template <typename T, int N>
HIPGRAD_HOST_DEVICE constexpr Array<T, N> elementwise_max(const Array<T, N>& a, const Array<T, N>& b) {
  Array<T, N> r{};
  HIPGRAD_UNROLL
  for (int i = 0; i < N; ++i) r.data[i] = a.data[i] < b.data[i] ? b.data[i] : a.data[i];
  return r;
}

}  // namespace hipgrad
