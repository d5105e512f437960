/// @file test_conv_backward_data_tma.cpp
/// @brief Backward-data's tensor maps (backward_data_tma.hpp), checked on the CPU: boxes read
///        through the maps' shapes as TMA reads them (byte strides from the tensors' bases, zeros
///        at coordinates outside, the whole box counted) at the coordinates the producer makes
///        give the reference dx on seeded random problems of every rank, layout and group count
///        the maps take, every dx element stored once; and the blocker names what they cannot read.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/backward_data/boxes.hpp"
#include "hipgrad/ops/conv/common/position_boxes.hpp"
#include "hipgrad/ops/conv/backward_data/stride_phases.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "conv/conv_test_boxes.hpp"
#include "reference/reference_test_util.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::gemm::TensorMapShape;
using hipgrad::host::Tensor;
using hipgrad::test::count_store;
using hipgrad::test::gapped_strides;
using hipgrad::test::load_box;
namespace cd = hipgrad::conv::detail;
namespace ref = hipgrad::host::reference;

constexpr int kElementBytes = 4;  // fp32 data: a K tile and a panel are 32 channels

/// dx of backward-data as the TMA producer and the box epilogue make it: per sub-problem (group,
/// phase) and M tile (a box of the phase's positions), per K tile one dy box and a w box per
/// panel at the coordinates of TmaTapCoordinates; every row of the tile handed to BoxScatter,
/// which stores those inside the grid. Counts the stores per element.
template <int NDim>
void tma_backward_data(const Problem<NDim>& problem, const Tensor<float>& dy, const Tensor<float>& w, Tensor<float>& dx,
                       std::vector<int>& stores, int rows) {
  const ConvParams<NDim>& p = problem.params;
  const TensorMapShape w_map = cd::w_tensor_map(problem, kElementBytes);
  const int panel = cd::kTmaRowBytes / kElementBytes;
  std::array<Index, NDim> input{}, filter{}, strides{}, dilations{}, left{};
  for (int d = 0; d < NDim; ++d) {
    input[d] = p.input[d], filter[d] = p.filter[d], strides[d] = p.strides[d];
    dilations[d] = p.dilations[d], left[d] = p.left_pads[d];
  }
  stores.assign(dx.storage().size(), 0);
  for (Index g = 0; g < p.G; ++g) {
    for (const cd::Phase<NDim>& phase : cd::stride_phases<NDim>(input, filter, strides, dilations, left)) {
      std::array<Index, NDim + 1> extent{};
      extent[0] = p.N;
      Index taps = 1;
      for (int d = 0; d < NDim; ++d) extent[d + 1] = phase[d].count, taps *= phase[d].taps;
      const cd::PositionBoxes<NDim> boxes = cd::position_boxes<NDim>(extent, rows);
      const TensorMapShape dy_map = cd::dy_tensor_map(problem, kElementBytes, boxes);
      const cd::TmaTapCoordinates<NDim> at_tap = cd::tma_tap_coordinates<NDim>(problem, phase, g, kElementBytes);
      const Index k_tiles = taps * ((p.K + at_tap.bk - 1) / at_tap.bk);
      const cd::BoxScatter<float, NDim> scatter = cd::box_scatter<float, NDim>(problem, dx.data(), g, phase, boxes, rows);
      ASSERT_EQ(scatter.m_size, boxes.tiles() * rows);
      Index first[NDim + 1], point[NDim + 1];
      for (Index t = 0; t < boxes.tiles(); ++t) {
        boxes.origin(t, first);
        int origin[NDim + 1];
        for (int d = 0; d <= NDim; ++d) origin[d] = static_cast<int>(first[d]);
        std::vector<double> acc(static_cast<std::size_t>(rows * p.C), 0.0);
        for (Index kt = 0; kt < k_tiles; ++kt) {
          int c[TensorMapShape::kMaxRank] = {};
          ASSERT_EQ(at_tap.dy_box(origin, static_cast<int>(kt), c), dy_map.rank);
          const std::vector<float> a = load_box(dy_map, dy.data(), c);  // box rows × bk
          for (int c0 = 0; c0 < p.C; c0 += panel) {
            ASSERT_EQ(at_tap.w_box(static_cast<int>(kt), c0, c), w_map.rank);
            const std::vector<float> b = load_box(w_map, w.data(), c);  // bk × panel
            for (int r = 0; r < boxes.rows(); ++r) {
              for (int k = 0; k < at_tap.bk; ++k) {
                const double x = a[static_cast<std::size_t>(r * at_tap.bk + k)];
                for (int cc = 0; cc < panel && c0 + cc < p.C; ++cc) {
                  acc[static_cast<std::size_t>(r * p.C + c0 + cc)] += x * b[static_cast<std::size_t>(k * panel + cc)];
                }
              }
            }
          }
        }
        // Every row of the tile through the box epilogue, as the GPU's consumers hand them over.
        for (int r = 0; r < rows; ++r) {
          const int m = static_cast<int>(t) * rows + r;
          Index offset = 0;
          const bool stored = scatter.row_offset(m, &offset);
          EXPECT_EQ(stored, boxes.point(first, r, point)) << "row " << r;
          for (int ch = 0; ch < p.C; ++ch) {
            if (stored && !count_store(stores, scatter.out - dx.data() + offset + ch * scatter.stride_c)) return;
            scatter.store(m, ch, static_cast<float>(acc[static_cast<std::size_t>(r * p.C + ch)]), 0);
          }
        }
      }
    }
  }
}

