/// @file conv_test_problems.hpp
/// @brief What the conv tests share: a layout's strides with a gap after every dimension, so
///        that no tensor of the problem is contiguous; seeded random small problems of every
///        kind; and the check that a loader's vectors and split states agree with its elements.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "hipgrad/ops/conv/problem.hpp"
#include "reference/reference_test_util.hpp"

namespace hipgrad::test {

/// A convolution of rank NDim from its sizes (per dimension: filter, input, stride, dilation, pads).
template <int NDim>
conv::ConvParams<NDim> conv_params(Index g, Index n, Index k, Index c, std::array<Index, NDim> filter,
                                   std::array<Index, NDim> input, std::array<Index, NDim> strides,
                                   std::array<Index, NDim> dilations, std::array<Index, NDim> left,
                                   std::array<Index, NDim> right) {
  conv::ConvParams<NDim> p;
  p.G = g, p.N = n, p.K = k, p.C = c;
  p.filter = filter, p.input = input, p.strides = strides, p.dilations = dilations;
  p.left_pads = left, p.right_pads = right;
  return p;
}

/// The 1-D problems the GPU tests of every conv op run (in every layout).
inline std::vector<conv::ConvParams<1>> listed_conv_problems_1d() {
  return {
      conv_params<1>(1, 2, 16, 24, {3}, {37}, {1}, {1}, {1}, {1}),  // stride 1, aligned channels
      conv_params<1>(2, 3, 5, 7, {3}, {29}, {2}, {1}, {1}, {2}),    // G 2, stride 2, odd channels
      conv_params<1>(1, 2, 8, 8, {3}, {17}, {3}, {2}, {0}, {4}),    // stride 3, dilation 2, asymmetric pads
      conv_params<1>(1, 1, 3, 5, {5}, {3}, {1}, {1}, {3}, {3}),     // filter wider than the input
      conv_params<1>(1, 2, 4, 4, {3}, {5}, {2}, {3}, {4}, {5}),     // pads beyond the filter's reach, d 3
      conv_params<1>(3, 2, 9, 11, {2}, {4}, {4}, {1}, {0}, {0}),    // output length 1, G 3
  };
}

/// The 2-D problems the GPU tests of every conv op run (in every layout).
inline std::vector<conv::ConvParams<2>> listed_conv_problems_2d() {
  return {
      conv_params<2>(1, 2, 32, 16, {3, 3}, {15, 13}, {2, 2}, {1, 1}, {1, 1}, {1, 1}),  // the seed's shape, small
      conv_params<2>(2, 1, 8, 16, {3, 3}, {9, 11}, {1, 2}, {1, 1}, {1, 0}, {2, 1}),    // unequal strides, G 2
      conv_params<2>(32, 2, 2, 3, {3, 3}, {7, 6}, {2, 1}, {2, 1}, {2, 1}, {1, 1}),     // G 32, dilation 2
      conv_params<2>(8, 2, 1, 1, {3, 3}, {9, 9}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),      // depthwise
      conv_params<2>(1, 1, 16, 8, {1, 1}, {6, 7}, {1, 1}, {1, 1}, {0, 0}, {0, 0}),     // 1×1
      conv_params<2>(1, 2, 7, 13, {2, 3}, {5, 4}, {3, 2}, {2, 3}, {3, 0}, {0, 3}),     // d 3, s 3 across dims
  };
}

/// The 3-D problems the GPU tests of every conv op run (in every layout).
inline std::vector<conv::ConvParams<3>> listed_conv_problems_3d() {
  return {
      conv_params<3>(1, 1, 16, 8, {3, 3, 3}, {5, 6, 7}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}),
      conv_params<3>(2, 2, 5, 3, {3, 2, 3}, {6, 5, 4}, {2, 1, 3}, {1, 2, 1}, {1, 0, 2}, {0, 1, 2}),
  };
}

template <int NDim>
conv::Problem<NDim> padded_conv_problem(const conv::ConvParams<NDim>& p, conv::ConvLayout layout) {
  conv::Problem<NDim> problem = conv::Problem<NDim>::packed(p, layout);
  problem.input_strides = padded_strides(p.input_lengths(), conv::activation_order<NDim>(layout));
  problem.weight_strides = padded_strides(p.weight_lengths(), conv::weight_order<NDim>(layout));
  problem.output_strides = padded_strides(p.output_lengths(), conv::activation_order<NDim>(layout));
  return problem;
}

