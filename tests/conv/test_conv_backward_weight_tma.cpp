/// @file test_conv_backward_weight_tma.cpp
/// @brief Backward-weight's box path (backward_weight_tma.hpp) on the CPU: the op's plan read
///        through its maps' shapes as TMA reads them (strided steps along x, zeros outside) at the
///        coordinates the producer makes, K tile by K tile and panel by panel, the block tiles
///        through the sub-problems' epilogues and the splits' sums through the fixed-order
///        reduction, give the reference dw bit for bit on seeded random problems of every rank,
///        layout and group count the maps take, with x infinite wherever the convolution does
///        not read it; every dw element stored once. Also: the boxes' shape, and the blocker.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conv/conv_test_boxes.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/backward_weight/boxes.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "reference/reference_test_util.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::gemm::TensorMapShape;
using hipgrad::host::Tensor;
using hipgrad::test::count_store;
using hipgrad::test::load_box;
namespace cd = hipgrad::conv::detail;
namespace ref = hipgrad::host::reference;

constexpr int kElementBytes = 4;              // fp32 data: a panel is 32 channels
constexpr int kPanel = cd::kTmaRowBytes / 4;  // and a K tile 32 positions

/// dw through the op's plan: per sub-problem and block tile, per K tile the operands' panels
/// (DyBoxRows / XBoxPatches::coordinates, what their device loads issue) read through the planned
/// maps, the block tile handed to the sub-problem's epilogue; with several splits their sums
/// added in split order through the reduction's epilogue. Counts the stores to dw.
template <int NDim>
void planned_backward_weight(const Problem<NDim>& problem, const Tensor<float>& x, const Tensor<float>& dy,
                             Tensor<float>& dw, std::vector<int>& stores, int block_m, int block_n, int splits) {
  alignas(16) static const unsigned char maps_base[2 * cd::kTensorMapBytes] = {};
  const ConvParams<NDim>& p = problem.params;
  const Index cp = cd::panel_channels<float>(p.C);
  const cd::WeightExtents e = cd::weight_extents<NDim>(problem, cp);
  std::vector<float> sums(static_cast<std::size_t>(splits * p.G * e.m * e.n), std::numeric_limits<float>::quiet_NaN());
  const cd::WeightBoxPlan<float, NDim> plan =
      cd::weight_box_plan<float, NDim>(problem, cd::weight_position_boxes(problem, kPanel), dw.data(), maps_base,
                                       block_m, block_n, kPanel * cd::kTmaRowBytes, splits, sums.data());
  ASSERT_EQ(plan.maps.size(), 2u);
  ASSERT_EQ(plan.problems.size(), static_cast<std::size_t>(splits * p.G));
  stores.assign(dw.storage().size(), 0);
  Index k_tiles = 0;
  for (const cd::WeightBoxSubProblem<float, NDim>& s : plan.problems) {
    ASSERT_EQ(s.a.map, maps_base);
    ASSERT_EQ(s.b.map, maps_base + cd::kTensorMapBytes);
    const TensorMapShape& a_map = plan.maps[0];
    const TensorMapShape& b_map = plan.maps[1];
    ASSERT_EQ(s.a.k_extent, s.b.k_extent);
    ASSERT_EQ(s.a.k_extent % kPanel, 0);
    ASSERT_EQ(s.a.tile_bytes(), s.a.panels * a_map.box_bytes());
    ASSERT_EQ(s.b.tile_bytes(), s.b.panels * b_map.box_bytes());
    ASSERT_EQ(a_map.box_bytes(), kPanel * cd::kTmaRowBytes);  // a box fills a panel: K tile × 128 bytes
    ASSERT_EQ(b_map.box_bytes(), kPanel * cd::kTmaRowBytes);
    k_tiles += s.a.k_extent / kPanel;
    for (int m_base = 0; m_base < s.a.mn_size(); m_base += block_m) {
      for (int n_base = 0; n_base < s.b.mn_size(); n_base += block_n) {
        std::vector<double> acc(static_cast<std::size_t>(block_m * block_n), 0.0);
        for (int k_base = 0; k_base < s.a.k_extent; k_base += kPanel) {
          for (int pa = 0; pa < s.a.panels; ++pa) {
            int c[TensorMapShape::kMaxRank] = {};
            ASSERT_EQ(s.a.coordinates(m_base, k_base, pa, c), a_map.rank);
            const std::vector<float> a = load_box(a_map, dy.data(), c);  // positions × 32 k
            for (int pb = 0; pb < s.b.panels; ++pb) {
              ASSERT_EQ(s.b.coordinates(n_base, k_base, pb, c), b_map.rank);
              const std::vector<float> b = load_box(b_map, x.data(), c);  // positions × 32 c
              for (int r = 0; r < kPanel; ++r) {
                for (int i = 0; i < kPanel; ++i) {
                  for (int j = 0; j < kPanel; ++j) {
                    acc[static_cast<std::size_t>((pa * kPanel + i) * block_n + pb * kPanel + j)] +=
                        static_cast<double>(a[static_cast<std::size_t>(r * kPanel + i)]) *
                        b[static_cast<std::size_t>(r * kPanel + j)];
                  }
                }
              }
            }
          }
        }
        for (int i = 0; i < block_m; ++i) {
          for (int j = 0; j < block_n; ++j) {
            const int m = m_base + i, col = n_base + j;
            Index at = 0;
            if (splits == 1 && m < s.epilogue.m_size && col < s.epilogue.n_size && s.epilogue.offset(m, col, &at) &&
                !count_store(stores, s.epilogue.out - dw.data() + at)) {
              return;
            }
            s.epilogue.store(m, col, static_cast<float>(acc[static_cast<std::size_t>(i * block_n + j)]), 0);
          }
        }
      }
    }
  }
  EXPECT_EQ(k_tiles * kPanel, cd::weight_position_boxes(problem, kPanel).tiles() * kPanel * p.G)
      << "the splits share every box of every group once";
  if (splits == 1) return;
  // The reduction: element (m, n) of every split's rows, added in split order, converted once.
  const cd::DwStore<float, NDim> whole = cd::dw_store<float, NDim>(problem, dw.data(), cp);
  const Index per_split = p.G * e.m * e.n;
  for (int m = 0; m < whole.m_size; ++m) {
    for (int col = 0; col < whole.n_size; ++col) {
      float v = 0.0f;
      for (int split = 0; split < splits; ++split)
        v += sums[static_cast<std::size_t>(split * per_split + m * e.n + col)];
      Index at = 0;
      if (whole.offset(m, col, &at) && !count_store(stores, at)) return;
      whole.store(m, col, v, 0);
    }
  }
}

