/// @file test_torch_layout.cpp
/// @brief The PyTorch package's layout arithmetic (python/hipgrad/csrc/layout.hpp), on the CPU:
///        PyTorch's contiguous and channels-last strides of x, dy and w mapped to a call's logical
///        strides (set_conv_strides, as the ops set them) must be the strides hipgrad's own packed
///        layouts give (NGCHW / NHWGC for the activations, GKCYX / GKYXC for the weight), for
///        1-D/2-D/3-D problems with G > 1 and C ≠ K; the output length matches ConvParams's.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "conv/conv_test_problems.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "layout.hpp"

namespace {

using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;

/// PyTorch's sizes of an activation [N, G·C, spatial...] or a weight [G·K, C, filter...].
template <int NDim>
std::vector<std::int64_t> torch_sizes(std::int64_t n, std::int64_t channels, const std::array<std::int64_t, NDim>& s) {
  std::vector<std::int64_t> sizes = {n, channels};
  sizes.insert(sizes.end(), s.begin(), s.end());
  return sizes;
}

template <int NDim>
void expect_layouts_match(const ConvParams<NDim>& p) {
  SCOPED_TRACE(p.to_string());
  const auto out = p.output_spatial();
  std::array<std::int64_t, NDim> out_lengths{};
  for (int d = 0; d < NDim; ++d) {
    out_lengths[d] = out[d];
    EXPECT_EQ(hipgrad_torch::conv_output_length(p.input[d], p.filter[d], p.strides[d], p.dilations[d], p.left_pads[d],
                                                p.right_pads[d]),
              out[d]);
  }
  const auto x = torch_sizes<NDim>(p.N, p.G * p.C, p.input);
  const auto dy = torch_sizes<NDim>(p.N, p.G * p.K, out_lengths);
  const auto w = torch_sizes<NDim>(p.G * p.K, p.C, p.filter);
  const int rank = NDim + 2;
  for (bool last : {false, true}) {
    SCOPED_TRACE(last ? "channels-last" : "contiguous");
    const auto strides = [&](const std::vector<std::int64_t>& sizes) {
      return last ? hipgrad_torch::channels_last_strides(sizes) : hipgrad::packed_strides(sizes);
    };
    const ConvLayout layout = last ? ConvLayout::kNHWGC : ConvLayout::kNGCHW;
    const Problem<NDim> expected = Problem<NDim>::packed(p, layout);
    hipgrad_torch::ConvCall call;
    call.ndim = NDim, call.G = p.G, call.N = p.N, call.K = p.K, call.C = p.C;
    hipgrad_torch::set_conv_strides(&call, strides(x).data(), strides(w).data(), strides(dy).data());
    const auto logical = [&](const std::int64_t* s) { return std::vector<std::int64_t>(s, s + rank + 1); };
    EXPECT_EQ(logical(call.input_strides), expected.input_strides);
    EXPECT_EQ(logical(call.output_strides), expected.output_strides);
    EXPECT_EQ(logical(call.weight_strides), hipgrad::conv::weight_strides(p, layout));
  }
}

TEST(TorchLayout, StridesAreHipgradsPackedLayouts) {
  using hipgrad::test::conv_params;
  expect_layouts_match<1>(conv_params<1>(3, 2, 5, 7, {3}, {29}, {2}, {1}, {1}, {2}));
  expect_layouts_match<2>(conv_params<2>(4, 2, 16, 8, {3, 3}, {9, 8}, {1, 2}, {1, 1}, {1, 0}, {2, 1}));
  expect_layouts_match<2>(conv_params<2>(32, 1, 1, 1, {7, 7}, {14, 13}, {1, 1}, {2, 1}, {3, 3}, {3, 3}));
  expect_layouts_match<3>(conv_params<3>(2, 2, 3, 5, {1, 3, 3}, {4, 9, 7}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}));
}

TEST(TorchLayout, OutputLengthIsZeroWhereNoPositionFits) {
  EXPECT_EQ(hipgrad_torch::conv_output_length(4, 5, 1, 1, 0, 0), 0);
  EXPECT_EQ(hipgrad_torch::conv_output_length(4, 5, 1, 1, 1, 0), 1);
  EXPECT_EQ(hipgrad_torch::conv_output_length(8, 5, 1, 2, 0, 1), 1);
}

}  // namespace
