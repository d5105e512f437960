/// @file test_conv_position_boxes.cpp
/// @brief The box decomposition of backward-data's stride phases (position_boxes.hpp), checked on
///        the CPU: boxes cover every grid point of a phase once, and a GEMM whose A tiles are boxes
///        of dy loaded as a tensor map loads them (coordinates outside dy, negative ones included,
///        and channels past K read as zero) gives the reference dx on seeded random problems of
///        every rank, with every dx element stored once.

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/common/position_boxes.hpp"
#include "hipgrad/ops/conv/backward_data/stride_phases.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "reference/reference_test_util.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::ConvParams;
using hipgrad::host::Tensor;
namespace cd = hipgrad::conv::detail;
namespace ref = hipgrad::host::reference;

template <int NDim>
void expect_boxes_cover_grid_once(const std::array<Index, NDim + 1>& extent, int rows) {
  const cd::PositionBoxes<NDim> b = cd::position_boxes<NDim>(extent, rows);
  ASSERT_LE(b.rows(), rows);
  Index points = 1;
  for (int d = 0; d <= NDim; ++d) {
    ASSERT_GE(b.shape[d], 1);
    ASSERT_LE(b.shape[d], cd::kMaxBoxExtent);
    points *= extent[static_cast<std::size_t>(d)];
  }
  std::vector<int> seen(static_cast<std::size_t>(points), 0);
  Index first[NDim + 1], at[NDim + 1];
  for (Index t = 0; t < b.tiles(); ++t) {
    b.origin(t, first);
    for (int r = 0; r < rows; ++r) {
      if (!b.point(first, r, at)) continue;
      Index linear = 0;
      for (int d = 0; d <= NDim; ++d) linear = linear * extent[static_cast<std::size_t>(d)] + at[d];
      ++seen[static_cast<std::size_t>(linear)];
    }
  }
  for (Index p = 0; p < points; ++p) ASSERT_EQ(seen[static_cast<std::size_t>(p)], 1) << "grid point " << p;
}

