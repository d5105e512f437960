/// @file test_conv_reference.cpp
/// @brief The convolution references: hand-computed 1-D cases, an independent 2-D loop nest, the
///        adjoint identities ⟨conv(x, w), dy⟩ = ⟨x, dgrad(dy, w)⟩ = ⟨w, wgrad(x, dy)⟩ on seeded random
///        shapes, layout, thread-count and type independence, and argument checking.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "hipgrad/host/reference/conv.hpp"
#include "reference_test_util.hpp"

namespace {

using hipgrad::bfloat16;
using hipgrad::half;
using hipgrad::Status;
using hipgrad::StatusCode;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::host::Index;
using hipgrad::host::Tensor;
namespace ref = hipgrad::host::reference;

// ---- tensors of a problem ---------------------------------------------------------------------

/// How the three tensors of a problem are stored; `padded` leaves a gap after every dimension.
struct Layouts {
  ConvLayout in = ConvLayout::kNHWGC, wei = ConvLayout::kNHWGC, out = ConvLayout::kNHWGC;
  bool padded = false;
};

std::vector<Index> strides_for(const std::vector<Index>& lengths, const std::vector<int>& order, bool padded) {
  return padded ? hipgrad::test::padded_strides(lengths, order) : hipgrad::host::strides_for_order(lengths, order);
}

template <typename T, int NDim>
Tensor<T> make_input(const ConvParams<NDim>& p, const Layouts& l) {
  return Tensor<T>(p.input_lengths(),
                   strides_for(p.input_lengths(), hipgrad::conv::activation_order<NDim>(l.in), l.padded));
}
template <typename T, int NDim>
Tensor<T> make_weight(const ConvParams<NDim>& p, const Layouts& l) {
  return Tensor<T>(p.weight_lengths(),
                   strides_for(p.weight_lengths(), hipgrad::conv::weight_order<NDim>(l.wei), l.padded));
}
template <typename T, int NDim>
Tensor<T> make_output(const ConvParams<NDim>& p, const Layouts& l) {
  return Tensor<T>(p.output_lengths(),
                   strides_for(p.output_lengths(), hipgrad::conv::activation_order<NDim>(l.out), l.padded));
}

/// Inputs of all three directions and their results, each result pre-filled with NaN.
template <int NDim, typename T = double>
struct ConvRun {
  Tensor<T> x, w, dy, y, dx, dw;

  ConvRun(const ConvParams<NDim>& p, const Layouts& l)
      : x(make_input<T>(p, l)),
        w(make_weight<T>(p, l)),
        dy(make_output<T>(p, l)),
        y(make_output<T>(p, l)),
        dx(make_input<T>(p, l)),
        dw(make_weight<T>(p, l)) {
    hipgrad::test::fill_nan(y);
    hipgrad::test::fill_nan(dx);
    hipgrad::test::fill_nan(dw);
  }

  void fill_integers(std::mt19937_64& rng) {
    hipgrad::test::fill_integers(x, rng, -4, 4);
    hipgrad::test::fill_integers(w, rng, -4, 4);
    hipgrad::test::fill_integers(dy, rng, -4, 4);
  }
  void fill_uniform(std::mt19937_64& rng) {
    hipgrad::test::fill_uniform(x, rng, -1.0, 1.0);
    hipgrad::test::fill_uniform(w, rng, -1.0, 1.0);
    hipgrad::test::fill_uniform(dy, rng, -1.0, 1.0);
  }
  template <typename TOther>
  void copy_inputs_from(const ConvRun<NDim, TOther>& other) {
    hipgrad::test::copy_logical(other.x, x);
    hipgrad::test::copy_logical(other.w, w);
    hipgrad::test::copy_logical(other.dy, dy);
  }

  void run_all(const ConvParams<NDim>& p) {
    const Status forward = ref::conv_forward(x, w, y, p);
    ASSERT_TRUE(forward.is_ok()) << forward.to_string();
    const Status data = ref::conv_backward_data(dy, w, dx, p);
    ASSERT_TRUE(data.is_ok()) << data.to_string();
    const Status weight = ref::conv_backward_weight(x, dy, dw, p);
    ASSERT_TRUE(weight.is_ok()) << weight.to_string();
  }

