/// @file test_groupnorm_reference.cpp
/// @brief The GroupNorm references pinned to hand-computed values, their statistics, layout and
///        thread-count independence, every storage type, argument checking, and the Swish helpers.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "hipgrad/host/reference/groupnorm.hpp"
#include "hipgrad/host/reference/groupnorm_tolerance.hpp"
#include "reference_test_util.hpp"

namespace {

using hipgrad::bfloat16;
using hipgrad::half;
using hipgrad::Status;
using hipgrad::StatusCode;
using hipgrad::type_convert;
using hipgrad::groupnorm::Activation;
using hipgrad::host::Index;
using hipgrad::host::Tensor;
using hipgrad::test::NormLayout;
namespace ref = hipgrad::host::reference;

/// The tensors of one GroupNorm problem: inputs, forward outputs and gradients.
template <typename T, typename TP>
struct Problem {
  Index groups;
  Activation activation = Activation::kIdentity;
  double swish_beta = 1.0;
  double epsilon = 1e-5;
  Tensor<T> x, y, dy, dx;
  Tensor<TP> gamma, beta, dgamma, dbeta;
  Tensor<float> mean, rstd;

  Problem(const std::vector<Index>& lengths, Index g, NormLayout layout = NormLayout::kNCHW)
      : groups(g),
        x(lengths, hipgrad::test::norm_strides(lengths, layout)),
        y(lengths, hipgrad::test::norm_strides(lengths, layout)),
        dy(lengths, hipgrad::test::norm_strides(lengths, layout)),
        dx(lengths, hipgrad::test::norm_strides(lengths, layout)),
        gamma({lengths[1]}),
        beta({lengths[1]}),
        dgamma({lengths[1]}),
        dbeta({lengths[1]}),
        mean({lengths[0], g}),
        rstd({lengths[0], g}) {}

  Status forward() {
    return ref::groupnorm_forward(x, gamma, beta, groups, epsilon, activation, swish_beta, y, mean, rstd);
  }
  Status backward() {
    HIPGRAD_RETURN_IF_ERROR(
        ref::groupnorm_backward_data(dy, x, gamma, beta, mean, rstd, groups, activation, swish_beta, dx));
    return ref::groupnorm_backward_gamma_beta(dy, x, gamma, beta, mean, rstd, groups, activation, swish_beta, dgamma,
                                              dbeta);
  }
  Status run_all() {
    HIPGRAD_RETURN_IF_ERROR(forward());
    return backward();
  }

  /// Random inputs; integers are exact in every storage type.
  void fill(std::mt19937_64& rng, bool integers) {
    if (integers) {
      hipgrad::test::fill_integers(x, rng, -5, 5);
      hipgrad::test::fill_integers(dy, rng, -5, 5);
      hipgrad::test::fill_integers(gamma, rng, -3, 3);
      hipgrad::test::fill_integers(beta, rng, -3, 3);
    } else {
      hipgrad::test::fill_uniform(x, rng, -2.0, 3.0);
      hipgrad::test::fill_uniform(dy, rng, -1.0, 1.0);
      hipgrad::test::fill_uniform(gamma, rng, -1.5, 1.5);
      hipgrad::test::fill_uniform(beta, rng, -0.5, 0.5);
    }
  }

  template <typename T2, typename TP2>
  void copy_inputs_from(const Problem<T2, TP2>& other) {
    hipgrad::test::copy_logical(other.x, x);
    hipgrad::test::copy_logical(other.dy, dy);
    hipgrad::test::copy_logical(other.gamma, gamma);
    hipgrad::test::copy_logical(other.beta, beta);
  }
};

// ---- hand-computed values --------------------------------------------------------------------

// x [N=2, C=4, W=2], G=2, ε=4. Sample 0: group 0 holds {1, 3, 5, 7} (μ=4, σ²=5), group 1 holds
// {−1, 1, −3, 3} (μ=0, σ²=5); σ²+ε = 9, so rstd = 1/3 and x̂ = (x−μ)/3. Sample 1 is sample 0 + 10:
// the means move by 10 and y is unchanged.
struct HandCase {
  static constexpr double kX[4][2] = {{1, 3}, {5, 7}, {-1, 1}, {-3, 3}};
  static constexpr double kGamma[4] = {2, -3, 0.5, 1};
  static constexpr double kBeta[4] = {1, 0.5, 0, -1};
  // z = γ·x̂ + β, worked out by hand.
  static constexpr double kZ[4][2] = {{-1.0, 1.0 / 3}, {-0.5, -2.5}, {-1.0 / 6, 1.0 / 6}, {-2.0, 0.0}};

