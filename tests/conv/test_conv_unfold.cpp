/// @file test_conv_unfold.cpp
/// @brief kAuto's unfolded route (ops/conv/common/unfold.hpp). CPU: the rule (which problems
///        unfold); the kernels' index maps run on the host — x unfolded into columns, dw's columns
///        gathered into dw, w spread into columns, Y folded into dx — give the CPU reference's dw
///        and dx exactly, every output element written once, on 1-D/2-D/3-D problems with 1 to 9,
///        13 and 20 channels, strides, dilations, asymmetric pads, x and dy channels-last or NCHW
///        (dy packed), K not whole vectors and weights in any strides. GPU (fp16, bf16): both ops
///        under kAuto take the unfolded route and match the CPU reference, outputs poisoned first,
///        on stems (channels-last and NCHW) and odd channel counts.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "conv/conv_test_problems.hpp"
#include "conv/conv_test_runs.hpp"
#include "conv_instances.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/common/unfold.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::Algorithm;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::host::InitMethod;
using hipgrad::host::Tensor;
using hipgrad::test::conv_params;
namespace detail = hipgrad::conv::detail;

/// `p` with dy channels-last (NHWGC), x / dx and w in the layouts given.
template <int NDim>
Problem<NDim> problem_of(const ConvParams<NDim>& p, ConvLayout x_layout, ConvLayout w_layout = ConvLayout::kNHWGC) {
  Problem<NDim> problem = Problem<NDim>::packed(p);
  problem.input_strides = hipgrad::conv::input_strides(p, x_layout);
  problem.weight_strides = hipgrad::conv::weight_strides(p, w_layout);
  return problem;
}

TEST(ConvUnfold, RuleTakesFewAndOddChannels) {
  auto stem = [](Index c, Index k) {
    return conv_params<2>(1, 2, k, c, {7, 7}, {32, 32}, {2, 2}, {1, 1}, {3, 3}, {3, 3});
  };
  auto unfolds = [](const Problem<2>& problem) { return detail::unfolds<hipgrad::half, 2>(problem); };
  for (Index c : {1, 2, 3, 4, 5, 7, 9, 13, 20}) EXPECT_TRUE(unfolds(Problem<2>::packed(stem(c, 64)))) << c;
  EXPECT_TRUE(unfolds(problem_of(stem(3, 64), ConvLayout::kNGCHW)));          // x NCHW, dy channels-last
  EXPECT_TRUE(unfolds(Problem<2>::packed(stem(3, 64), ConvLayout::kNGCHW)));  // dy NCHW: packed
  EXPECT_TRUE(unfolds(Problem<2>::packed(stem(3, 60))));                      // K not whole vectors: packed
  EXPECT_FALSE(detail::unfold_shape<hipgrad::half>(Problem<2>::packed(stem(3, 64))).dy_packed);
  EXPECT_TRUE(detail::unfold_shape<hipgrad::half>(Problem<2>::packed(stem(3, 60))).dy_packed);
  // Not: whole 16-byte channels (in NCHW too), G > 1, fp32 without TF32, forced, more than
  // kUnfoldMaxColumns columns or K.
  EXPECT_FALSE(unfolds(Problem<2>::packed(stem(8, 64))));
  EXPECT_FALSE(unfolds(Problem<2>::packed(stem(16, 64), ConvLayout::kNGCHW)));
  EXPECT_FALSE(unfolds(Problem<2>::packed(stem(3, 1032))));
  ConvParams<2> grouped = stem(3, 64);
  grouped.G = 2;
  EXPECT_FALSE(unfolds(Problem<2>::packed(grouped)));
  EXPECT_FALSE((detail::unfolds<float, 2>(Problem<2>::packed(stem(3, 64)))));
  Problem<2> tf32 = Problem<2>::packed(stem(3, 64));
  tf32.allow_tf32 = true;
  EXPECT_TRUE((detail::unfolds<float, 2>(tf32)));
  Problem<2> forced = Problem<2>::packed(stem(3, 64));
  forced.algorithm = Algorithm::kTmaBoxes;
  EXPECT_FALSE(unfolds(forced));
  EXPECT_FALSE(unfolds(Problem<2>::packed(stem(21, 64))));  // 49 taps × 21 = 1029 columns
}

