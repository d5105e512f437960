/// @file test_conv_problem.cpp
/// @brief conv::ConvParams: output lengths (floor division with negative numerators), tensor
///        lengths, FLOPs, layout orders and names, and validate() with its messages.

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hipgrad/ops/conv/problem.hpp"

namespace {

using hipgrad::Index;
using hipgrad::StatusCode;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;

ConvParams<2> resnet_like() {
  ConvParams<2> p;
  p.G = 2;
  p.N = 4;
  p.K = 8;
  p.C = 3;
  p.filter = {3, 3};
  p.input = {32, 31};
  p.strides = {2, 1};
  p.dilations = {1, 2};
  p.left_pads = {1, 0};
  p.right_pads = {1, 2};
  return p;
}

ConvParams<1> conv1d(std::int64_t input, std::int64_t filter, std::int64_t stride, std::int64_t dilation,
                     std::int64_t left_pad, std::int64_t right_pad) {
  ConvParams<1> p;
  p.G = p.N = p.K = p.C = 1;
  p.filter = {filter};
  p.input = {input};
  p.strides = {stride};
  p.dilations = {dilation};
  p.left_pads = {left_pad};
  p.right_pads = {right_pad};
  return p;
}

TEST(ConvParams, OutputLengths) {
  const ConvParams<2> p = resnet_like();
  // (32 + 2 − 3)/2 + 1 = 16 (floor of 15.5); (31 + 2 − 5)/1 + 1 = 29
  EXPECT_EQ(p.output_spatial(), (std::array<std::int64_t, 2>{16, 29}));
  EXPECT_EQ(p.input_lengths(), (std::vector<Index>{2, 4, 3, 32, 31}));
  EXPECT_EQ(p.weight_lengths(), (std::vector<Index>{2, 8, 3, 3, 3}));
  EXPECT_EQ(p.output_lengths(), (std::vector<Index>{2, 4, 8, 16, 29}));
  EXPECT_EQ(p.flops(), 2LL * 2 * 4 * 8 * 3 * 9 * 16 * 29);
  EXPECT_TRUE(p.validate().is_ok()) << p.validate().to_string();
}

// Truncating division would round these negative numerators up to an output of 1 or 0.
TEST(ConvParams, OutputLengthUsesFloorDivision) {
  EXPECT_EQ(conv1d(2, 5, 2, 1, 0, 0).output_spatial()[0], -1);  // (2 − 5)/2 = −1.5 → −2, + 1
  EXPECT_EQ(conv1d(1, 3, 2, 1, 0, 0).output_spatial()[0], 0);   // (1 − 3)/2 = −1, + 1
  EXPECT_EQ(conv1d(3, 3, 3, 2, 0, 0).output_spatial()[0], 0);   // reach 5: (3 − 5)/3 = −0.67 → −1, + 1
  EXPECT_EQ(conv1d(5, 3, 3, 2, 0, 0).output_spatial()[0], 1);   // (5 − 5)/3 + 1
  EXPECT_EQ(conv1d(1, 1, 3, 1, 4, 5).output_spatial()[0], 4);   // (1 + 9 − 1)/3 + 1: padding only
}

TEST(ConvParams, LayoutOrders) {
  using hipgrad::conv::activation_order;
  using hipgrad::conv::weight_order;
  // logical activation dims: 0 G, 1 N, 2 C, 3.. spatial
  EXPECT_EQ(activation_order<2>(ConvLayout::kNHWGC), (std::vector<int>{1, 3, 4, 0, 2}));
  EXPECT_EQ(activation_order<2>(ConvLayout::kGNHWC), (std::vector<int>{0, 1, 3, 4, 2}));
  EXPECT_EQ(activation_order<2>(ConvLayout::kNGCHW), (std::vector<int>{1, 0, 2, 3, 4}));
  EXPECT_EQ(activation_order<1>(ConvLayout::kNHWGC), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(activation_order<3>(ConvLayout::kGNHWC), (std::vector<int>{0, 1, 3, 4, 5, 2}));
  EXPECT_EQ(activation_order<3>(ConvLayout::kNGCHW), (std::vector<int>{1, 0, 2, 3, 4, 5}));
  // logical weight dims: 0 G, 1 K, 2 C, 3.. filter
  EXPECT_EQ(weight_order<2>(ConvLayout::kNHWGC), (std::vector<int>{0, 1, 3, 4, 2}));
  EXPECT_EQ(weight_order<2>(ConvLayout::kGNHWC), (std::vector<int>{0, 1, 3, 4, 2}));
  EXPECT_EQ(weight_order<2>(ConvLayout::kNGCHW), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(weight_order<1>(ConvLayout::kNHWGC), (std::vector<int>{0, 1, 3, 2}));
}

TEST(ConvParams, PackedStridesOfLayouts) {
  const ConvParams<2> p = resnet_like();  // in [G2, N4, C3, H32, W31]
  // NHWGC: C fastest, then G, W, H, N.
  EXPECT_EQ(hipgrad::conv::input_strides(p, ConvLayout::kNHWGC),
            (std::vector<Index>{3, 32 * 31 * 2 * 3, 1, 31 * 2 * 3, 2 * 3}));
  // NGCHW: W fastest.
  EXPECT_EQ(hipgrad::conv::input_strides(p, ConvLayout::kNGCHW),
            (std::vector<Index>{3 * 32 * 31, 2 * 3 * 32 * 31, 32 * 31, 31, 1}));
  // GKYXC weights [G2, K8, C3, Y3, X3]
  EXPECT_EQ(hipgrad::conv::weight_strides(p, ConvLayout::kGNHWC), (std::vector<Index>{8 * 9 * 3, 9 * 3, 1, 9, 3}));
  // GNHWC output [G2, N4, K8, 16, 29]
  EXPECT_EQ(hipgrad::conv::output_strides(p, ConvLayout::kGNHWC),
            (std::vector<Index>{4 * 16 * 29 * 8, 16 * 29 * 8, 1, 29 * 8, 8}));
}

TEST(ConvParams, Names) {
  using hipgrad::conv::activation_layout_name;
  using hipgrad::conv::weight_layout_name;
  EXPECT_EQ(activation_layout_name<2>(ConvLayout::kNHWGC), "NHWGC");
  EXPECT_EQ(activation_layout_name<1>(ConvLayout::kGNHWC), "GNWC");
  EXPECT_EQ(activation_layout_name<3>(ConvLayout::kNGCHW), "NGCDHW");
  EXPECT_EQ(weight_layout_name<2>(ConvLayout::kNHWGC), "GKYXC");
  EXPECT_EQ(weight_layout_name<3>(ConvLayout::kNGCHW), "GKCZYX");
  EXPECT_EQ(resnet_like().to_string(), "conv2d_G2_N4_K8_C3_filter3x3_input32x31_stride2x1_dilation1x2_pads1x0_1x2");
}

void expect_invalid(const ConvParams<2>& p, const std::string& message) {
  const hipgrad::Status status = p.validate();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_EQ(status.message(), message);
}

TEST(ConvParams, ValidateRejectsEveryBadField) {
  ConvParams<2> p = resnet_like();
  p.G = 0;
  expect_invalid(p, "G must be positive, got 0");
  p = resnet_like();
  p.N = -1;
  expect_invalid(p, "N must be positive, got -1");
  p = resnet_like();
  p.K = 0;
  expect_invalid(p, "K must be positive, got 0");
  p = resnet_like();
  p.C = -3;
  expect_invalid(p, "C must be positive, got -3");
  p = resnet_like();
  p.filter[1] = 0;
  expect_invalid(p, "filter length 0 in dimension 1 must be positive");
  p = resnet_like();
  p.input[0] = -5;
  expect_invalid(p, "input length -5 in dimension 0 must be positive");
  p = resnet_like();
  p.strides[1] = 0;
  expect_invalid(p, "stride 0 in dimension 1 must be positive");
  p = resnet_like();
  p.dilations[0] = -1;
  expect_invalid(p, "dilation -1 in dimension 0 must be positive");
  p = resnet_like();
  p.left_pads[1] = -1;
  expect_invalid(p, "negative padding in dimension 1 (left -1, right 2)");
  p = resnet_like();
  p.right_pads[0] = -2;
  expect_invalid(p, "negative padding in dimension 0 (left 1, right -2)");
  p = resnet_like();
  p.input = {3, 31};
  p.filter = {5, 3};
  p.left_pads = {0, 0};
  p.right_pads = {0, 0};
  p.strides = {1, 1};
  expect_invalid(p, "output length in dimension 0 would be -1 (input 3, filter 5, dilation 1, pads 0+0, stride 1)");
  p.input[0] = 4;
  expect_invalid(p, "output length in dimension 0 would be 0 (input 4, filter 5, dilation 1, pads 0+0, stride 1)");
  p.left_pads[0] = 1;
  EXPECT_TRUE(p.validate().is_ok());
  EXPECT_EQ(ConvParams<3>{}.validate().message(), "G must be positive, got 0");
}

}  // namespace
