/// @file test_conv_backward_data_plan.cpp
/// @brief Backward-data's decomposition checked on the CPU, where every index is visible: the
///        stride phases of one dimension against a brute-force search over (x, f) pairs, and the
///        sub-problems (dy and w loaders, dx epilogue) run as a plain GEMM loop on the host
///        against the reference, on seeded random problems of every rank, groups, strides,
///        dilations, asymmetric pads and layouts (padded ones too); every dx element written once;
///        vectors and the loaders' split states (mn_state, k_state, advance_k) agree with
///        element-by-element reads.

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/ops/conv/backward_data/sub_problems.hpp"
#include "hipgrad/ops/conv/common/plain_gemm.hpp"
#include "conv/conv_test_problems.hpp"
#include "reference/reference_test_util.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::host::Tensor;
namespace cd = hipgrad::conv::detail;
namespace ref = hipgrad::host::reference;

/// Every (x, f) pair of one dimension that meets a dy position lies in exactly one phase, at the
/// i, j and o the phase gives it; pairs that meet none lie in none.
TEST(ConvStridePhases, EveryContributingPairInItsPhase) {
  for (Index stride = 1; stride <= 4; ++stride) {
    for (Index dilation = 1; dilation <= 4; ++dilation) {
      for (Index pad = 0; pad <= 3; ++pad) {
        const Index input = 11, filter = 4;
        const std::vector<cd::DimensionPhase> phases = cd::dimension_phases(input, filter, stride, dilation, pad);
        ASSERT_EQ(static_cast<Index>(phases.size()), stride);
        Index positions = 0;
        for (const cd::DimensionPhase& p : phases) positions += p.count;
        EXPECT_EQ(positions, input);
        for (Index x = 0; x < input; ++x) {
          for (Index f = 0; f < filter; ++f) {
            const Index t = x + pad - f * dilation;
            const bool meets = t % stride == 0;  // o = t / stride, any sign: bounds are the loader's
            int found = 0;
            for (const cd::DimensionPhase& p : phases) {
              if (x < p.first || (x - p.first) % stride != 0) continue;
              const Index i = (x - p.first) / stride;
              if (p.taps == 0 || f < p.first_tap || (f - p.first_tap) % p.tap_step != 0) continue;
              const Index j = (f - p.first_tap) / p.tap_step;
              ASSERT_LT(j, p.taps);
              EXPECT_EQ(p.output_base + i - j * p.tap_dilation, t / stride)
                  << "s " << stride << " d " << dilation << " pad " << pad << " x " << x << " f " << f;
              ++found;
            }
            EXPECT_EQ(found, meets ? 1 : 0)
                << "s " << stride << " d " << dilation << " pad " << pad << " x " << x << " f " << f;
          }
        }
      }
    }
  }
}

/// The sub-problems of `problem` as a host GEMM loop over their loaders (element by element, in
/// double), stored through their epilogues; counts every store per dx storage element.
template <typename T, int NDim, bool kVectors>
void emulate_backward_data(const Problem<NDim>& problem, const Tensor<T>& dy, const Tensor<T>& w, Tensor<T>& dx,
                           std::vector<int>& stores) {
  const auto subs = cd::backward_data_sub_problems<T, NDim, kVectors>(problem, dy.data(), w.data(), dx.data());
  stores.assign(dx.storage().size(), 0);
  for (const auto& sp : subs) {
    for (int m = 0; m < sp.a.mn_size(); ++m) {
      for (int c = 0; c < sp.b.mn_size(); ++c) {
        double sum = 0.0;
        for (int k = 0; k < sp.a.k_size(); ++k) {
          const auto a = sp.a.vector(m, k, 1);
          const auto b = sp.b.vector(c, k, 1);
          if (a.valid > 0 && b.valid > 0) sum += static_cast<double>(*a.pointer) * static_cast<double>(*b.pointer);
        }
        sp.epilogue.store(m, c, static_cast<float>(sum), 0);
        ++stores[static_cast<std::size_t>(sp.epilogue.out + sp.epilogue.offset(m, c) - dx.data())];
      }
    }
  }
}

template <int NDim, bool kVectors>
void check_random_problems(unsigned seed, int count) {
  std::mt19937_64 rng(seed);
  int vectorised = 0;
  for (int trial = 0; trial < count; ++trial) {
    const hipgrad::test::RandomCase<NDim> r = hipgrad::test::random_case<NDim>(rng);
    const Problem<NDim> problem = hipgrad::test::problem_of(r);
    // Vectors run along channels only where they are contiguous.
    if (kVectors && (problem.output_strides[2] != 1 || problem.weight_strides[2] != 1)) continue;
    ++vectorised;
    SCOPED_TRACE(problem.to_string());
    ASSERT_TRUE(problem.validate().is_ok()) << problem.validate().to_string();
    Tensor<float> dy(r.params.output_lengths(), problem.output_strides);
    Tensor<float> w(r.params.weight_lengths(), problem.weight_strides);
    Tensor<float> dx(r.params.input_lengths(), problem.input_strides), expected(r.params.input_lengths());
    hipgrad::test::fill_integers(dy, rng, -4, 4);
    hipgrad::test::fill_integers(w, rng, -4, 4);
    hipgrad::test::fill_nan(dx);
    ASSERT_TRUE(ref::conv_backward_data(dy, w, expected, r.params).is_ok());
    std::vector<int> stores;
    emulate_backward_data<float, NDim, kVectors>(problem, dy, w, dx, stores);
    EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, dx));
    // Every logical element of dx stored once, nothing else stored.
    std::vector<int> expected_stores(dx.storage().size(), 0);
    dx.for_each_index(
        [&](const std::vector<Index>& i) { expected_stores[static_cast<std::size_t>(dx.offset(i))] = 1; });
    EXPECT_EQ(stores, expected_stores);
    if (::testing::Test::HasFailure()) return;
    const auto subs = cd::backward_data_sub_problems<float, NDim, kVectors>(problem, dy.data(), w.data(), dx.data());
    const int length = kVectors ? 4 : 1;
    for (const auto& sp : subs) {
      hipgrad::test::expect_vectors_match_elements(sp.a, length);
      hipgrad::test::expect_vectors_match_elements(sp.b, length);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_GT(vectorised, count / 8) << "too few problems took this path";
}