TEST(ConvPositionBoxes, BoxesCoverEveryGridPointOnce) {
  std::mt19937_64 rng(17);
  auto pick = [&rng](int lo, int hi) { return static_cast<Index>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (int trial = 0; trial < 40; ++trial) {
    const int rows = trial % 2 ? 128 : 256;
    expect_boxes_cover_grid_once<1>({pick(1, 3), pick(1, 700)}, rows);
    expect_boxes_cover_grid_once<2>({pick(1, 3), pick(1, 40), pick(1, 300)}, rows);
    expect_boxes_cover_grid_once<3>({pick(1, 2), pick(1, 9), pick(1, 12), pick(1, 20)}, rows);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Shapes of the benchmark problems' phases that boxes tile without a wasted row.
TEST(ConvPositionBoxes, FullBoxesWhereTheGridAllows) {
  const cd::PositionBoxes<1> one_d = cd::position_boxes<1>({64, 1024}, 128);
  EXPECT_EQ(one_d.tiles() * 128, 64 * 1024);
  const cd::PositionBoxes<3> three_d = cd::position_boxes<3>({4, 32, 64, 64}, 128);
  EXPECT_EQ(three_d.tiles() * 128, 4 * 32 * 64 * 64);
  EXPECT_EQ(three_d.shape[3], 64);  // the longest runs of dy
  // 56 × 56 has no factor pair of 128, but boxes of two images of 8 × 8 fill every row.
  const cd::PositionBoxes<2> resnet = cd::position_boxes<2>({64, 56, 56}, 128);
  EXPECT_EQ(resnet.tiles() * 128, 64 * 56 * 56);
}

/// dx of backward-data, computed phase by phase and group by group as a GEMM over boxes: per M
/// tile (a box of the phase's positions) and K tile (one tap, `bk` channels), the A tile is dy's
/// box at the tap's coordinates, read as a tensor map would (zero outside dy and past K), the B
/// tile w at the tap; rows inside the grid are stored to dx. Counts the stores per element.
template <int NDim>
void boxed_backward_data(const ConvParams<NDim>& p, const Tensor<float>& dy, const Tensor<float>& w,
                         Tensor<float>& dx, std::vector<int>& stores, int rows, int bk) {
  std::array<Index, NDim> input{}, filter{}, strides{}, dilations{}, left{};
  for (int d = 0; d < NDim; ++d) {
    input[d] = p.input[d], filter[d] = p.filter[d], strides[d] = p.strides[d];
    dilations[d] = p.dilations[d], left[d] = p.left_pads[d];
  }
  const std::vector<Index> out = p.output_lengths();  // [G, N, K, O...]
  stores.assign(dx.storage().size(), 0);
  for (Index g = 0; g < p.G; ++g) {
    for (const cd::Phase<NDim>& phase : cd::stride_phases<NDim>(input, filter, strides, dilations, left)) {
      std::array<Index, NDim + 1> extent{};
      extent[0] = p.N;
      Index taps = 1;
      for (int d = 0; d < NDim; ++d) extent[d + 1] = phase[d].count, taps *= phase[d].taps;
      const cd::PositionBoxes<NDim> boxes = cd::position_boxes<NDim>(extent, rows);
      const Index chunks = (p.K + bk - 1) / bk;
      Index first[NDim + 1], at[NDim + 1];
      for (Index t = 0; t < boxes.tiles(); ++t) {
        boxes.origin(t, first);
        std::vector<double> acc(static_cast<std::size_t>(rows * p.C), 0.0);
        for (Index kt = 0; kt < taps * chunks; ++kt) {
          Index tap = kt / chunks, j[NDim];
          const Index k0 = (kt % chunks) * bk;
          for (int d = NDim - 1; d >= 0; --d) j[d] = tap % phase[d].taps, tap /= phase[d].taps;
          for (int r = 0; r < boxes.rows(); ++r) {
            boxes.point(first, r, at);  // rows past the grid are loaded all the same
            std::vector<Index> dy_at = {g, at[0], 0};
            bool inside_dy = at[0] < p.N;
            for (int d = 0; d < NDim; ++d) {
              const Index o = phase[d].output_base + at[d + 1] - j[d] * phase[d].tap_dilation;
              dy_at.push_back(o);
              inside_dy = inside_dy && o >= 0 && o < out[static_cast<std::size_t>(3 + d)];
            }
            for (Index e = 0; e < bk; ++e) {
              const Index k = k0 + e;
              if (!inside_dy || k >= p.K) continue;  // the tensor map's zero fill
              dy_at[2] = k;
              const double a = dy(dy_at);
              std::vector<Index> w_at = {g, k, 0};
              for (int d = 0; d < NDim; ++d) w_at.push_back(phase[d].first_tap + j[d] * phase[d].tap_step);
              for (Index c = 0; c < p.C; ++c) {
                w_at[2] = c;
                acc[static_cast<std::size_t>(r * p.C + c)] += a * w(w_at);
              }
            }
          }
        }
        for (int r = 0; r < rows; ++r) {
          if (!boxes.point(first, r, at)) continue;
          std::vector<Index> dx_at = {g, at[0], 0};
          for (int d = 0; d < NDim; ++d) dx_at.push_back(phase[d].first + at[d + 1] * strides[d]);
          for (Index c = 0; c < p.C; ++c) {
            dx_at[2] = c;
            dx(dx_at) = static_cast<float>(acc[static_cast<std::size_t>(r * p.C + c)]);
            ++stores[static_cast<std::size_t>(dx.offset(dx_at))];
          }
        }
      }
    }
  }
}

template <int NDim>
void check_boxed_random_problems(unsigned seed, int count) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < count; ++trial) {
    ConvParams<NDim> p;
    p.G = pick(1, 2), p.N = pick(1, 3), p.K = pick(1, 11), p.C = pick(1, 4);
    for (int d = 0; d < NDim; ++d) {
      p.filter[d] = pick(1, 3), p.strides[d] = pick(1, 3), p.dilations[d] = pick(1, 3);
      p.left_pads[d] = pick(0, 3), p.right_pads[d] = pick(0, 3);
      p.input[d] = pick(1, NDim == 3 ? 6 : 11);
      const Index reach = p.dilations[d] * (p.filter[d] - 1) + 1;
      if (p.input[d] + p.left_pads[d] + p.right_pads[d] < reach) p.right_pads[d] = reach - p.input[d] - p.left_pads[d];
    }
    SCOPED_TRACE(p.to_string());
    Tensor<float> dy(p.output_lengths()), w(p.weight_lengths()), dx(p.input_lengths()), expected(p.input_lengths());
    hipgrad::test::fill_integers(dy, rng, -4, 4);
    hipgrad::test::fill_integers(w, rng, -4, 4);
    hipgrad::test::fill_nan(dx);
    ASSERT_TRUE(ref::conv_backward_data(dy, w, expected, p).is_ok());
    std::vector<int> stores;
    const int rows = 1 << pick(1, 4), bk = pick(1, 4);  // small tiles: many boxes, partial chunks
    boxed_backward_data<NDim>(p, dy, w, dx, stores, rows, bk);
    EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, dx)) << "rows " << rows << " bk " << bk;
    EXPECT_EQ(stores, std::vector<int>(dx.storage().size(), 1)) << "every dx element stored once";
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ConvPositionBoxes, BoxedGemmMatchesTheReference1D) { check_boxed_random_problems<1>(401, 60); }
TEST(ConvPositionBoxes, BoxedGemmMatchesTheReference2D) { check_boxed_random_problems<2>(402, 40); }
TEST(ConvPositionBoxes, BoxedGemmMatchesTheReference3D) { check_boxed_random_problems<3>(403, 15); }

}  // namespace
