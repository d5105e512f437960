/// @file packed_groups_kernels.hpp
/// @brief Device: the index map between a weight in the caller's strides and its block-diagonal
///        packing (packed_groups.hpp), for mapped_copy.hpp's copies: spread w into the packed
///        weight, zeros off the diagonal blocks (backward-data), and gather dw from the packed
///        dw's diagonal blocks (backward-weight).
#pragma once

#include <algorithm>
#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/common/mapped_copy.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::detail {

/// The copy between a weight [G, K, C, filter...] at the caller's strides and its packing
/// [G / P, P·K, taps, P·C] (packed).
template <typename T, int NDim>
struct PackedWeightParams {
  const T* from = nullptr;
  T* to = nullptr;
  bool spread = true;                   ///< weight → packing (zeros off the diagonal); else packing → weight
  std::int64_t groups = 1;              ///< P
  std::int64_t k = 1, c = 1, taps = 1;  ///< per group, unpacked
  std::int64_t elements = 0;            ///< of the packing
  std::int64_t filter[NDim] = {};       ///< lengths
  std::int64_t strides[3 + NDim] = {};  ///< the caller's weight strides [G, K, C, filter...]
};

/// The caller's weight offset of packed element `i`, or -1 where it lies off the diagonal blocks.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t packed_weight_source(const PackedWeightParams<T, NDim>& p,
                                                                     std::int64_t i) {
  const std::int64_t wide_c = p.groups * p.c, wide_k = p.groups * p.k;
  const std::int64_t cc = i % wide_c;
  i /= wide_c;
  std::int64_t tap = i % p.taps;
  i /= p.taps;
  const std::int64_t kk = i % wide_k, block = cc / p.c;
  if (kk / p.k != block) return -1;
  const std::int64_t g = (i / wide_k) * p.groups + block;
  std::int64_t offset = g * p.strides[0] + (kk % p.k) * p.strides[1] + (cc % p.c) * p.strides[2];
  for (int d = NDim - 1; d >= 0; --d) {
    offset += (tap % p.filter[d]) * p.strides[3 + d];
    tap /= p.filter[d];
  }
  return offset;
}

/// mapped_copy_kernel's map of the packed weight.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t mapped_offset(const PackedWeightParams<T, NDim>& p, std::int64_t i) {
  return packed_weight_source(p, i);
}

/// The copy's parameters for `problem` (unpacked) packed by `groups`.
template <typename T, int NDim>
PackedWeightParams<T, NDim> packed_weight_params(const Problem<NDim>& problem, int groups, bool spread) {
  const ConvParams<NDim>& cp = problem.params;
  PackedWeightParams<T, NDim> p;
  p.spread = spread;
  p.groups = groups, p.k = cp.K, p.c = cp.C;
  for (int d = 0; d < NDim; ++d) p.filter[d] = cp.filter[d], p.taps *= cp.filter[d];
  for (int d = 0; d < 3 + NDim; ++d) p.strides[d] = problem.weight_strides[static_cast<std::size_t>(d)];
  p.elements = cp.G * cp.K * cp.C * p.taps * groups;
  return p;
}

}  // namespace hipgrad::conv::detail