TEST(ConvUnfold, ForcedRefusesWithAReason) {
  // What the route cannot run is refused before any plan of its GEMM: with the reason.
  auto refusal = [](ConvParams<2> p) {
    Problem<2> problem = Problem<2>::packed(p);
    problem.algorithm = Algorithm::kUnfold;
    using Op = hipgrad::conv::BackwardData<hipgrad::half, 2>;
    const auto args = hipgrad::test::far_apart_args<Op::Args, hipgrad::half>();
    const hipgrad::Status data = Op::can_implement(problem, args);
    const hipgrad::Status weight = hipgrad::conv::BackwardWeight<hipgrad::half, 2>::can_implement(
        problem, hipgrad::test::far_apart_args<hipgrad::conv::BackwardWeight<hipgrad::half, 2>::Args, hipgrad::half>());
    EXPECT_EQ(data.to_string(), weight.to_string());
    return data;
  };
  const ConvParams<2> stem = conv_params<2>(1, 2, 64, 3, {7, 7}, {32, 32}, {2, 2}, {1, 1}, {3, 3}, {3, 3});
  ConvParams<2> grouped = stem, wide = stem, many = stem;
  grouped.G = 2, wide.C = 21, many.K = 1032;
  for (const auto& [p, reason] :
       {std::pair{grouped, "one group"}, std::pair{wide, "1024 taps times C"}, std::pair{many, "1024 channels K"}}) {
    const hipgrad::Status s = refusal(p);
    EXPECT_EQ(s.code(), hipgrad::StatusCode::kNotSupported) << s.to_string();
    EXPECT_NE(s.message().find("algorithm unfold cannot run: "), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.to_string();
  }
}

/// The kernels' index maps on the host against the CPU reference, both ops, integer data.
template <int NDim>
void expect_unfolding_exact(const ConvParams<NDim>& p, ConvLayout x_layout, ConvLayout w_layout, std::uint64_t seed,
                            ConvLayout dy_layout = ConvLayout::kNHWGC) {
  Problem<NDim> problem = problem_of(p, x_layout, w_layout);
  problem.output_strides = hipgrad::conv::output_strides(p, dy_layout);
  SCOPED_TRACE(problem.to_string());
  ASSERT_TRUE((detail::unfolds<hipgrad::half, NDim>(problem)));
  const detail::UnfoldShape s = detail::unfold_shape<hipgrad::half>(problem);
  const auto rows = static_cast<std::size_t>(s.rows), q = static_cast<std::size_t>(s.row_columns);
  const auto k = static_cast<std::size_t>(s.k_columns);
  Tensor<double> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  Tensor<double> w(p.weight_lengths(), problem.weight_strides);
  hipgrad::host::fill(x, InitMethod::kIntegers, seed);
  hipgrad::host::fill(dy, InitMethod::kIntegers, seed + 1);
  hipgrad::host::fill(w, InitMethod::kIntegers, seed + 2);
  // dy's rows as the GEMMs read them: in place, or through the packing map (zeros past K).
  std::vector<double> dy_rows(rows * k, 0.0);
  const auto pack = detail::dy_rows_params<double>(problem, s);
  for (std::size_t i = 0; i < dy_rows.size(); ++i) {
    const std::size_t row = i / k, kk = i % k;
    if (s.dy_packed) {
      const std::int64_t source = detail::mapped_offset(pack, static_cast<std::int64_t>(i));
      dy_rows[i] = source < 0 ? 0.0 : dy.storage()[static_cast<std::size_t>(source)];
    } else {
      dy_rows[i] = dy.storage()[row * static_cast<std::size_t>(s.dy_row_stride) + kk];
    }
  }
  auto dy_at = [&](std::size_t row, std::size_t kk) { return dy_rows[row * k + kk]; };

  // Backward-weight: columns by unfold_source, dw's columns = dyᵀ · columns, dw by the gather map.
  const detail::UnfoldGeometry<NDim> u = detail::unfold_geometry(problem, s);
  std::vector<double> columns(rows * q);
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::int64_t source = detail::unfold_source(u, static_cast<std::int64_t>(i));
    ASSERT_LT(source, static_cast<std::int64_t>(x.storage().size()));
    columns[i] = source < 0 ? 0.0 : x.storage()[static_cast<std::size_t>(source)];
  }
  std::vector<double> dw_columns(k * q, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t kk = 0; kk < k; ++kk)
      for (std::size_t c = 0; c < q; ++c) dw_columns[kk * q + c] += dy_at(r, kk) * columns[r * q + c];
  Tensor<double> dw(p.weight_lengths(), problem.weight_strides), expected_dw(p.weight_lengths());
  std::vector<int> writes(dw.storage().size(), 0);
  const auto gather = detail::weight_columns_params<double, NDim>(problem, s, false);
  for (Index i = 0; i < gather.elements; ++i) {
    const std::int64_t target = detail::weight_columns_source(gather, i);
    if (target < 0) continue;
    dw.storage()[static_cast<std::size_t>(target)] = dw_columns[static_cast<std::size_t>(i)];
    ++writes[static_cast<std::size_t>(target)];
  }
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_weight(x, dy, expected_dw, p).is_ok());
  expected_dw.for_each_index([&](const std::vector<Index>& i) {
    ASSERT_EQ(writes[static_cast<std::size_t>(dw.offset(i))], 1);
    ASSERT_EQ(dw(i), expected_dw(i));
  });

  // Backward-data: w's columns by the spread map, Y = dy · w_columns, dx by fold_sum.
  const auto spread = detail::weight_columns_params<double, NDim>(problem, s, true);
  std::vector<double> w_columns(static_cast<std::size_t>(spread.elements));
  for (std::size_t i = 0; i < w_columns.size(); ++i) {
    const std::int64_t source = detail::weight_columns_source(spread, static_cast<std::int64_t>(i));
    w_columns[i] = source < 0 ? 0.0 : w.storage()[static_cast<std::size_t>(source)];
  }
  std::vector<float> y(rows * q, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < q; ++c) {
      double sum = 0.0;
      for (std::size_t kk = 0; kk < k; ++kk) sum += dy_at(r, kk) * w_columns[kk * q + c];
      y[r * q + c] = static_cast<float>(sum);
    }
  detail::FoldParams<double, NDim> fold = detail::fold_params<double>(problem, s);
  fold.y = y.data();
  Tensor<double> dx(p.input_lengths(), problem.input_strides), expected_dx(p.input_lengths());
  std::vector<int> dx_writes(dx.storage().size(), 0);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(dx.storage().size()); ++i) {
    std::int64_t offset = -1;
    const float sum = detail::fold_sum(fold, i, &offset);
    ASSERT_GE(offset, 0);
    dx.storage()[static_cast<std::size_t>(offset)] = sum;
    ++dx_writes[static_cast<std::size_t>(offset)];
  }
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_data(dy, w, expected_dx, p).is_ok());
  expected_dx.for_each_index([&](const std::vector<Index>& i) {
    ASSERT_EQ(dx_writes[static_cast<std::size_t>(dx.offset(i))], 1);
    ASSERT_EQ(dx(i), expected_dx(i));
  });
}