  template <typename T, typename TP>
  static Problem<T, TP> make(Activation activation, double swish_beta) {
    Problem<T, TP> p({2, 4, 2}, 2);
    p.epsilon = 4.0;
    p.activation = activation;
    p.swish_beta = swish_beta;
    for (Index n = 0; n < 2; ++n) {
      for (Index c = 0; c < 4; ++c) {
        for (Index w = 0; w < 2; ++w) p.x.at(n, c, w) = type_convert<T>(kX[c][w] + 10.0 * static_cast<double>(n));
      }
    }
    for (Index c = 0; c < 4; ++c) {
      p.gamma.at(c) = type_convert<TP>(kGamma[c]);
      p.beta.at(c) = type_convert<TP>(kBeta[c]);
    }
    return p;
  }
};

TEST(GroupNormForwardReference, HandComputedIdentity) {
  auto p = HandCase::make<double, double>(Activation::kIdentity, 1.0);
  ASSERT_TRUE(p.forward().is_ok());
  for (Index n = 0; n < 2; ++n) {
    EXPECT_EQ(p.mean.at(n, 0), 4.0f + 10.0f * static_cast<float>(n));
    EXPECT_EQ(p.mean.at(n, 1), 0.0f + 10.0f * static_cast<float>(n));
    for (Index g = 0; g < 2; ++g) EXPECT_EQ(p.rstd.at(n, g), static_cast<float>(1.0 / 3.0));
    for (Index c = 0; c < 4; ++c) {
      for (Index w = 0; w < 2; ++w) EXPECT_NEAR(p.y.at(n, c, w), HandCase::kZ[c][w], 1e-15) << n << c << w;
    }
  }
}

TEST(GroupNormForwardReference, HandComputedSwish) {
  for (double beta : {1.0, 0.5}) {
    auto p = HandCase::make<double, double>(Activation::kSwish, beta);
    ASSERT_TRUE(p.forward().is_ok());
    for (Index c = 0; c < 4; ++c) {
      for (Index w = 0; w < 2; ++w) {
        const double z = HandCase::kZ[c][w];
        EXPECT_NEAR(p.y.at(1, c, w), z / (1.0 + std::exp(-beta * z)), 1e-15) << "beta " << beta;
      }
    }
  }
}

TEST(GroupNormForwardReference, HandComputedInFloatAndHalf) {
  auto f = HandCase::make<float, float>(Activation::kIdentity, 1.0);
  auto h = HandCase::make<half, float>(Activation::kIdentity, 1.0);
  ASSERT_TRUE(f.forward().is_ok());
  ASSERT_TRUE(h.forward().is_ok());
  for (Index c = 0; c < 4; ++c) {
    for (Index w = 0; w < 2; ++w) {
      EXPECT_EQ(f.y.at(0, c, w), static_cast<float>(HandCase::kZ[c][w]));
      EXPECT_EQ(h.y.at(1, c, w).bits, type_convert<half>(HandCase::kZ[c][w]).bits);
    }
  }
}

// ---- statistics of the normalised output ----------------------------------------------------

// With γ = 1, β = 0 every group of y has mean 0 and variance σ²/(σ² + ε), even with a mean far
// from zero (the two-pass statistics in double do not cancel).
TEST(GroupNormForwardReference, NormalisedGroupsHaveZeroMeanAndUnitVariance) {
  std::mt19937_64 rng(7);
  Problem<double, double> p({3, 6, 5, 4}, 3, NormLayout::kNHWC);
  hipgrad::test::fill_uniform(p.x, rng, 97.0, 103.0);
  p.gamma.for_each_index([&](const std::vector<Index>& i) { p.gamma(i) = 1.0; });
  p.beta.for_each_index([&](const std::vector<Index>& i) { p.beta(i) = 0.0; });
  ASSERT_TRUE(p.forward().is_ok());
  for (Index n = 0; n < 3; ++n) {
    for (Index g = 0; g < 3; ++g) {
      double sum_x = 0.0, sum_y = 0.0, sum_yy = 0.0, sum_xx = 0.0;
      const double count = 2 * 5 * 4;
      for (Index c = 2 * g; c < 2 * g + 2; ++c) {
        for (Index h = 0; h < 5; ++h) {
          for (Index w = 0; w < 4; ++w) {
            sum_x += p.x.at(n, c, h, w);
            sum_y += p.y.at(n, c, h, w);
            sum_yy += p.y.at(n, c, h, w) * p.y.at(n, c, h, w);
          }
        }
      }
      const double mu = sum_x / count;
      for (Index c = 2 * g; c < 2 * g + 2; ++c) {
        for (Index h = 0; h < 5; ++h) {
          for (Index w = 0; w < 4; ++w) sum_xx += (p.x.at(n, c, h, w) - mu) * (p.x.at(n, c, h, w) - mu);
        }
      }
      const double var = sum_xx / count;
      EXPECT_NEAR(sum_y / count, 0.0, 1e-12);
      EXPECT_NEAR(sum_yy / count, var / (var + p.epsilon), 1e-12);
      EXPECT_EQ(p.mean.at(n, g), static_cast<float>(mu));
      EXPECT_FLOAT_EQ(p.rstd.at(n, g), static_cast<float>(1.0 / std::sqrt(var + p.epsilon)));
    }
  }
}

// ---- layout and thread-count independence ---------------------------------------------------

TEST(GroupNormReference, ResultsDoNotDependOnLayout) {
  std::mt19937_64 rng(11);
  const std::vector<Index> lengths{2, 8, 3, 5};
  Problem<float, float> nchw(lengths, 4, NormLayout::kNCHW);
  nchw.activation = Activation::kSwish;
  nchw.swish_beta = 0.7;
  nchw.fill(rng, false);
  ASSERT_TRUE(nchw.run_all().is_ok());
  for (NormLayout layout : {NormLayout::kNHWC, NormLayout::kPaddedNHWC}) {
    Problem<float, float> other(lengths, 4, layout);
    other.activation = Activation::kSwish;
    other.swish_beta = 0.7;
    other.copy_inputs_from(nchw);
    ASSERT_TRUE(other.run_all().is_ok());
    const char* name = hipgrad::test::layout_name(layout);
    EXPECT_TRUE(hipgrad::test::bitwise_equal(nchw.y, other.y)) << name;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(nchw.mean, other.mean)) << name;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(nchw.rstd, other.rstd)) << name;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(nchw.dx, other.dx)) << name;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(nchw.dgamma, other.dgamma)) << name;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(nchw.dbeta, other.dbeta)) << name;
  }
}

