/// @file operand_loader.hpp
/// @brief Operand loaders: where element (mn, k) of a GEMM operand lives in global memory.
///
/// The mainloops never index a matrix themselves; they ask a loader. "MN" is M for A[M, K] and
/// N for B[K, N]. A loader provides
///
///   using Element = T;
///   static constexpr bool kKContiguous;     // vector reads run along K (else along MN)
///   int mn_size() const, k_size() const;    // the operand's extent
///   VectorSource<T> vector(int mn, int k, int length) const;
///       // the address of element (mn, k) and how many of the `length` elements from there along
///       // the contiguous dimension exist (0..length), which lie at consecutive addresses; with 0
///       // the address is any readable one and (mn, k) reads as zero
///   bool vectors_aligned(int length) const; // every vector(…, length) start is length·sizeof(T) aligned
///
/// DenseOperand below is a row- or column-major matrix. An implicit-im2col loader of a
/// convolution provides the same members: with channels-last tensors a K vector is `length`
/// consecutive channels of one filter tap, so `vector` returns the address of input pixel
/// (n, oh·s − p + r·d, …, c) and 0 valid elements where the tap falls into the padding.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::gemm {

template <typename T>
struct VectorSource {
  const T* pointer;
  int valid;
};

/// A dense operand: element (mn, k) at data[mn·stride + k] when K-contiguous, data[k·stride + mn]
/// otherwise (stride: the leading dimension, in elements).
template <typename T, bool kKContiguous_>
struct DenseOperand {
  using Element = T;
  static constexpr bool kKContiguous = kKContiguous_;

  const T* data;
  Index stride;
  int mn_extent;
  int k_extent;

  HIPGRAD_HOST_DEVICE int mn_size() const { return mn_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return k_extent; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE VectorSource<T> vector(int mn, int k, int length) const {
    const int outer = kKContiguous ? mn : k, inner = kKContiguous ? k : mn;
    const int outer_size = kKContiguous ? mn_extent : k_extent, inner_size = kKContiguous ? k_extent : mn_extent;
    if (outer >= outer_size || inner >= inner_size) return {data, 0};
    const int rest = inner_size - inner;
    return {data + static_cast<Index>(outer) * stride + inner, rest < length ? rest : length};
  }

  HIPGRAD_HOST_DEVICE bool vectors_aligned(int length) const {
    const auto bytes = static_cast<std::uintptr_t>(length) * sizeof(T);
    return reinterpret_cast<std::uintptr_t>(data) % bytes == 0 && stride % length == 0;
  }
};

}  // namespace hipgrad::gemm
