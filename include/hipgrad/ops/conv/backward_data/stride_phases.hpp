/// @file stride_phases.hpp
/// @brief Backward-data's stride phases: the dx positions of one residue class per dimension meet
///        the taps of one residue class only, so each class is a dense sub-problem (an implicit
///        GEMM without the zeros a strided convolution would insert).
///
/// Per dimension, with x' = x + left_pad: dy position o meets dx position x through tap f when
/// x' − f·d = o·s, i.e. f·d ≡ x' (mod s). The classes r = x' mod s (s of them) split dx; with
/// g = gcd(s, d), class r meets taps only when g divides r, and then exactly the taps
/// f ≡ f0 (mod s / g), where f0 = (r / g)·(d / g)⁻¹ mod (s / g). For x = first + i·s and
/// f = f0 + j·(s / g): o = base + i − j·(d / g), base = (first + left_pad − f0·d) / s (exact).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::conv::detail {

/// One dimension of a phase: dx positions first + i·stride (i < count), taps first_tap +
/// j·tap_step (j < taps), dy position output_base + i − j·tap_dilation.
struct DimensionPhase {
  Index first = 0;
  Index count = 0;
  Index first_tap = 0;
  Index taps = 0;
  Index tap_step = 1;
  Index tap_dilation = 1;
  Index output_base = 0;
};

/// (a mod m) in [0, m) for m > 0.
inline Index positive_mod(Index a, Index m) { return ((a % m) + m) % m; }

/// x with x·a ≡ 1 (mod m), for gcd(a, m) = 1 and m ≥ 1 (0 when m = 1).
inline Index modular_inverse(Index a, Index m) {
  if (m == 1) return 0;
  Index old_r = positive_mod(a, m), r = m, old_s = 1, s = 0;
  while (r != 0) {
    const Index q = old_r / r;
    const Index next_r = old_r - q * r, next_s = old_s - q * s;
    old_r = r, r = next_r, old_s = s, s = next_s;
  }
  return positive_mod(old_s, m);
}

/// The `stride` classes of one dimension of dx (input length X, filter F, stride s, dilation d,
/// left pad), class r at index r.
inline std::vector<DimensionPhase> dimension_phases(Index input, Index filter, Index stride, Index dilation,
                                                    Index left_pad) {
  std::vector<DimensionPhase> phases(static_cast<std::size_t>(stride));
  const Index g = greatest_common_divisor(stride, dilation);
  for (Index r = 0; r < stride; ++r) {
    DimensionPhase& p = phases[static_cast<std::size_t>(r)];
    p.first = positive_mod(r - left_pad, stride);
    p.count = p.first < input ? (input - 1 - p.first) / stride + 1 : 0;
    p.tap_step = stride / g;
    p.tap_dilation = dilation / g;
    if (r % g != 0) continue;  // no tap: the class is written as zeros
    p.first_tap = positive_mod((r / g) * modular_inverse(dilation / g, stride / g), stride / g);
    p.taps = p.first_tap < filter ? (filter - 1 - p.first_tap) / p.tap_step + 1 : 0;
    p.output_base = (p.first + left_pad - p.first_tap * dilation) / stride;
  }
  return phases;
}

/// A phase of every dimension.
template <int NDim>
using Phase = std::array<DimensionPhase, NDim>;

/// Every phase with dx positions (Π count > 0), the last dimension's class fastest: the
/// product of the dimensions' classes.
template <int NDim>
std::vector<Phase<NDim>> stride_phases(const std::array<Index, NDim>& input, const std::array<Index, NDim>& filter,
                                       const std::array<Index, NDim>& strides, const std::array<Index, NDim>& dilations,
                                       const std::array<Index, NDim>& left_pads) {
  std::array<std::vector<DimensionPhase>, NDim> per_dimension;
  for (int d = 0; d < NDim; ++d) {
    per_dimension[d] = dimension_phases(input[d], filter[d], strides[d], dilations[d], left_pads[d]);
  }
  std::vector<Phase<NDim>> phases;
  std::array<std::size_t, NDim> at{};
  for (;;) {
    Phase<NDim> p{};
    bool positions = true;
    for (int d = 0; d < NDim; ++d) {
      p[d] = per_dimension[d][at[d]];
      positions = positions && p[d].count > 0;
    }
    if (positions) phases.push_back(p);
    int d = NDim - 1;
    for (; d >= 0; --d) {
      if (++at[d] < per_dimension[d].size()) break;
      at[d] = 0;
    }
    if (d < 0) return phases;
  }
}

}  // namespace hipgrad::conv::detail