/// dx through the op's own plan (box_plan): per sub-problem and block tile, the operands' copy
/// coordinates (DyBoxes / WBoxes::coordinates, what their device loads issue) read through the
/// planned maps, K tiles and panels as the sub-problem's extents say, every element of the block
/// tile handed to its epilogue. Counts the stores per element.
template <int NDim>
void planned_backward_data(const Problem<NDim>& problem, const Tensor<float>& dy, const Tensor<float>& w,
                           Tensor<float>& dx, std::vector<int>& stores, int block_m, int block_n) {
  alignas(16) static const unsigned char maps_base[16] = {};
  const int bk = cd::kTmaRowBytes / kElementBytes;
  const cd::BoxPlan<float, NDim> plan =
      cd::box_plan<float, NDim>(problem, dx.data(), maps_base, block_m, block_n, bk * cd::kTmaRowBytes);
  ASSERT_EQ(plan.problems.size(), static_cast<std::size_t>(problem.params.G) *
                                      cd::stride_phases<NDim>(problem.params.input, problem.params.filter,
                                                              problem.params.strides, problem.params.dilations,
                                                              problem.params.left_pads).size());
  stores.assign(dx.storage().size(), 0);
  for (const cd::BoxSubProblem<float, NDim>& s : plan.problems) {
    const auto map_of = [&](const void* map) {
      const auto index = static_cast<std::size_t>((static_cast<const unsigned char*>(map) - maps_base) / cd::kTensorMapBytes);
      EXPECT_LT(index, plan.maps.size());
      return plan.maps[index];
    };
    const TensorMapShape a_map = map_of(s.a.map), b_map = map_of(s.b.map);
    ASSERT_EQ(s.a.k_extent, s.b.k_extent);
    ASSERT_EQ(s.a.m_extent % block_m, 0);
    ASSERT_EQ(s.a.tile_bytes(), a_map.box_bytes());
    ASSERT_EQ(s.b.tile_bytes(), s.b.panels * b_map.box_bytes());
    for (int m_base = 0; m_base < s.a.m_extent; m_base += block_m) {
      for (int n_base = 0; n_base < s.b.mn_size(); n_base += block_n) {
        std::vector<double> acc(static_cast<std::size_t>(block_m * block_n), 0.0);
        for (int k_base = 0; k_base < s.a.k_extent; k_base += bk) {
          int c[TensorMapShape::kMaxRank] = {};
          ASSERT_EQ(s.a.coordinates(m_base, k_base, c), a_map.rank);
          const std::vector<float> a = load_box(a_map, dy.data(), c);
          for (int p = 0; p < s.b.panels; ++p) {
            ASSERT_EQ(s.b.coordinates(n_base, k_base, p, c), b_map.rank);
            const std::vector<float> b = load_box(b_map, w.data(), c);
            for (int r = 0; r < s.a.box_rows; ++r) {
              for (int k = 0; k < bk; ++k) {
                for (int cc = 0; cc < bk; ++cc) {
                  acc[static_cast<std::size_t>(r * block_n + p * bk + cc)] +=
                      static_cast<double>(a[static_cast<std::size_t>(r * bk + k)]) * b[static_cast<std::size_t>(k * bk + cc)];
                }
              }
            }
          }
        }
        for (int r = 0; r < block_m; ++r) {
          Index offset = 0;
          const bool stored = s.epilogue.row_offset(m_base + r, &offset);
          for (int col = 0; col < block_n; ++col) {
            if (stored && n_base + col < s.epilogue.n_size &&
                !count_store(stores, s.epilogue.out - dx.data() + offset + (n_base + col) * s.epilogue.stride_c)) {
              return;
            }
            s.epilogue.store(m_base + r, n_base + col, static_cast<float>(acc[static_cast<std::size_t>(r * block_n + col)]), 0);
          }
        }
      }
    }
  }
}

