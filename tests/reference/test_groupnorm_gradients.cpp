/// @file test_groupnorm_gradients.cpp
/// @brief The GroupNorm backward references against a central finite difference of the forward
///        reference, in double.
///
/// With L(x, γ, β) = ⟨forward(x, γ, β), dy⟩, the backward passes must return ∂L/∂x, ∂L/∂γ and
/// ∂L/∂β. The forward recomputes μ and rstd for every perturbed x, so the difference quotient sees
/// the statistics as functions of x, which is what the analytic dx accounts for.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "hipgrad/host/reference/groupnorm.hpp"
#include "reference_test_util.hpp"

namespace {

using hipgrad::groupnorm::Activation;
using hipgrad::host::Index;
using hipgrad::host::Tensor;
using hipgrad::test::NormLayout;
namespace ref = hipgrad::host::reference;

constexpr double kEpsilon = 1e-3;

struct GradientCase {
  Index n, c;
  std::vector<Index> spatial;
  Index groups;
  Activation activation;
  double swish_beta;
  NormLayout x_layout, grad_layout;  // grad_layout: dy and dx

  std::vector<Index> lengths() const {
    std::vector<Index> l{n, c};
    l.insert(l.end(), spatial.begin(), spatial.end());
    return l;
  }
};

std::string describe(const GradientCase& p) {
  std::string name = "N" + std::to_string(p.n) + "C" + std::to_string(p.c) + "G" + std::to_string(p.groups) + "_S";
  for (Index s : p.spatial) name += std::to_string(s) + "x";
  name += p.activation == Activation::kSwish ? "_Swish" + std::to_string(static_cast<int>(p.swish_beta * 10)) : "_Id";
  return name + "_" + hipgrad::test::layout_name(p.x_layout) + "_" + hipgrad::test::layout_name(p.grad_layout);
}

std::string case_name(const ::testing::TestParamInfo<GradientCase>& info) { return describe(info.param); }

// Printed by GoogleTest (and in CTest's test names) instead of the object's bytes.
void PrintTo(const GradientCase& p, std::ostream* os) { *os << describe(p); }

class GroupNormGradient : public ::testing::TestWithParam<GradientCase> {
 protected:
  void SetUp() override {
    const GradientCase& p = GetParam();
    std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(p.c * 131 + p.groups * 17 + p.spatial.size()));
    x_ = Tensor<double>(p.lengths(), hipgrad::test::norm_strides(p.lengths(), p.x_layout));
    dy_ = Tensor<double>(p.lengths(), hipgrad::test::norm_strides(p.lengths(), p.grad_layout));
    gamma_ = Tensor<double>({p.c});
    beta_ = Tensor<double>({p.c});
    // Values of order one, centred near zero, so that the float rounding of the saved μ stays
    // small against σ (see the tolerance below).
    hipgrad::test::fill_uniform(x_, rng, -1.0, 1.0);
    hipgrad::test::fill_uniform(dy_, rng, -1.0, 1.0);
    hipgrad::test::fill_uniform(gamma_, rng, -1.5, 1.5);
    hipgrad::test::fill_uniform(beta_, rng, -0.5, 0.5);
  }

  /// L = ⟨y, dy⟩ with y from the forward reference (statistics recomputed from x).
  double loss() const {
    const GradientCase& p = GetParam();
    Tensor<double> y(p.lengths());
    Tensor<float> mean({p.n, p.groups}), rstd({p.n, p.groups});
    const hipgrad::Status status =
        ref::groupnorm_forward(x_, gamma_, beta_, p.groups, kEpsilon, p.activation, p.swish_beta, y, mean, rstd);
    EXPECT_TRUE(status.is_ok()) << status.to_string();
    return hipgrad::test::inner_product(y, dy_);
  }

  /// (L(v + h) − L(v − h)) / 2h for every logical element v of `t`, which must be one of the
  /// inputs of loss(); h is relative to |v|, and the step actually taken is used as 2h.
  Tensor<double> central_difference(Tensor<double>& t) const {
    Tensor<double> gradient(t.lengths());
    t.for_each_index([&](const std::vector<Index>& i) {
      const double v = t(i), h = 1e-5 * std::max(1.0, std::abs(v));
      t(i) = v + h;
      const double plus = loss(), upper = t(i);
      t(i) = v - h;
      const double minus = loss(), lower = t(i);
      t(i) = v;
      gradient(i) = (plus - minus) / (upper - lower);
    });
    return gradient;
  }