/// x with +inf at every element the convolution never reads (per dimension, an input position no
/// output position and tap reaches): the box path must not multiply them, even by zero.
template <int NDim>
void poison_unread_x(Tensor<float>& x, const ConvParams<NDim>& p) {
  const auto out = p.output_spatial();
  std::vector<std::vector<bool>> read(NDim);
  for (int d = 0; d < NDim; ++d) {
    read[d].assign(static_cast<std::size_t>(p.input[d]), false);
    for (Index o = 0; o < out[static_cast<std::size_t>(d)]; ++o) {
      for (Index f = 0; f < p.filter[d]; ++f) {
        const Index i = o * p.strides[d] + f * p.dilations[d] - p.left_pads[d];
        if (i >= 0 && i < p.input[d]) read[d][static_cast<std::size_t>(i)] = true;
      }
    }
  }
  x.for_each_index([&](const std::vector<Index>& i) {
    for (int d = 0; d < NDim; ++d) {
      if (!read[d][static_cast<std::size_t>(i[3 + static_cast<std::size_t>(d)])]) {
        x(i) = std::numeric_limits<float>::infinity();
        return;
      }
    }
  });
}

template <int NDim>
void check_random_problems(unsigned seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < count; ++trial) {
    ConvParams<NDim> p;
    const bool gapped = trial % 2 == 1;
    // Grouped 3-D maps fit five dimensions where g folds into the channels (packed NHWGC,
    // channels whole panels) or N = 1.
    const bool grouped_3d = NDim == 3 && trial % 3 == 0, folded = grouped_3d && !gapped;
    // Packed channels must keep every stride a multiple of 16 bytes: K and C multiples of 4.
    p.G = NDim == 3 ? (grouped_3d ? 2 : 1) : pick(1, 3), p.N = grouped_3d && !folded ? 1 : pick(1, 3);
    p.K = folded ? kPanel * pick(1, 2) : gapped ? pick(1, 70) : 4 * pick(1, 17);
    p.C = folded ? kPanel * pick(1, 2) : gapped ? pick(1, 70) : 4 * pick(1, 17);
    for (int d = 0; d < NDim; ++d) {
      p.filter[d] = pick(1, 3), p.strides[d] = pick(1, 3), p.dilations[d] = pick(1, 3);
      p.left_pads[d] = pick(0, 3), p.right_pads[d] = pick(0, 3);
      p.input[d] = pick(1, NDim == 3 ? 7 : 12);
      const Index reach = p.dilations[d] * (p.filter[d] - 1) + 1;
      if (p.input[d] + p.left_pads[d] + p.right_pads[d] < reach) p.right_pads[d] = reach - p.input[d] - p.left_pads[d];
    }
    const ConvLayout layout = folded || trial % 4 < 2 ? ConvLayout::kNHWGC : ConvLayout::kGNHWC;
    Problem<NDim> problem = Problem<NDim>::packed(p, layout);
    if (gapped) {
      const std::vector<bool> every(static_cast<std::size_t>(3 + NDim), true);
      problem.output_strides =
          hipgrad::test::gapped_strides(p.output_lengths(), hipgrad::conv::activation_order<NDim>(layout), every);
      problem.input_strides =
          hipgrad::test::gapped_strides(p.input_lengths(), hipgrad::conv::activation_order<NDim>(layout), every);
      problem.weight_strides =
          hipgrad::test::gapped_strides(p.weight_lengths(), hipgrad::conv::weight_order<NDim>(layout), every);
    }
    const int splits = pick(1, 3), block_m = kPanel << pick(0, 1), block_n = kPanel * pick(1, 3);
    SCOPED_TRACE(p.to_string() + (gapped ? " gapped" : " packed") +
                 (layout == ConvLayout::kNHWGC ? " NHWGC" : " GNHWC") + " splits " + std::to_string(splits) +
                 " blocks " + std::to_string(block_m) + " x " + std::to_string(block_n));
    ASSERT_TRUE(problem.validate().is_ok());
    Tensor<float> x = hipgrad::test::filled_integers(p.input_lengths(), problem.input_strides, rng);
    poison_unread_x<NDim>(x, p);
    const Tensor<float> dy = hipgrad::test::filled_integers(p.output_lengths(), problem.output_strides, rng);
    Tensor<float> dw(p.weight_lengths(), problem.weight_strides), expected(p.weight_lengths(), problem.weight_strides);
    hipgrad::test::fill_nan(dw);
    hipgrad::test::fill_nan(expected);
    const char* blocker = cd::backward_weight_tma_blocker(problem, x.data(), dy.data(), kElementBytes);
    ASSERT_EQ(blocker, nullptr) << blocker;
    if (folded) EXPECT_TRUE(cd::activation_map_form(problem, true, kElementBytes).fold_groups);
    ASSERT_TRUE(ref::conv_backward_weight(x, dy, expected, p).is_ok());
    std::vector<int> stores;
    planned_backward_weight<NDim>(problem, x, dy, dw, stores, block_m, block_n, splits);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, dw));
    EXPECT_EQ(stores, hipgrad::test::logical_elements(dw)) << "every dw element stored once, nothing else";
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ConvBackwardWeightTma, BoxesThroughTheMapsMatchTheReference1D) { check_random_problems<1>(601, 40); }
TEST(ConvBackwardWeightTma, BoxesThroughTheMapsMatchTheReference2D) { check_random_problems<2>(602, 30); }
TEST(ConvBackwardWeightTma, BoxesThroughTheMapsMatchTheReference3D) { check_random_problems<3>(603, 18); }