template <int NDim>
void check_random_problems(unsigned seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < count; ++trial) {
    ConvParams<NDim> p;
    const bool gapped = trial % 2 == 1;
    // Packed channels must keep every stride a multiple of 16 bytes: K and C multiples of 4.
    p.G = NDim == 3 ? 1 : pick(1, 3), p.N = pick(1, 3);
    p.K = gapped ? pick(1, 70) : 4 * pick(1, 17), p.C = gapped ? pick(1, 70) : 4 * pick(1, 17);
    for (int d = 0; d < NDim; ++d) {
      p.filter[d] = pick(1, 3), p.strides[d] = pick(1, 3), p.dilations[d] = pick(1, 3);
      p.left_pads[d] = pick(0, 3), p.right_pads[d] = pick(0, 3);
      p.input[d] = pick(1, NDim == 3 ? 6 : 10);
      const Index reach = p.dilations[d] * (p.filter[d] - 1) + 1;
      if (p.input[d] + p.left_pads[d] + p.right_pads[d] < reach) p.right_pads[d] = reach - p.input[d] - p.left_pads[d];
    }
    const ConvLayout layout = trial % 4 < 2 ? ConvLayout::kNHWGC : ConvLayout::kGNHWC;
    Problem<NDim> problem = Problem<NDim>::packed(p, layout);
    if (gapped) {
      // Gaps after every activation dimension; w's filter stays packed (its taps flatten).
      const std::vector<bool> every(static_cast<std::size_t>(3 + NDim), true);
      std::vector<bool> weight(static_cast<std::size_t>(3 + NDim), true);
      for (int d = 0; d < NDim; ++d) weight[static_cast<std::size_t>(3 + d)] = false;
      problem.output_strides =
          gapped_strides(p.output_lengths(), hipgrad::conv::activation_order<NDim>(layout), every);
      problem.input_strides = gapped_strides(p.input_lengths(), hipgrad::conv::activation_order<NDim>(layout), every);
      problem.weight_strides = gapped_strides(p.weight_lengths(), hipgrad::conv::weight_order<NDim>(layout), weight);
    }
    SCOPED_TRACE(p.to_string() + (gapped ? " gapped" : " packed") +
                 (layout == ConvLayout::kNHWGC ? " NHWGC" : " GNHWC"));
    ASSERT_TRUE(problem.validate().is_ok());
    const Tensor<float> dy = hipgrad::test::filled_integers(p.output_lengths(), problem.output_strides, rng);
    const Tensor<float> w = hipgrad::test::filled_integers(p.weight_lengths(), problem.weight_strides, rng);
    Tensor<float> dx(p.input_lengths(), problem.input_strides), expected(p.input_lengths(), problem.input_strides);
    hipgrad::test::fill_nan(dx);
    hipgrad::test::fill_nan(expected);
    const char* blocker = cd::backward_data_tma_blocker(problem, dy.data(), w.data(), kElementBytes);
    ASSERT_EQ(blocker, nullptr) << blocker;
    ASSERT_TRUE(ref::conv_backward_data(dy, w, expected, p).is_ok());
    std::vector<int> stores;
    const int rows = 1 << pick(2, 7);
    tma_backward_data<NDim>(problem, dy, w, dx, stores, rows);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, dx)) << "rows " << rows;
    // The op's plan, with blocks of 64 or 128 rows and one or two panels of columns.
    Tensor<float> planned(p.input_lengths(), problem.input_strides);
    hipgrad::test::fill_nan(planned);
    std::vector<int> planned_stores;
    const int block_m = 64 << pick(0, 1), block_n = 32 << pick(0, 1);
    planned_backward_data<NDim>(problem, dy, w, planned, planned_stores, block_m, block_n);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, planned)) << "blocks " << block_m << " x " << block_n;
    EXPECT_EQ(planned_stores, stores) << "the plan stores every dx element once";
    const std::vector<int> expected_stores = hipgrad::test::logical_elements(dx);
    EXPECT_EQ(stores, expected_stores) << "every dx element stored once, nothing else";
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ConvBackwardDataTma, BoxesThroughTheMapsMatchTheReference1D) { check_random_problems<1>(501, 40); }
TEST(ConvBackwardDataTma, BoxesThroughTheMapsMatchTheReference2D) { check_random_problems<2>(502, 30); }
TEST(ConvBackwardDataTma, BoxesThroughTheMapsMatchTheReference3D) { check_random_problems<3>(503, 12); }