  // Tolerance: the analytic gradients use μ and rstd saved as float (relative rounding 2^-24 ≈
  // 6e-8). That perturbs them by 0.5e-7 to 3e-7 of their scale on these cases, the most for the
  // one-element groups, where rstd = 1/√ε ≈ 32 magnifies the rounding of μ. The difference
  // quotient in double is good to about 1e-9 (truncation h² ≈ 1e-10, cancellation ε·|L|/h ≈
  // 1e-11). A wrong formula is off by O(1). Gradients here are of order one, so the scale has a
  // floor of 1.
  static void expect_close(const Tensor<double>& analytic, const Tensor<double>& numeric, const char* what) {
    double scale = 1.0;
    numeric.for_each_index([&](const std::vector<Index>& i) { scale = std::max(scale, std::abs(numeric(i))); });
    int failures = 0;
    numeric.for_each_index([&](const std::vector<Index>& i) {
      if (failures < 5 && !(std::abs(analytic(i) - numeric(i)) <= 1e-6 * scale)) {
        ++failures;
        ADD_FAILURE() << what << " at storage offset " << numeric.offset(i) << ": analytic " << analytic(i)
                      << ", finite difference " << numeric(i) << " (scale " << scale << ")";
      }
    });
  }

  Tensor<double> x_, dy_, gamma_, beta_;
};

TEST_P(GroupNormGradient, MatchesCentralDifferenceOfForward) {
  const GradientCase& p = GetParam();
  Tensor<double> y(p.lengths());
  Tensor<float> mean({p.n, p.groups}), rstd({p.n, p.groups});
  ASSERT_TRUE(
      ref::groupnorm_forward(x_, gamma_, beta_, p.groups, kEpsilon, p.activation, p.swish_beta, y, mean, rstd).is_ok());

  Tensor<double> dx(p.lengths(), hipgrad::test::norm_strides(p.lengths(), p.grad_layout));
  Tensor<double> dgamma({p.c}), dbeta({p.c});
  const hipgrad::Status data =
      ref::groupnorm_backward_data(dy_, x_, gamma_, beta_, mean, rstd, p.groups, p.activation, p.swish_beta, dx);
  ASSERT_TRUE(data.is_ok()) << data.to_string();
  const hipgrad::Status params = ref::groupnorm_backward_gamma_beta(dy_, x_, gamma_, beta_, mean, rstd, p.groups,
                                                                    p.activation, p.swish_beta, dgamma, dbeta);
  ASSERT_TRUE(params.is_ok()) << params.to_string();

  expect_close(dx, central_difference(x_), "dx");
  expect_close(dgamma, central_difference(gamma_), "dgamma");
  expect_close(dbeta, central_difference(beta_), "dbeta");
}

constexpr Activation kId = Activation::kIdentity;
constexpr Activation kSwish = Activation::kSwish;
constexpr NormLayout kNCHW = NormLayout::kNCHW;
constexpr NormLayout kNHWC = NormLayout::kNHWC;
constexpr NormLayout kPadded = NormLayout::kPaddedNHWC;

INSTANTIATE_TEST_SUITE_P(Shapes, GroupNormGradient,
                         ::testing::Values(
                             // spatial rank 0: x is [N, C]
                             GradientCase{2, 6, {}, 2, kId, 1.0, kNCHW, kNCHW},
                             GradientCase{
                                 2, 6, {}, 6, kSwish, 1.0, kNCHW, kNCHW},  // groups of one element: all gradients 0
                             GradientCase{3, 8, {}, 1, kSwish, 0.7, kNCHW, kNCHW},
                             // spatial rank 1
                             GradientCase{1, 4, {5}, 1, kSwish, 1.0, kNHWC, kNHWC},
                             GradientCase{2, 6, {4}, 3, kSwish, 0.7, kPadded, kPadded},
                             GradientCase{1, 4, {7}, 4, kId, 1.0, kNCHW, kNHWC},  // C/G = 1
                             // spatial rank 2
                             GradientCase{2, 4, {3, 4}, 2, kId, 1.0, kNCHW, kNCHW},
                             GradientCase{1, 6, {3, 3}, 6, kSwish, 1.0, kNHWC, kNHWC},  // C/G = 1
                             GradientCase{2, 8, {2, 3}, 4, kSwish, 0.7, kNHWC, kNCHW},
                             GradientCase{2, 6, {3, 2}, 1, kId, 1.0, kPadded, kNHWC},
                             // spatial rank 3
                             GradientCase{1, 4, {2, 2, 3}, 2, kId, 1.0, kPadded, kNCHW},
                             GradientCase{2, 6, {2, 3, 2}, 3, kSwish, 0.7, kNHWC, kNHWC},
                             GradientCase{1, 3, {2, 2, 2}, 1, kSwish, 1.0, kNCHW, kPadded}),
                         case_name);

}  // namespace