TEST(GroupNormReference, ResultsDoNotDependOnThreadCount) {
  std::mt19937_64 rng(13);
  const std::vector<Index> lengths{3, 12, 7};
  auto run = [&](int threads) {
    hipgrad::test::ScopedThreadCount scoped(threads);
    Problem<float, float> p(lengths, 4, NormLayout::kNHWC);
    p.activation = Activation::kSwish;
    std::mt19937_64 same_rng = rng;
    p.fill(same_rng, false);
    EXPECT_TRUE(p.run_all().is_ok());
    return p;
  };
  const auto one = run(1);
  for (int threads : {2, 5, 16}) {
    const auto many = run(threads);
    EXPECT_TRUE(hipgrad::test::bitwise_equal(one.y, many.y)) << threads;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(one.rstd, many.rstd)) << threads;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(one.dx, many.dx)) << threads;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(one.dgamma, many.dgamma)) << threads;
    EXPECT_TRUE(hipgrad::test::bitwise_equal(one.dbeta, many.dbeta)) << threads;
  }
}

// ---- storage types ----------------------------------------------------------------------------

// Every combination computes in double from the same (integer, hence exact) inputs and rounds once,
// so each result equals the double result converted to its type, bit for bit.
template <typename Types>
class GroupNormReferenceTypes : public ::testing::Test {};