TEST(ConvBackwardDataPlan, EmulatedSubProblemsMatchTheReference1D) {
  check_random_problems<1, false>(101, 60);
  check_random_problems<1, true>(102, 120);
}
TEST(ConvBackwardDataPlan, EmulatedSubProblemsMatchTheReference2D) {
  check_random_problems<2, false>(201, 40);
  check_random_problems<2, true>(202, 80);
}
TEST(ConvBackwardDataPlan, EmulatedSubProblemsMatchTheReference3D) {
  check_random_problems<3, false>(301, 15);
  check_random_problems<3, true>(302, 30);
}

/// A stride-2 3×3 problem has four phases per group, one without taps in a dimension only when
/// the dilation shares the stride's factor: with dilation 2 and stride 2, the odd classes meet no
/// tap and are written as zeros (K = 0 sub-problems).
TEST(ConvBackwardDataPlan, PhasesWithoutTapsHaveNoK) {
  ConvParams<2> p;
  p.G = 2, p.N = 1, p.K = 3, p.C = 2;
  p.filter = {3, 3}, p.input = {8, 8}, p.strides = {2, 2}, p.dilations = {2, 2};
  p.left_pads = {2, 2}, p.right_pads = {2, 2};
  const Problem<2> problem = Problem<2>::packed(p);
  const auto subs = cd::backward_data_sub_problems<float, 2, true>(problem, nullptr, nullptr, nullptr);
  ASSERT_EQ(subs.size(), 8u);
  int without_k = 0;
  for (const auto& sp : subs) without_k += sp.a.k_size() == 0 ? 1 : 0;
  EXPECT_EQ(without_k, 2 * 3);  // per group: (odd, even), (even, odd), (odd, odd)
}

/// Rows (n, spatial...) merge where each stride is the next one's times its length; length-1
/// dimensions do not matter.
TEST(ConvPlainGemm, RowsMergeOnlyWhereTheirStridesChain) {
  EXPECT_EQ(cd::merged_row_stride({1, 2, 8, 3, 5}, {0, 120, 1, 40, 8}), std::optional<Index>(8));  // NHWC
  EXPECT_EQ(cd::merged_row_stride({1, 2, 8, 3, 5}, {0, 121, 1, 40, 8}), std::nullopt);             // gap after n
  EXPECT_EQ(cd::merged_row_stride({1, 1, 8, 1, 5}, {0, 7, 1, 99, 8}), std::optional<Index>(8));    // length 1 free
  EXPECT_EQ(cd::merged_row_stride({1, 1, 8, 1}, {0, 0, 1, 0}), std::optional<Index>(1));           // one row
}

/// 1×1 problems with unit strides and no padding in one group are one GEMM where dy's and dx's
/// rows merge and the channels are contiguous; run as a host loop over its operands, it equals the
/// reference.
TEST(ConvPlainGemm, OneByOneProblemsAreAPlainGemmThatMatchesTheReference) {
  std::mt19937_64 rng(5);
  ConvParams<2> p;
  p.G = 1, p.N = 2, p.K = 5, p.C = 7;
  p.filter = {1, 1}, p.input = {3, 4}, p.strides = {1, 1}, p.dilations = {2, 3};
  p.left_pads = {0, 0}, p.right_pads = {0, 0};
  for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kGNHWC}) {
    const Problem<2> problem = Problem<2>::packed(p, layout);
    ASSERT_TRUE(cd::is_plain_gemm(problem));
    Tensor<float> dy(p.output_lengths(), problem.output_strides), w(p.weight_lengths(), problem.weight_strides);
    Tensor<float> dx(p.input_lengths(), problem.input_strides), expected(p.input_lengths());
    hipgrad::test::fill_integers(dy, rng, -4, 4);
    hipgrad::test::fill_integers(w, rng, -4, 4);
    hipgrad::test::fill_nan(dx);
    ASSERT_TRUE(ref::conv_backward_data(dy, w, expected, p).is_ok());
    const cd::PlainGemm<float> g = cd::plain_gemm(problem, dy.data(), w.data(), dx.data());
    for (int m = 0; m < g.a.mn_size(); ++m) {
      for (int c = 0; c < g.b.mn_size(); ++c) {
        double sum = 0;
        for (int k = 0; k < g.a.k_size(); ++k) sum += *g.a.vector(m, k, 1).pointer * *g.b.vector(c, k, 1).pointer;
        g.epilogue.out[m * g.epilogue.stride_m + c * g.epilogue.stride_n] = static_cast<float>(sum);
      }
    }
    EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, dx));
  }
  Problem<2> ngchw = Problem<2>::packed(p, ConvLayout::kNGCHW);
  EXPECT_FALSE(cd::is_plain_gemm(ngchw));  // channels not contiguous
  p.G = 2;
  EXPECT_FALSE(cd::is_plain_gemm(Problem<2>::packed(p)));
  p.G = 1, p.strides = {2, 1};
  EXPECT_FALSE(cd::is_plain_gemm(Problem<2>::packed(p)));
  p.strides = {1, 1}, p.left_pads = {0, 1};
  EXPECT_FALSE(cd::is_plain_gemm(Problem<2>::packed(p)));
}

}  // namespace