TEST(ConvUnfold, IndexMapsGiveTheReference) {
  std::uint64_t seed = 11000;
  for (Index c : {1, 2, 3, 4, 5, 6, 7, 9, 13, 20}) {
    expect_unfolding_exact<2>(conv_params<2>(1, 2, 8, c, {3, 3}, {9, 8}, {2, 1}, {1, 2}, {1, 2}, {2, 1}),
                              ConvLayout::kNHWGC, ConvLayout::kNHWGC, seed++);
  }
  // A stem (7×7, stride 2, pads 3), the patch embeddings (4×4 s4, 16×16 s16 on a small input).
  expect_unfolding_exact<2>(conv_params<2>(1, 1, 16, 3, {7, 7}, {17, 16}, {2, 2}, {1, 1}, {3, 3}, {3, 2}),
                            ConvLayout::kNHWGC, ConvLayout::kNGCHW, seed++);
  expect_unfolding_exact<2>(conv_params<2>(1, 2, 8, 3, {4, 4}, {12, 8}, {4, 4}, {1, 1}, {0, 0}, {0, 0}),
                            ConvLayout::kNGCHW, ConvLayout::kNHWGC, seed++);
  expect_unfolding_exact<2>(conv_params<2>(1, 1, 8, 3, {16, 16}, {32, 16}, {16, 16}, {1, 1}, {0, 0}, {0, 0}),
                            ConvLayout::kNHWGC, ConvLayout::kGNHWC, seed++);
  // dy packed: every tensor NCHW (PyTorch's default), K not whole vectors.
  expect_unfolding_exact<2>(conv_params<2>(1, 2, 16, 3, {3, 3}, {10, 9}, {2, 2}, {1, 1}, {1, 1}, {0, 1}),
                            ConvLayout::kNGCHW, ConvLayout::kNGCHW, seed++, ConvLayout::kNGCHW);
  expect_unfolding_exact<2>(conv_params<2>(1, 2, 12, 5, {3, 3}, {8, 9}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                            ConvLayout::kNHWGC, ConvLayout::kNHWGC, seed++);
  // x NCHW; 1-D with stride 3, dilation 2; 3-D stems.
  expect_unfolding_exact<2>(conv_params<2>(1, 2, 8, 12, {3, 3}, {7, 6}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                            ConvLayout::kNGCHW, ConvLayout::kNHWGC, seed++);
  expect_unfolding_exact<1>(conv_params<1>(1, 3, 16, 5, {4}, {29}, {3}, {2}, {4}, {1}), ConvLayout::kNHWGC,
                            ConvLayout::kNGCHW, seed++);
  expect_unfolding_exact<1>(conv_params<1>(1, 1, 8, 1, {5}, {3}, {1}, {1}, {3}, {3}), ConvLayout::kNGCHW,
                            ConvLayout::kNHWGC, seed++);
  expect_unfolding_exact<3>(
      conv_params<3>(1, 1, 8, 3, {1, 3, 3}, {3, 9, 8}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}), ConvLayout::kNHWGC,
      ConvLayout::kNHWGC, seed++);
  expect_unfolding_exact<3>(
      conv_params<3>(1, 2, 16, 4, {3, 2, 3}, {4, 5, 6}, {2, 1, 2}, {1, 2, 1}, {1, 0, 2}, {0, 1, 1}), ConvLayout::kNGCHW,
      ConvLayout::kGNHWC, seed++);
}

template <typename T>
class ConvUnfoldTest : public ::testing::Test {};
using UnfoldTypes = ::testing::Types<hipgrad::half, hipgrad::bfloat16>;
TYPED_TEST_SUITE(ConvUnfoldTest, UnfoldTypes);

/// Both ops under kAuto on `problem`, integer and decimal data: both must unfold.
template <typename T, int NDim>
void check_unfolded(const Problem<NDim>& problem, std::uint64_t seed) {
  hipgrad::test::check_auto_route<T, NDim>(problem, seed, "_unfolded");
}

TYPED_TEST(ConvUnfoldTest, AutoUnfoldsAndMatchesTheReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  std::uint64_t seed = 12000;
  // A ResNet stem, small: 7×7, stride 2, 3 → 64 channels.
  check_unfolded<T, 2>(
      problem_of(conv_params<2>(1, 2, 64, 3, {7, 7}, {30, 29}, {2, 2}, {1, 1}, {3, 3}, {3, 3}), ConvLayout::kNHWGC),
      seed += 10);
  // The same in PyTorch's default NCHW (dy packed), and K not whole vectors (dy packed).
  check_unfolded<T, 2>(Problem<2>::packed(conv_params<2>(1, 2, 64, 3, {7, 7}, {30, 29}, {2, 2}, {1, 1}, {3, 3}, {3, 3}),
                                          ConvLayout::kNGCHW),
                       seed += 10);
  check_unfolded<T, 2>(
      problem_of(conv_params<2>(1, 2, 60, 3, {3, 3}, {17, 16}, {2, 2}, {1, 1}, {1, 1}, {1, 1}), ConvLayout::kNHWGC),
      seed += 10);
  // Odd channel counts, x NCHW, weights in other strides, 1-D and 3-D; K above the direct
  // kernels' kAutoChannels.
  for (Index c : {1, 5, 13, 20}) {
    check_unfolded<T, 2>(problem_of(conv_params<2>(1, 2, 48, c, {3, 3}, {11, 10}, {2, 1}, {1, 2}, {1, 2}, {2, 1}),
                                    ConvLayout::kNHWGC, ConvLayout::kNGCHW),
                         seed += 10);
  }
  check_unfolded<T, 2>(
      problem_of(conv_params<2>(1, 2, 96, 4, {4, 4}, {16, 12}, {4, 4}, {1, 1}, {0, 0}, {0, 0}), ConvLayout::kNGCHW),
      seed += 10);
  check_unfolded<T, 1>(problem_of(conv_params<1>(1, 3, 40, 5, {4}, {61}, {3}, {2}, {4}, {1}), ConvLayout::kNHWGC),
                       seed += 10);
  check_unfolded<T, 3>(
      problem_of(conv_params<3>(1, 2, 48, 3, {1, 3, 3}, {3, 14, 13}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}),
                 ConvLayout::kNHWGC, ConvLayout::kGNHWC),
      seed += 10);
}

}  // namespace