/// Vectors of `length` from loader `l` at every (mn, k) with k (or mn) a multiple of `length`:
/// their valid elements are the element-by-element reads at consecutive addresses, and the
/// rest read as nothing; advance_k from k_state(0) meets k_state(k).
template <typename Loader>
void expect_vectors_match_elements(const Loader& l, int length) {
  // Steps of 3 and 5 too (the gather producer advances by a row step): carries over several
  // channels at once, past the last tap.
  for (int step : {3, 5}) {
    auto advanced = l.k_state(1);
    for (int k = 1; k < l.k_size() + 2 * step; k += step, l.advance_k(advanced, step)) {
      const auto direct = l.vector(0, k, 1);
      const auto split = l.vector(l.mn_state(0), advanced, 1);
      ASSERT_EQ(split.valid, direct.valid) << "k " << k << " step " << step;
      if (direct.valid > 0) {
        ASSERT_EQ(split.pointer, direct.pointer) << "k " << k << " step " << step;
      }
    }
  }
  for (int mn = 0; mn < l.mn_size(); ++mn) {
    auto advanced = l.k_state(0);
    for (int k = 0; k < l.k_size(); ++k, l.advance_k(advanced, 1)) {
      const auto direct = l.vector(mn, k, 1);
      const auto split = l.vector(l.mn_state(mn), advanced, 1);
      ASSERT_EQ(split.valid, direct.valid) << "mn " << mn << " k " << k;
      if (direct.valid > 0) {
        ASSERT_EQ(split.pointer, direct.pointer) << "mn " << mn << " k " << k;
      }
      const bool starts = Loader::kKContiguous ? k % length == 0 : mn % length == 0;
      if (!starts) continue;
      const auto v = l.vector(mn, k, length);
      for (int e = 0; e < length; ++e) {
        const int emn = Loader::kKContiguous ? mn : mn + e, ek = Loader::kKContiguous ? k + e : k;
        const bool exists = emn < l.mn_size() && ek < l.k_size() && l.vector(emn, ek, 1).valid > 0;
        if (e < v.valid) {
          ASSERT_TRUE(exists) << "mn " << mn << " k " << k << " element " << e;
          ASSERT_EQ(v.pointer + e, l.vector(emn, ek, 1).pointer) << "mn " << mn << " k " << k << " element " << e;
        } else {
          ASSERT_FALSE(exists) << "mn " << mn << " k " << k << " element " << e << " exists beyond the vector";
        }
      }
    }
  }
}

template <int NDim>
struct RandomCase {
  conv::ConvParams<NDim> params;
  conv::ConvLayout layout;
  bool padded;
};

template <int NDim>
RandomCase<NDim> random_case(std::mt19937_64& rng) {
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCase<NDim> r;
  conv::ConvParams<NDim>& p = r.params;
  p.G = pick(1, 3);
  p.N = pick(1, 2);
  p.K = pick(1, 6);
  p.C = pick(1, 6);
  for (int d = 0; d < NDim; ++d) {
    p.filter[d] = pick(1, 3);
    p.strides[d] = pick(1, 3);
    p.dilations[d] = pick(1, 3);
    p.left_pads[d] = pick(0, 3);
    p.right_pads[d] = pick(0, 3);
    const Index reach = p.dilations[d] * (p.filter[d] - 1) + 1;
    p.input[d] = pick(1, NDim == 3 ? 6 : 9);
    // Some inputs narrower than the filter's reach (the pads make it fit).
    if (p.input[d] + p.left_pads[d] + p.right_pads[d] < reach) p.right_pads[d] = reach - p.input[d] - p.left_pads[d];
  }
  const conv::ConvLayout layouts[] = {conv::ConvLayout::kNHWGC, conv::ConvLayout::kGNHWC, conv::ConvLayout::kNGCHW};
  r.layout = layouts[pick(0, 2)];
  r.padded = pick(0, 3) == 0;
  return r;
}

template <int NDim>
conv::Problem<NDim> problem_of(const RandomCase<NDim>& r) {
  return r.padded ? padded_conv_problem(r.params, r.layout) : conv::Problem<NDim>::packed(r.params, r.layout);
}

}  // namespace hipgrad::test