/// The boxes hold exactly the K tile's positions, tile the listed problems without waste where
/// the powers of two allow, and never reach past the grid where x lies beyond it.
TEST(ConvBackwardWeightTma, PositionBoxes) {
  ConvParams<2> seed;  // N128 K256 C128 71² 3×3 s2 p1: a 36 × 36 output
  seed.G = 1, seed.N = 128, seed.K = 256, seed.C = 128, seed.filter = {3, 3}, seed.input = {71, 71};
  seed.strides = {2, 2}, seed.dilations = {1, 1}, seed.left_pads = {1, 1}, seed.right_pads = {1, 1};
  const cd::PositionBoxes<2> b = cd::weight_position_boxes(Problem<2>::packed(seed), 64);
  EXPECT_EQ(b.rows(), 64);
  EXPECT_EQ(b.tiles() * 64, 128 * 36 * 36) << b.shape[0] << " " << b.shape[1] << " " << b.shape[2];
  // Input 8, filter 1, stride 3: outputs read x at 0, 3, 6; x[7] lies past the grid's reach, so
  // no box may overhang the 3 outputs: a shape of 1 along them, the rest along n.
  ConvParams<1> leftover;
  leftover.G = 1, leftover.N = 64, leftover.K = 4, leftover.C = 4, leftover.filter = {1}, leftover.input = {8};
  leftover.strides = {3}, leftover.dilations = {1}, leftover.left_pads = {0}, leftover.right_pads = {0};
  const cd::PositionBoxes<1> l = cd::weight_position_boxes(Problem<1>::packed(leftover), 64);
  EXPECT_EQ(l.rows(), 64);
  EXPECT_EQ(3 % l.shape[1], 0);
  // CK's default problem (G4 N1 3³ filter, pad 1, 14³): a box may overhang the 14 outputs, whose
  // reads past them land on x read anyway or outside it: 2 × 2 × 16 boxes, 49 a group.
  ConvParams<3> ck;
  ck.G = 4, ck.N = 1, ck.K = 128, ck.C = 256, ck.filter = {3, 3, 3}, ck.input = {14, 14, 14};
  ck.strides = {1, 1, 1}, ck.dilations = {1, 1, 1}, ck.left_pads = {1, 1, 1}, ck.right_pads = {1, 1, 1};
  const cd::PositionBoxes<3> c = cd::weight_position_boxes(Problem<3>::packed(ck), 64);
  EXPECT_EQ(c.rows(), 64);
  EXPECT_EQ(c.tiles(), 49);
  // x's box spans shape × stride input positions, at most 256.
  ConvParams<1> strided = leftover;
  strided.N = 1, strided.input = {4096}, strided.strides = {8};
  const cd::PositionBoxes<1> s = cd::weight_position_boxes(Problem<1>::packed(strided), 64);
  EXPECT_EQ(s.rows(), 64);
  EXPECT_LE(s.shape[1] * 8, 256);
  const TensorMapShape x = cd::x_box_map(Problem<1>::packed(strided), 2, s);
  EXPECT_EQ(x.element_stride[1], 8);
  EXPECT_EQ(x.box_elements(1), s.shape[1]);
  EXPECT_EQ(x.box_bytes(), 64 * 128);
}