template <typename T, typename TP>
struct TypePair {
  using Data = T;
  using Param = TP;
};
using TypePairs =
    ::testing::Types<TypePair<float, float>, TypePair<half, float>, TypePair<bfloat16, float>, TypePair<half, half>,
                     TypePair<bfloat16, bfloat16>, TypePair<double, float>, TypePair<float, double>>;
TYPED_TEST_SUITE(GroupNormReferenceTypes, TypePairs);

template <typename T, typename TWide>
void expect_rounded_from(const Tensor<T>& narrow, const Tensor<TWide>& wide, const char* what) {
  Tensor<T> rounded(wide.lengths());
  hipgrad::test::copy_logical(wide, rounded);
  EXPECT_TRUE(hipgrad::test::bitwise_equal(rounded, narrow)) << what;
}

TYPED_TEST(GroupNormReferenceTypes, EqualsTheDoubleResultRounded) {
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (Activation activation : {Activation::kIdentity, Activation::kSwish}) {
    std::mt19937_64 rng(17);
    Problem<double, double> wide({2, 6, 4, 3}, 3, NormLayout::kNHWC);
    wide.activation = activation;
    wide.fill(rng, true);
    ASSERT_TRUE(wide.run_all().is_ok());
    Problem<T, TP> narrow({2, 6, 4, 3}, 3, NormLayout::kNCHW);
    narrow.activation = activation;
    narrow.copy_inputs_from(wide);
    ASSERT_TRUE(narrow.run_all().is_ok());
    expect_rounded_from(narrow.y, wide.y, "y");
    EXPECT_TRUE(hipgrad::test::bitwise_equal(narrow.mean, wide.mean));
    EXPECT_TRUE(hipgrad::test::bitwise_equal(narrow.rstd, wide.rstd));
    expect_rounded_from(narrow.dx, wide.dx, "dx");
    expect_rounded_from(narrow.dgamma, wide.dgamma, "dgamma");
    expect_rounded_from(narrow.dbeta, wide.dbeta, "dbeta");
  }
}

// ---- invalid arguments ------------------------------------------------------------------------

void expect_invalid(const Status& status, const std::vector<std::string>& fragments) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "message '" << status.message() << "' lacks '" << fragment << "'";
  }
}

TEST(GroupNormReferenceArguments, ForwardRejectsBadArguments) {
  {
    Problem<float, float> p({2, 6, 3}, 4);
    expect_invalid(p.forward(), {"C=6", "G=4"});
  }
  for (Index groups : {0, -2}) {
    Problem<float, float> p({2, 6, 3}, 2);
    p.groups = groups;
    expect_invalid(p.forward(), {"G must be positive", std::to_string(groups)});
  }
  for (double epsilon : {0.0, -1.0, std::nan("")}) {
    Problem<float, float> p({2, 6, 3}, 2);
    p.epsilon = epsilon;
    expect_invalid(p.forward(), {"epsilon"});
  }
  {
    Problem<float, float> p({2, 6, 3}, 2);
    p.epsilon = -0.5;
    expect_invalid(p.forward(), {"-0.5"});
  }
  {
    Problem<float, float> p({2, 6, 3}, 2);
    p.gamma = Tensor<float>({5});
    expect_invalid(p.forward(), {"gamma", "[5]", "[6]"});
  }
  {
    Problem<float, float> p({2, 6, 3}, 2);
    p.beta = Tensor<float>({6, 1});
    expect_invalid(p.forward(), {"beta", "[6, 1]", "[6]"});
  }
  {
    Problem<float, float> p({2, 6, 3}, 2);
    p.y = Tensor<float>({2, 6, 4});
    expect_invalid(p.forward(), {"y", "[2, 6, 4]", "[2, 6, 3]"});
  }
  {
    Problem<float, float> p({2, 6, 3}, 2);
    p.mean = Tensor<float>({2, 3});
    expect_invalid(p.forward(), {"mean", "[2, 3]", "[2, 2]"});
  }
  {
    Problem<float, float> p({2, 6, 3}, 2);
    p.rstd = Tensor<float>({2});
    expect_invalid(p.forward(), {"rstd", "[2]", "[2, 2]"});
  }
}