  void expect_bitwise_equal(const ConvRun& other) const {
    EXPECT_TRUE(hipgrad::test::bitwise_equal(y, other.y)) << "forward";
    EXPECT_TRUE(hipgrad::test::bitwise_equal(dx, other.dx)) << "backward data";
    EXPECT_TRUE(hipgrad::test::bitwise_equal(dw, other.dw)) << "backward weight";
  }
};

template <int NDim>
ConvParams<NDim> make_params(std::int64_t g, std::int64_t n, std::int64_t k, std::int64_t c,
                             typename ConvParams<NDim>::Lengths filter, typename ConvParams<NDim>::Lengths input,
                             typename ConvParams<NDim>::Lengths strides, typename ConvParams<NDim>::Lengths dilations,
                             typename ConvParams<NDim>::Lengths left_pads,
                             typename ConvParams<NDim>::Lengths right_pads) {
  ConvParams<NDim> p;
  p.G = g;
  p.N = n;
  p.K = k;
  p.C = c;
  p.filter = filter;
  p.input = input;
  p.strides = strides;
  p.dilations = dilations;
  p.left_pads = left_pads;
  p.right_pads = right_pads;
  return p;
}

// ---- hand-computed 1-D cases ------------------------------------------------------------------

template <typename T>
std::vector<double> values_1d(const Tensor<T>& t) {  // a [1, 1, 1, L] tensor as a list
  std::vector<double> v;
  for (Index i = 0; i < t.length(3); ++i) v.push_back(hipgrad::type_convert<double>(t.at(0, 0, 0, i)));
  return v;
}

template <typename T>
void set_1d(Tensor<T>& t, const std::vector<double>& v) {
  ASSERT_EQ(t.length(3), static_cast<Index>(v.size()));
  for (Index i = 0; i < t.length(3); ++i) t.at(0, 0, 0, i) = hipgrad::type_convert<T>(v[static_cast<std::size_t>(i)]);
}

// in = [1 2 3 4 5], w = [1 10 100], stride 2, pads 1 + 2: y[o] = Σ_f in[2o + f − 1]·w[f] reads
// in[−1..1], in[1..3], in[3..5] (in[−1] and in[5] are padding).
TEST(ConvReferenceHandComputed, Stride2WithPadding) {
  const auto p = make_params<1>(1, 1, 1, 1, {3}, {5}, {2}, {1}, {1}, {2});
  ConvRun<1> r(p, Layouts{});
  set_1d(r.x, {1, 2, 3, 4, 5});
  set_1d(r.w, {1, 10, 100});
  set_1d(r.dy, {1, 2, 3});
  r.run_all(p);
  EXPECT_EQ(values_1d(r.y), (std::vector<double>{0 + 10 + 200, 2 + 30 + 400, 4 + 50 + 0}));
  // dx[i] = Σ dy[o]·w[f] over 2o + f − 1 = i
  EXPECT_EQ(values_1d(r.dx), (std::vector<double>{10, 100 + 2, 20, 200 + 3, 30}));
  // dw[f] = Σ_o in[2o + f − 1]·dy[o]
  EXPECT_EQ(values_1d(r.dw), (std::vector<double>{0 + 2 * 2 + 4 * 3, 1 + 3 * 2 + 5 * 3, 2 + 4 * 2 + 0}));
}

// Dilation 2, stride 2, pads 2 + 1 over in = [1..7]: y[o] = Σ_f in[2o + 2f − 2]·w[f].
TEST(ConvReferenceHandComputed, Dilation2Stride2) {
  const auto p = make_params<1>(1, 1, 1, 1, {3}, {7}, {2}, {2}, {2}, {1});
  ConvRun<1> r(p, Layouts{});
  set_1d(r.x, {1, 2, 3, 4, 5, 6, 7});
  set_1d(r.w, {1, 10, 100});
  set_1d(r.dy, {1, -1, 2});
  r.run_all(p);
  EXPECT_EQ(values_1d(r.y), (std::vector<double>{0 + 10 + 300, 1 + 30 + 500, 3 + 50 + 700}));
  // taps of input i: 2o + 2f − 2 = i, so only even i are read
  EXPECT_EQ(values_1d(r.dx), (std::vector<double>{10 - 1, 0, 100 - 10 + 2, 0, -100 + 20, 0, 200}));
  EXPECT_EQ(values_1d(r.dw), (std::vector<double>{0 - 1 + 3 * 2, 1 - 3 + 5 * 2, 3 - 5 + 7 * 2}));
}

// Stride 3 with a 1-tap filter reads only in[0], in[3], in[6]: the others get a zero gradient.
TEST(ConvReferenceHandComputed, UntouchedInputsGetZeroGradient) {
  const auto p = make_params<1>(1, 1, 1, 1, {1}, {7}, {3}, {1}, {0}, {0});
  ConvRun<1> r(p, Layouts{});
  set_1d(r.x, {1, 2, 3, 4, 5, 6, 7});
  set_1d(r.w, {-2});
  set_1d(r.dy, {1, 2, 3});
  r.run_all(p);
  EXPECT_EQ(values_1d(r.y), (std::vector<double>{-2, -8, -14}));
  EXPECT_EQ(values_1d(r.dx), (std::vector<double>{-2, 0, 0, -4, 0, 0, -6}));
  EXPECT_EQ(values_1d(r.dw), (std::vector<double>{1 + 4 * 2 + 7 * 3}));
}

// ---- an independent 2-D loop nest -------------------------------------------------------------

/// out[g, n, k, ho, wo] written out as plain loops, independently of the reference's index math.
double loop_nest_2d(const ConvRun<2>& r, const ConvParams<2>& p, Index g, Index n, Index k, Index ho, Index wo) {
  double sum = 0.0;
  for (Index c = 0; c < p.C; ++c) {
    for (Index fy = 0; fy < p.filter[0]; ++fy) {
      for (Index fx = 0; fx < p.filter[1]; ++fx) {
        const Index hi = ho * p.strides[0] + fy * p.dilations[0] - p.left_pads[0];
        const Index wi = wo * p.strides[1] + fx * p.dilations[1] - p.left_pads[1];
        if (hi >= 0 && hi < p.input[0] && wi >= 0 && wi < p.input[1]) {
          sum += r.x.at(g, n, c, hi, wi) * r.w.at(g, k, c, fy, fx);
        }
      }
    }
  }
  return sum;
}

TEST(ConvReference, ForwardMatchesA2DLoopNest) {
  std::mt19937_64 rng(21);
  const ConvParams<2> shapes[] = {
      make_params<2>(3, 2, 2, 2, {3, 2}, {6, 5}, {2, 1}, {1, 2}, {1, 0}, {2, 1}),
      make_params<2>(4, 1, 1, 1, {3, 3}, {5, 7}, {1, 3}, {2, 1}, {2, 1}, {3, 0}),
  };
  for (const ConvParams<2>& p : shapes) {
    SCOPED_TRACE(p.to_string());
    ConvRun<2> r(p, Layouts{ConvLayout::kNHWGC, ConvLayout::kNHWGC, ConvLayout::kGNHWC, false});
    r.fill_integers(rng);
    r.run_all(p);
    r.y.for_each_index([&](const std::vector<Index>& i) {
      EXPECT_EQ(r.y(i), loop_nest_2d(r, p, i[0], i[1], i[2], i[3], i[4]))
          << "g " << i[0] << " n " << i[1] << " k " << i[2] << " ho " << i[3] << " wo " << i[4];
    });
  }
}

// ---- adjoint identities -----------------------------------------------------------------------

template <int NDim>
ConvParams<NDim> random_params(std::mt19937_64& rng) {
  auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t max_input = NDim == 1 ? 12 : NDim == 2 ? 7 : 5;
  for (;;) {
    ConvParams<NDim> p;
    const bool depthwise = uniform(0, 3) == 0;
    p.G = depthwise ? uniform(2, 4) : uniform(1, 3);
    p.N = uniform(1, 2);
    p.K = depthwise ? 1 : uniform(1, 3);
    p.C = depthwise ? 1 : uniform(1, 3);
    for (int d = 0; d < NDim; ++d) {
      p.filter[d] = uniform(1, NDim == 3 ? 2 : 3);
      p.input[d] = uniform(1, max_input);
      p.strides[d] = uniform(1, 3);
      p.dilations[d] = uniform(1, 3);
      // Up to one past the filter's reach: some outputs then see only padding.
      const std::int64_t reach = p.dilations[d] * (p.filter[d] - 1) + 1;
      p.left_pads[d] = uniform(0, reach + 1);
      p.right_pads[d] = uniform(0, reach + 1);
    }
    if (p.validate().is_ok()) return p;
  }
}

Layouts random_layouts(std::mt19937_64& rng) {
  const ConvLayout all[] = {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW};
  std::uniform_int_distribution<int> pick(0, 2);
  Layouts l;
  l.in = all[pick(rng)];
  l.wei = all[pick(rng)];
  l.out = all[pick(rng)];
  l.padded = pick(rng) == 0;
  return l;
}

/// Checks the two adjoint identities, exactly with integer data (every sum is an integer below
/// 2^53, so double arithmetic makes no rounding) and to 1e-10 relative with uniform data.
template <int NDim>
void check_adjoint(const ConvParams<NDim>& p, std::mt19937_64& rng) {
  SCOPED_TRACE(p.to_string());
  const Layouts layouts = random_layouts(rng);
  ConvRun<NDim> exact(p, layouts);
  exact.fill_integers(rng);
  exact.run_all(p);
  const double forward = hipgrad::test::inner_product(exact.y, exact.dy);
  ASSERT_FALSE(std::isnan(forward)) << "an output element was not written";
  EXPECT_EQ(forward, hipgrad::test::inner_product(exact.x, exact.dx));
  EXPECT_EQ(forward, hipgrad::test::inner_product(exact.w, exact.dw));

  ConvRun<NDim> real(p, layouts);
  real.fill_uniform(rng);
  real.run_all(p);
  const double y_dy = hipgrad::test::inner_product(real.y, real.dy);
  // Cauchy–Schwarz bounds every partial sum, which makes a scale that cannot cancel to zero.
  const double scale =
      std::sqrt(hipgrad::test::inner_product(real.y, real.y) * hipgrad::test::inner_product(real.dy, real.dy)) + 1e-300;
  EXPECT_NEAR(y_dy, hipgrad::test::inner_product(real.x, real.dx), 1e-10 * scale);
  EXPECT_NEAR(y_dy, hipgrad::test::inner_product(real.w, real.dw), 1e-10 * scale);
}

TEST(ConvReferenceAdjoint, ChosenShapes) {
  std::mt19937_64 rng(31);
  // pads beyond the filter's reach: the outer outputs see only padding
  check_adjoint(make_params<1>(1, 2, 2, 3, {2}, {4}, {1}, {1}, {5}, {3}), rng);
  // stride 3 > reach 2: every third input is never read
  check_adjoint(make_params<1>(2, 1, 3, 2, {2}, {10}, {3}, {1}, {0}, {0}), rng);
  // depthwise 2-D
  check_adjoint(make_params<2>(4, 2, 1, 1, {3, 3}, {6, 5}, {2, 1}, {1, 2}, {1, 0}, {2, 1}), rng);
  // stride 3 and dilation 3 together, asymmetric pads
  check_adjoint(make_params<2>(2, 1, 2, 3, {3, 2}, {9, 7}, {3, 2}, {3, 3}, {0, 4}, {5, 1}), rng);
  // 3-D with everything different per dimension
  check_adjoint(make_params<3>(2, 1, 3, 2, {2, 1, 3}, {4, 3, 5}, {1, 2, 3}, {2, 1, 1}, {0, 1, 2}, {3, 0, 1}), rng);
}

TEST(ConvReferenceAdjoint, RandomShapes) {
  for (int i = 0; i < 30; ++i) {
    std::mt19937_64 rng(1000 + static_cast<unsigned>(i));
    switch (i % 3) {
      case 0: check_adjoint(random_params<1>(rng), rng); break;
      case 1: check_adjoint(random_params<2>(rng), rng); break;
      default: check_adjoint(random_params<3>(rng), rng); break;
    }
  }
}

// ---- independence of layout, thread count and storage type ------------------------------------

template <int NDim>
void check_layout_independence(const ConvParams<NDim>& p) {
  SCOPED_TRACE(p.to_string());
  std::mt19937_64 rng(41);
  ConvRun<NDim> base(p, Layouts{});
  base.fill_uniform(rng);
  base.run_all(p);
  for (ConvLayout layout : {ConvLayout::kGNHWC, ConvLayout::kNGCHW}) {
    for (bool padded : {false, true}) {
      ConvRun<NDim> other(p, Layouts{layout, layout, layout, padded});
      other.copy_inputs_from(base);
      other.run_all(p);
      base.expect_bitwise_equal(other);
    }
  }
}

TEST(ConvReference, ResultsDoNotDependOnLayout) {
  check_layout_independence(make_params<2>(2, 2, 3, 2, {3, 3}, {5, 6}, {2, 1}, {1, 2}, {1, 2}, {0, 1}));
  check_layout_independence(
      make_params<3>(3, 1, 2, 2, {2, 2, 1}, {3, 4, 4}, {1, 2, 1}, {2, 1, 1}, {1, 0, 0}, {0, 1, 1}));
}

TEST(ConvReference, ResultsDoNotDependOnThreadCount) {
  const auto p = make_params<2>(2, 3, 4, 3, {3, 3}, {7, 6}, {1, 2}, {2, 1}, {2, 1}, {1, 1});
  const Layouts layouts{ConvLayout::kNHWGC, ConvLayout::kNHWGC, ConvLayout::kNHWGC, false};
  std::mt19937_64 rng(43);
  ConvRun<2> one(p, layouts);
  one.fill_uniform(rng);
  {
    hipgrad::test::ScopedThreadCount scoped(1);
    one.run_all(p);
  }
  for (int threads : {2, 3, 8}) {
    hipgrad::test::ScopedThreadCount scoped(threads);
    ConvRun<2> many(p, layouts);
    many.copy_inputs_from(one);
    many.run_all(p);
    one.expect_bitwise_equal(many);
  }
}

// Each type computes in double and rounds once, so it equals the double result rounded.
template <typename T>
void expect_rounded_from(const Tensor<T>& narrow, const Tensor<double>& wide, const char* what) {
  Tensor<T> rounded(wide.lengths());
  hipgrad::test::copy_logical(wide, rounded);
  EXPECT_TRUE(hipgrad::test::bitwise_equal(rounded, narrow)) << what;
}

template <typename TIn, typename TWei, typename TOut>
void check_types() {
  const auto p = make_params<2>(2, 2, 3, 4, {3, 3}, {6, 5}, {1, 2}, {1, 1}, {1, 1}, {1, 0});
  std::mt19937_64 rng(47);
  ConvRun<2> wide(p, Layouts{});
  wide.fill_integers(rng);
  wide.run_all(p);
  Tensor<TIn> x = make_input<TIn>(p, Layouts{}), dx = make_input<TIn>(p, Layouts{});
  Tensor<TWei> w = make_weight<TWei>(p, Layouts{}), dw = make_weight<TWei>(p, Layouts{});
  Tensor<TOut> dy = make_output<TOut>(p, Layouts{}), y = make_output<TOut>(p, Layouts{});
  hipgrad::test::copy_logical(wide.x, x);
  hipgrad::test::copy_logical(wide.w, w);
  hipgrad::test::copy_logical(wide.dy, dy);
  ASSERT_TRUE(ref::conv_forward(x, w, y, p).is_ok());
  ASSERT_TRUE(ref::conv_backward_data(dy, w, dx, p).is_ok());
  ASSERT_TRUE(ref::conv_backward_weight(x, dy, dw, p).is_ok());
  expect_rounded_from(y, wide.y, "forward");
  expect_rounded_from(dx, wide.dx, "backward data");
  expect_rounded_from(dw, wide.dw, "backward weight");
}

TEST(ConvReference, StorageTypes) {
  check_types<float, float, float>();
  check_types<half, half, half>();
  check_types<bfloat16, bfloat16, bfloat16>();
  check_types<half, half, float>();
  check_types<bfloat16, float, double>();
}

// ---- invalid arguments ------------------------------------------------------------------------

TEST(ConvReference, RejectsMismatchedTensorsAndInvalidParams) {
  const auto p = make_params<2>(2, 1, 3, 2, {3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  ConvRun<2> r(p, Layouts{});
  Tensor<double> wrong_input({2, 1, 3, 5, 5});
  Status s = ref::conv_forward(wrong_input, r.w, r.y, p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "input has lengths [2, 1, 3, 5, 5] but the problem needs [2, 1, 2, 5, 5]");

  Tensor<double> wrong_output({2, 1, 3, 4, 5});
  s = ref::conv_forward(r.x, r.w, wrong_output, p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[2, 1, 3, 5, 5]"), std::string::npos) << s.message();

  Tensor<double> wrong_weight({2, 3, 2, 3});
  s = ref::conv_backward_data(r.dy, wrong_weight, r.dx, p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("weight has lengths [2, 3, 2, 3]"), std::string::npos) << s.message();

  s = ref::conv_backward_weight(r.x, r.dy, wrong_weight, p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("weight gradient"), std::string::npos) << s.message();

  auto bad = p;
  bad.strides[1] = 0;
  s = ref::conv_backward_weight(r.x, r.dy, r.dw, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "stride 0 in dimension 1 must be positive");
}

}  // namespace
