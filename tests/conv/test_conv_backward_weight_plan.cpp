/// @file test_conv_backward_weight_plan.cpp
/// @brief Backward-weight's decomposition checked on the CPU: the sub-problems of every group and
///        split (dy and x loaders, dw epilogue) run as a plain GEMM loop on the host, the splits'
///        fp32 sums added in split order as the device's reduction does, against the reference on
///        seeded random problems of every rank, groups, strides, dilations, asymmetric pads and
///        layouts (padded ones too), with 1, 2 and 7 splits; every dw element written once;
///        vectors and the loaders' split states agree with element-by-element reads; the op's
///        split choice.

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "conv/conv_test_problems.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/ops/conv/backward_weight/sub_problems.hpp"
#include "reference/reference_test_util.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::host::Tensor;
namespace cd = hipgrad::conv::detail;
namespace ref = hipgrad::host::reference;

/// The sub-problems of `problem` in `splits` as a host GEMM loop over their loaders (element by
/// element, in double), stored through their epilogues; with several splits their fp32 sums are
/// added in split order and stored through the whole of dw's epilogue (as gemm::reduce_split_k
/// does). Counts every store per dw storage element.
template <typename T, int NDim, bool kVectors>
void emulate_backward_weight(const Problem<NDim>& problem, const Tensor<T>& x, const Tensor<T>& dy, Tensor<T>& dw,
                             int splits, std::vector<int>& stores) {
  const cd::WeightExtents e = cd::weight_extents<T, NDim, kVectors>(problem);
  const Index elements = problem.params.G * e.m * e.n;
  std::vector<float> sums(static_cast<std::size_t>(splits > 1 ? splits * elements : 0),
                          std::numeric_limits<float>::quiet_NaN());
  const auto subs =
      cd::backward_weight_sub_problems<T, NDim, kVectors>(problem, x.data(), dy.data(), dw.data(), splits, sums.data());
  ASSERT_EQ(subs.size(), static_cast<std::size_t>(splits * problem.params.G));
  stores.assign(dw.storage().size(), 0);
  Index positions = 0;
  for (const auto& sp : subs) {
    positions += sp.a.k_size();
    ASSERT_EQ(sp.a.k_size(), sp.b.k_size());
    for (int m = 0; m < sp.a.mn_size(); ++m) {
      for (int n = 0; n < sp.b.mn_size(); ++n) {
        double sum = 0.0;
        for (int k = 0; k < sp.a.k_size(); ++k) {
          const auto a = sp.a.vector(m, k, 1);
          const auto b = sp.b.vector(n, k, 1);
          if (a.valid > 0 && b.valid > 0) sum += static_cast<double>(*a.pointer) * static_cast<double>(*b.pointer);
        }
        sp.epilogue.store(m, n, static_cast<float>(sum), 0);
        Index at = 0;
        if (splits == 1 && sp.epilogue.offset(m, n, &at)) ++stores[static_cast<std::size_t>(sp.epilogue.out + at - dw.data())];
      }
    }
  }
  EXPECT_EQ(positions, e.positions * problem.params.G) << "the splits cover every position once";
  if (splits == 1) return;
  const cd::DwStore<T, NDim> whole = cd::dw_store<T, NDim, kVectors>(problem, dw.data());
  for (int m = 0; m < whole.m_size; ++m) {
    for (int n = 0; n < whole.n_size; ++n) {
      float sum = 0.0f;
      for (int s = 0; s < splits; ++s) sum += sums[static_cast<std::size_t>(s * elements + m * whole.n_size + n)];
      whole.store(m, n, sum, 0);
      Index at = 0;
      if (whole.offset(m, n, &at)) ++stores[static_cast<std::size_t>(at)];
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
    if (kVectors && (problem.output_strides[2] != 1 || problem.input_strides[2] != 1)) continue;
    ++vectorised;
    SCOPED_TRACE(problem.to_string());
    ASSERT_TRUE(problem.validate().is_ok()) << problem.validate().to_string();
    Tensor<float> x(r.params.input_lengths(), problem.input_strides);
    Tensor<float> dy(r.params.output_lengths(), problem.output_strides);
    Tensor<float> dw(r.params.weight_lengths(), problem.weight_strides), expected(r.params.weight_lengths());
    hipgrad::test::fill_integers(x, rng, -4, 4);
    hipgrad::test::fill_integers(dy, rng, -4, 4);
    ASSERT_TRUE(ref::conv_backward_weight(x, dy, expected, r.params).is_ok());
    // Every logical element of dw stored once, nothing else stored (with splits: by the reduction).
    std::vector<int> expected_stores(dw.storage().size(), 0);
    dw.for_each_index([&](const std::vector<Index>& i) { expected_stores[static_cast<std::size_t>(dw.offset(i))] = 1; });
    for (int splits : {1, 2, 7}) {
      hipgrad::test::fill_nan(dw);
      std::vector<int> stores;
      emulate_backward_weight<float, NDim, kVectors>(problem, x, dy, dw, splits, stores);
      EXPECT_TRUE(hipgrad::test::bitwise_equal(expected, dw)) << splits << " splits";
      EXPECT_EQ(stores, expected_stores) << splits << " splits";
      if (::testing::Test::HasFailure()) return;
    }
    const auto subs = cd::backward_weight_sub_problems<float, NDim, kVectors>(problem, x.data(), dy.data(), dw.data(),
                                                                             2, nullptr);
    const int length = kVectors ? 4 : 1;
    for (const auto& sp : subs) {
      hipgrad::test::expect_vectors_match_elements(sp.a, length);
      hipgrad::test::expect_vectors_match_elements(sp.b, length);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_GT(vectorised, count / 8) << "too few problems took this path";
}

TEST(ConvBackwardWeightPlan, EmulatedSubProblemsMatchTheReference1D) {
  check_random_problems<1, false>(111, 40);
  check_random_problems<1, true>(112, 80);
}
TEST(ConvBackwardWeightPlan, EmulatedSubProblemsMatchTheReference2D) {
  check_random_problems<2, false>(211, 30);
  check_random_problems<2, true>(212, 60);
}
TEST(ConvBackwardWeightPlan, EmulatedSubProblemsMatchTheReference3D) {
  check_random_problems<3, false>(311, 10);
  check_random_problems<3, true>(312, 20);
}

/// The split choice: whole rounds of work items over the multiprocessors against the depth of a
/// split and the traffic of the sums, at least eight K tiles a split, at most 64, and no more fp32
/// sums than 1 GiB.
TEST(ConvBackwardWeightPlan, AutoSplitsFillTheGpuWithinTheirBounds) {
  EXPECT_EQ(cd::auto_splits(8 * 132, 1 << 20, 1 << 20, 64, 132), 1);  // eight whole rounds already
  EXPECT_EQ(cd::auto_splits(8, Index{1} << 24, 1 << 20, 64, 132), 33);  // two whole rounds of 132
  // The seed problem's 10 tiles of 2592 K tiles: 13 splits, one round of 130 items (27 would
  // take three rounds, the last of 6 items).
  EXPECT_EQ(cd::auto_splits(10, 128 * 36 * 36, 256 * 1152, 64, 132), 13);
  EXPECT_EQ(cd::auto_splits(1, Index{1} << 24, 1 << 10, 64, 132), 64);  // at most 64
  EXPECT_EQ(cd::auto_splits(1, 64 * 8 * 3, 1 << 10, 64, 132), 3);       // eight K tiles a split
  EXPECT_EQ(cd::auto_splits(1, Index{1} << 24, Index{1} << 27, 64, 132), 1);  // 512 MiB a split
  EXPECT_EQ(cd::auto_splits(1, Index{1} << 24, Index{1} << 26, 64, 132), 3);
  EXPECT_EQ(cd::auto_splits(0, 0, 0, 64, 132), 1);
  // The sub-problems' positions: ⌈R / splits⌉ each, the last the rest, empty splits with K = 0.
  ConvParams<1> p;
  p.G = 2, p.N = 1, p.K = 3, p.C = 5;
  p.filter = {3}, p.input = {5}, p.strides = {1}, p.dilations = {1}, p.left_pads = {0}, p.right_pads = {0};
  const auto subs = cd::backward_weight_sub_problems<float, 1, true>(Problem<1>::packed(p), nullptr, nullptr, nullptr,
                                                                     7, nullptr);
  ASSERT_EQ(subs.size(), 14u);
  std::vector<int> extents;
  for (std::size_t s = 0; s < subs.size(); s += 2) extents.push_back(subs[s].a.k_size());
  EXPECT_EQ(extents, (std::vector<int>{1, 1, 1, 0, 0, 0, 0}));
}

}  // namespace