TEST(GroupNormReferenceArguments, RejectsBadRanksAndEmptyTensors) {
  Problem<float, float> p({2, 6, 3}, 2);
  p.x = Tensor<float>({6});
  expect_invalid(p.forward(), {"rank 1"});
  p.x = Tensor<float>({2, 6, 1, 1, 1, 1});
  expect_invalid(p.forward(), {"rank 6"});
  p.x = Tensor<float>({2, 6, 0});
  expect_invalid(p.forward(), {"x length 0 in dimension 2"});
}

TEST(GroupNormReferenceArguments, BackwardRejectsBadArguments) {
  {
    Problem<float, float> p({2, 6, 3}, 4);
    expect_invalid(
        ref::groupnorm_backward_data(p.dy, p.x, p.gamma, p.beta, p.mean, p.rstd, 4, Activation::kIdentity, 1.0, p.dx),
        {"C=6", "G=4"});
    expect_invalid(ref::groupnorm_backward_gamma_beta(p.dy, p.x, p.gamma, p.beta, p.mean, p.rstd, 4,
                                                      Activation::kIdentity, 1.0, p.dgamma, p.dbeta),
                   {"C=6", "G=4"});
  }
  Problem<float, float> p({2, 6, 3}, 2);
  p.dy = Tensor<float>({2, 6, 2});
  expect_invalid(p.backward(), {"dy", "[2, 6, 2]", "[2, 6, 3]"});
  p.dy = Tensor<float>({2, 6, 3});
  p.dx = Tensor<float>({1, 6, 3});
  expect_invalid(p.backward(), {"dx", "[1, 6, 3]"});
  p.dx = Tensor<float>({2, 6, 3});
  p.dgamma = Tensor<float>({7});
  expect_invalid(p.backward(), {"dgamma", "[7]", "[6]"});
  p.dgamma = Tensor<float>({6});
  p.dbeta = Tensor<float>({3});
  expect_invalid(p.backward(), {"dbeta", "[3]", "[6]"});
  p.dbeta = Tensor<float>({6});
  p.mean = Tensor<float>({6, 2});
  expect_invalid(p.backward(), {"mean", "[6, 2]", "[2, 2]"});
}

// ---- tolerances ------------------------------------------------------------------------------

void expect_same(const hipgrad::host::Tolerance& got, const hipgrad::host::Tolerance& want, const char* what) {
  EXPECT_DOUBLE_EQ(got.rtol, want.rtol) << what;
  EXPECT_DOUBLE_EQ(got.atol, want.atol) << what;
}