/// The blocker names each rule the maps break.
TEST(ConvBackwardWeightTma, BlockerNamesWhatTheMapsCannotRead) {
  alignas(16) static float storage[8];
  const void* base = storage;
  ConvParams<2> p;
  p.G = 2, p.N = 2, p.K = 8, p.C = 8, p.filter = {3, 3}, p.input = {9, 9}, p.strides = {2, 2};
  p.dilations = {1, 1}, p.left_pads = {1, 1}, p.right_pads = {1, 1};
  auto blocker = [&](const auto& problem, const void* at) {
    const char* b = cd::backward_weight_tma_blocker(problem, at, at, 2);
    return std::string(b == nullptr ? "" : b);
  };
  EXPECT_EQ(blocker(Problem<2>::packed(p, ConvLayout::kNHWGC), base), "");
  EXPECT_NE(blocker(Problem<2>::packed(p, ConvLayout::kNGCHW), base).find("channels"), std::string::npos);
  EXPECT_NE(blocker(Problem<2>::packed(p, ConvLayout::kNHWGC), static_cast<const char*>(base) + 2).find("aligned"),
            std::string::npos);
  ConvParams<2> far = p;
  far.strides = {9, 9};
  EXPECT_NE(blocker(Problem<2>::packed(far, ConvLayout::kNHWGC), base).find("stride above 8"), std::string::npos);
  ConvParams<3> grouped3d;
  grouped3d.G = 2, grouped3d.N = 1, grouped3d.K = 8, grouped3d.C = 8, grouped3d.filter = {1, 1, 1};
  grouped3d.input = {2, 2, 2}, grouped3d.strides = {1, 1, 1}, grouped3d.dilations = {1, 1, 1};
  grouped3d.left_pads = {0, 0, 0}, grouped3d.right_pads = {0, 0, 0};
  EXPECT_EQ(blocker(Problem<3>::packed(grouped3d, ConvLayout::kNHWGC), base), "");  // N = 1: no n dimension
  grouped3d.N = 2;
  EXPECT_NE(blocker(Problem<3>::packed(grouped3d, ConvLayout::kNHWGC), base).find("six"), std::string::npos);
  grouped3d.K = 64, grouped3d.C = 64;  // g folds into whole panels of channels
  EXPECT_EQ(blocker(Problem<3>::packed(grouped3d, ConvLayout::kNHWGC), base), "");
  EXPECT_NE(blocker(Problem<3>::packed(grouped3d, ConvLayout::kGNHWC), base).find("six"), std::string::npos);
  ConvParams<2> odd = p;
  odd.C = 3;  // x's w stride: G·C = 6 elements, 12 bytes
  EXPECT_NE(blocker(Problem<2>::packed(odd, ConvLayout::kNHWGC), base).find("16 bytes"), std::string::npos);
}

}  // namespace