/// What the maps are for the seed problem (fp16, 128-row tiles): dy (k, x, y, n) with 64-channel
/// rows, w (c, taps, k).
TEST(ConvBackwardDataTma, SeedProblemMaps) {
  ConvParams<2> p;
  p.G = 1, p.N = 128, p.K = 256, p.C = 128, p.filter = {3, 3}, p.input = {71, 71}, p.strides = {2, 2};
  p.dilations = {1, 1}, p.left_pads = {1, 1}, p.right_pads = {1, 1};
  const Problem<2> problem = Problem<2>::packed(p, ConvLayout::kNHWGC);
  const cd::PositionBoxes<2> boxes = cd::position_boxes<2>({128, 36, 36}, 128);
  const TensorMapShape dy = cd::dy_tensor_map(problem, 2, boxes);
  EXPECT_EQ(dy.rank, 4);
  EXPECT_EQ(dy.box[0], 64);
  EXPECT_EQ(dy.size[1], 36);  // the output's x
  EXPECT_EQ(dy.stride_bytes[1], 256 * 2);
  EXPECT_EQ(dy.box_bytes(), boxes.rows() * 128);
  const TensorMapShape w = cd::w_tensor_map(problem, 2);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.size[1], 9);
  EXPECT_EQ(w.stride_bytes[1], 128 * 2);
  EXPECT_EQ(w.box_bytes(), 64 * 64 * 2);
  std::vector<char> storage(64);
  const void* aligned = storage.data() + (16 - reinterpret_cast<std::uintptr_t>(storage.data()) % 16) % 16;
  EXPECT_EQ(cd::backward_data_tma_blocker(problem, aligned, aligned, 2), nullptr);
}

/// The blocker names each rule the maps break.
TEST(ConvBackwardDataTma, BlockerNamesWhatTheMapsCannotRead) {
  alignas(16) static float storage[8];
  const void* base = storage;
  auto blocker = [&](const auto& problem, const void* at, int bytes) {
    const char* b = cd::backward_data_tma_blocker(problem, at, at, bytes);
    return std::string(b == nullptr ? "" : b);
  };
  ConvParams<2> p;
  p.G = 2, p.N = 2, p.K = 8, p.C = 8, p.filter = {3, 3}, p.input = {9, 9}, p.strides = {1, 1};
  p.dilations = {1, 1}, p.left_pads = {1, 1}, p.right_pads = {1, 1};
  EXPECT_EQ(blocker(Problem<2>::packed(p, ConvLayout::kNHWGC), base, 2), "");
  EXPECT_NE(blocker(Problem<2>::packed(p, ConvLayout::kNGCHW), base, 2).find("contiguous"), std::string::npos);
  EXPECT_NE(blocker(Problem<2>::packed(p, ConvLayout::kNHWGC), storage + 1, 4).find("aligned"), std::string::npos);
  ConvParams<2> odd = p;
  odd.K = 3;  // the g stride of dy, 3 elements, is no multiple of 16 bytes
  EXPECT_NE(blocker(Problem<2>::packed(odd, ConvLayout::kNHWGC), base, 2).find("16 bytes"), std::string::npos);
  Problem<2> unpacked = Problem<2>::packed(p, ConvLayout::kNHWGC);
  unpacked.weight_strides = gapped_strides(p.weight_lengths(), hipgrad::conv::weight_order<2>(ConvLayout::kNHWGC),
                                           std::vector<bool>(5, true));
  EXPECT_NE(blocker(unpacked, base, 2).find("packed"), std::string::npos);
  ConvParams<3> grouped3d;
  grouped3d.G = 2, grouped3d.N = 1, grouped3d.K = 8, grouped3d.C = 8, grouped3d.filter = {3, 3, 3};
  grouped3d.input = {5, 5, 5}, grouped3d.strides = {1, 1, 1}, grouped3d.dilations = {1, 1, 1};
  grouped3d.left_pads = {1, 1, 1}, grouped3d.right_pads = {1, 1, 1};
  EXPECT_NE(blocker(Problem<3>::packed(grouped3d, ConvLayout::kNHWGC), base, 2).find("six"), std::string::npos);
  grouped3d.G = 1;
  EXPECT_EQ(blocker(Problem<3>::packed(grouped3d, ConvLayout::kNHWGC), base, 2), "");
}

}  // namespace