// One group of x [1, 2, 2] = {1, 3 | -1, 5}, μ = 1, rstd = 0.5 (x̂ = {0, 1 | -1, 2}), γ = {2, -3},
// β = {1, 0.5}, dy = {1, -2 | 0.5, 4}; the largest terms worked out by hand:
// y: |γ|·(|x̂| + rstd·|x|) + |β| = 3·(2 + 2.5) + 0.5 = 14; mean: |x| = 5; rstd 0.5;
// dx: mean|γ·dy| = 19.5/4, mean|γ·dy·x̂| = 29.5/4, largest rstd·(|γ·dy| + 4.875 + |x̂|·7.375) =
// 0.5·(12 + 4.875 + 14.75) = 15.8125; dγ, dβ over 2 terms up to |dy·x̂| = 8 and |dy| = 4.
TEST(GroupNormTolerances, FromTheTermsOfEachOutput) {
  namespace hh = hipgrad::host;
  Tensor<float> x({1, 2, 2}), dy({1, 2, 2}), gamma({2}), beta({2}), mean({1, 1}), rstd({1, 1});
  const float xs[] = {1, 3, -1, 5}, dys[] = {1, -2, 0.5f, 4};
  for (Index i = 0; i < 4; ++i) x.at(0, i / 2, i % 2) = xs[i], dy.at(0, i / 2, i % 2) = dys[i];
  gamma.at(0) = 2, gamma.at(1) = -3, beta.at(0) = 1, beta.at(1) = 0.5f, mean.at(0, 0) = 1, rstd.at(0, 0) = 0.5f;
  ref::GroupNormTolerances t;
  ASSERT_TRUE(ref::groupnorm_tolerances(x, &dy, gamma, beta, mean, rstd, 1, &t).is_ok());
  expect_same(t.y, hh::averaged_tolerance<float>(14), "y");
  expect_same(t.mean, hh::averaged_tolerance<float>(5), "mean");
  expect_same(t.rstd, hh::averaged_tolerance<float>(0.5), "rstd");
  expect_same(t.dx, hh::averaged_tolerance<float>(1.1 * 15.8125), "dx");
  expect_same(t.dgamma, hh::sum_tolerance<float>(2, 1.1 * 8), "dgamma");
  expect_same(t.dbeta, hh::sum_tolerance<float>(2, 1.1 * 4), "dbeta");
  // Bad arguments: a reason, never a crash.
  expect_invalid(ref::groupnorm_tolerances(x, &dy, gamma, beta, mean, rstd, 3, &t), {"G=3"});
  Tensor<float> short_dy({1, 2, 1});
  expect_invalid(ref::groupnorm_tolerances(x, &short_dy, gamma, beta, mean, rstd, 1, &t), {"dy"});
  expect_invalid(ref::groupnorm_tolerances(x, &dy, gamma, beta, mean, rstd, 1, nullptr), {"null"});
}

// ---- Swish helpers ----------------------------------------------------------------------------

TEST(SwishHelpers, ValuesAndDerivative) {
  namespace gn = hipgrad::groupnorm;
  EXPECT_EQ(gn::sigmoid(0.0), 0.5);
  EXPECT_EQ(gn::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(gn::swish(0.0, 0.7), 0.0);
  EXPECT_EQ(gn::swish_derivative(0.0, 0.7), 0.5);
  EXPECT_NEAR(gn::swish(2.0, 1.0), 2.0 / (1.0 + std::exp(-2.0)), 1e-15);
  EXPECT_EQ(gn::swish(-200.0f, 1.0f), -0.0f);  // σ underflows to 0 without producing a NaN
  EXPECT_EQ(gn::swish_derivative(200.0f, 1.0f), 1.0f);
  for (double beta : {1.0, 0.7, 2.5}) {
    for (double z : {-6.0, -1.3, -0.2, 0.0, 0.4, 1.7, 5.0}) {
      const double h = 1e-5;
      const double numeric = (gn::swish(z + h, beta) - gn::swish(z - h, beta)) / (2 * h);
      EXPECT_NEAR(gn::swish_derivative(z, beta), numeric, 1e-9) << "z " << z << " beta " << beta;
      EXPECT_NEAR(gn::swish_derivative(static_cast<float>(z), static_cast<float>(beta)), gn::swish_derivative(z, beta),
                  1e-6);
      EXPECT_NEAR(gn::swish(static_cast<float>(z), static_cast<float>(beta)), gn::swish(z, beta),
                  1e-6 * std::max(1.0, std::abs(z)));
    }
  }
}

}  // namespace
