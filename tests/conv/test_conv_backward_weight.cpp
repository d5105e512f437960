/// @file test_conv_backward_weight.cpp
/// @brief conv::BackwardWeight on the GPU against the CPU reference: the listed 1-D, 2-D and 3-D
///        problems of the conv tests (G 1, 2, 3, 32 and depthwise; strides, dilations, asymmetric
///        pads, output length 1, odd channels) in NHWGC, GNHWC, NGCHW and padded strides; fp32
///        exact and TF32, fp16, bf16; integer data compared exactly, decimal data within the
///        tolerance of fp32 sums; dw NaN-poisoned first, its gaps checked untouched; every forced
///        path that runs a problem; split-K 1, 2, 7 and auto, auto bitwise repeatable; a bf16
///        reduction of 2^20 terms whose splits' sums a bf16 partial could not hold; an x of more
///        than 2^31 elements. CPU-only: the refusals of can_implement, each with a reason.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/poison.hpp"
#include "conv/conv_test_checks.hpp"
#include "conv/conv_test_problems.hpp"
#include "conv/conv_test_runs.hpp"
#include "conv_instances.hpp"
#include "gemm/gemm_test_kinds.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::conv::Algorithm;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::test::with_kind;
using namespace hipgrad::host;

using hipgrad::test::check_backward_weight;
using hipgrad::test::run_backward_weight;

template <typename T, int NDim>
std::vector<Algorithm> runnable_algorithms(const Problem<NDim>& problem) {
  return hipgrad::test::runnable_algorithms<hipgrad::conv::BackwardWeight<T, NDim>>(problem);
}

template <typename T, int NDim>
void check_every_path(const Problem<NDim>& problem, std::uint64_t seed) {
  hipgrad::test::check_every_path<hipgrad::conv::BackwardWeight<T, NDim>>(
      problem, seed,
      [](const Problem<NDim>& p, InitMethod init, std::uint64_t s) { check_backward_weight<T, NDim>(p, init, s); });
}

template <typename K>
class ConvBackwardWeightTest : public ::testing::Test {};
TYPED_TEST_SUITE(ConvBackwardWeightTest, gemm_test::Kinds);

template <typename K, int NDim>
void check_listed(const std::vector<ConvParams<NDim>>& list, std::uint64_t seed) {
  for (const ConvParams<NDim>& p : list) {
    for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW}) {
      check_every_path<typename K::Type, NDim>(with_kind<K>(Problem<NDim>::packed(p, layout)), seed += 8);
      if (::testing::Test::HasFailure()) return;
    }
    check_every_path<typename K::Type, NDim>(with_kind<K>(hipgrad::test::padded_conv_problem(p, ConvLayout::kNHWGC)),
                                             seed += 8);
    if (::testing::Test::HasFailure()) return;
  }
}

TYPED_TEST(ConvBackwardWeightTest, ListedProblems1D) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  check_listed<TypeParam, 1>(hipgrad::test::listed_conv_problems_1d(), 10);
}
TYPED_TEST(ConvBackwardWeightTest, ListedProblems2D) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  check_listed<TypeParam, 2>(hipgrad::test::listed_conv_problems_2d(), 100);
}
TYPED_TEST(ConvBackwardWeightTest, ListedProblems3D) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  check_listed<TypeParam, 3>(hipgrad::test::listed_conv_problems_3d(), 200);
}

/// Split-K 1, 2, 7 and the op's choice give the reference's dw (exactly on integer data, within
/// the tolerance on decimal data) on every path, and the op's choice gives the same bits on two
/// runs.
TYPED_TEST(ConvBackwardWeightTest, SplitsAgreeAndAutoRepeatsBitwise) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  // A long reduction (N·O = 4·29·31) over few output tiles, so that the op splits it; K 24, K 72
  // (on the box path, two 64-row panels of dy, the second partial) and K 136 (TF32's box path
  // takes 256-row blocks above K 128, 128-row ones up to it). fp16/bf16 boxes take 192-wide
  // blocks for these 9 × 64 columns; a 2 × 2 filter of C 64 (256 columns) takes 256-wide ones.
  const ConvParams<2> p = hipgrad::test::conv_params<2>(2, 4, 24, 16, {3, 3}, {57, 61}, {2, 2}, {1, 1}, {1, 1}, {1, 1});
  ConvParams<2> wide = p, wider = p, square = p;
  wide.K = 72;
  wider.K = 136;
  square.C = 64;
  square.filter = {2, 2};
  for (const ConvParams<2>& params : {p, wide, wider, square}) {
    for (Algorithm algorithm : runnable_algorithms<T, 2>(with_kind<TypeParam>(Problem<2>::packed(params)))) {
      for (int split : {1, 2, 7, 0}) {
        Problem<2> problem = with_kind<TypeParam>(Problem<2>::packed(params));
        problem.split_k = split;
        problem.algorithm = algorithm;
        for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
          check_backward_weight<T, 2>(problem, init, 300 + static_cast<std::uint64_t>(split));
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
  const Problem<2> problem = with_kind<TypeParam>(Problem<2>::packed(p));
  Tensor<T> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  fill(x, InitMethod::kDecimals, 7);
  fill(dy, InitMethod::kDecimals, 8);
  std::string name;
  const Tensor<T> first = run_backward_weight<T, 2>(problem, x, dy, &name);
  const Tensor<T> second = run_backward_weight<T, 2>(problem, x, dy, &name);
  EXPECT_EQ(std::memcmp(first.storage().data(), second.storage().data(), first.storage().size() * sizeof(T)), 0)
      << name;
}

/// bf16, a reduction of 2^20 terms (1-D, N 2, 2^19 positions): x is 1, dy is 1 in image 0 but at
/// position 0 (0) and −1 in image 1 but at three positions (−0.5), so dw = 0.5 everywhere while
/// a split's sum reaches 2^19 − 1. Each split's sum is a multiple of 0.5 below 2^20, which fp32
/// holds exactly; a bf16 partial (8 significant bits) rounds 2^19 − 1 to 2^19 and misses 0.5.
TEST(ConvBackwardWeightLarge, Bf16LongReductionKeepsFp32Sums) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = hipgrad::bfloat16;
  const ConvParams<1> p = hipgrad::test::conv_params<1>(1, 2, 8, 8, {1}, {Index{1} << 19}, {1}, {1}, {0}, {0});
  for (int split : {2, 0})
    for (Algorithm algorithm : {Algorithm::kAuto, Algorithm::kGather}) {
      Problem<1> problem = Problem<1>::packed(p);
      problem.split_k = split;
      problem.algorithm = algorithm;
      Tensor<T> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
      for (T& v : x.storage()) v = hipgrad::type_convert<T>(1.0f);
      dy.for_each_index([&](const std::vector<Index>& i) {
        const Index n = i[1], o = i[3];
        float v = n == 0 ? 1.0f : -1.0f;
        if (n == 0 && o == 0) v = 0.0f;
        if (n == 1 && (o == 1 || o == 5 || o == 9)) v = -0.5f;
        dy(i) = hipgrad::type_convert<T>(v);
      });
      std::string name;
      const Tensor<T> dw = run_backward_weight<T, 1>(problem, x, dy, &name);
      SCOPED_TRACE(name);
      for (const T& v : dw.storage()) {
        ASSERT_EQ(hipgrad::type_convert<float>(v), 0.5f) << "split_k " << split;
      }
    }
}

/// An x of more than 2^31 elements (fp16, 1-D, C 4096 × (2^19 + 3) positions): 64-bit offsets in
/// the loaders. Integers in {−1, 0, 1}: every sum exact in fp32; dw poisoned first must hold no
/// NaN; sampled elements equal the sums computed here.
TEST(ConvBackwardWeightLarge, XOfMoreThan2To31Elements) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = hipgrad::half;
  const ConvParams<1> p = hipgrad::test::conv_params<1>(1, 1, 8, 4096, {1}, {(Index{1} << 19) + 3}, {1}, {1}, {0}, {0});
  Problem<1> problem = Problem<1>::packed(p);
  Tensor<T> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  ASSERT_GT(static_cast<Index>(x.storage().size()), Index{1} << 31);
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<int> pick(-1, 1);
  for (T& v : x.storage()) v = hipgrad::type_convert<T>(static_cast<float>(pick(rng)));
  for (T& v : dy.storage()) v = hipgrad::type_convert<T>(static_cast<float>(pick(rng)));
  for (Algorithm algorithm : {Algorithm::kAuto, Algorithm::kGather}) {
    problem.algorithm = algorithm;
    std::string name;
    const Tensor<T> dw = run_backward_weight<T, 1>(problem, x, dy, &name);
    SCOPED_TRACE(name);
    for (const T& v : dw.storage()) ASSERT_FALSE(std::isnan(hipgrad::type_convert<float>(v)));
    std::uniform_int_distribution<Index> pick_c(0, p.C - 1), pick_k(0, p.K - 1);
    for (int sample = 0; sample < 24; ++sample) {
      const Index k = sample == 0 ? 0 : pick_k(rng), c = sample == 0 ? p.C - 1 : pick_c(rng);
      double sum = 0.0;
      for (Index o = 0; o < p.input[0]; ++o) {
        sum += static_cast<double>(hipgrad::type_convert<float>(x({0, 0, c, o}))) *
               static_cast<double>(hipgrad::type_convert<float>(dy({0, 0, k, o})));
      }
      EXPECT_EQ(hipgrad::type_convert<float>(dw({0, k, c, 0})),
                hipgrad::type_convert<float>(hipgrad::type_convert<T>(sum)))
          << "k " << k << " c " << c;
    }
  }
}

TEST(ConvBackwardWeightProblem, CanImplementRejectsWithAReason) {
  using T = hipgrad::half;
  using Op = hipgrad::conv::BackwardWeight<T, 2>;
  const ConvParams<2> good = hipgrad::test::conv_params<2>(2, 2, 8, 8, {3, 3}, {9, 9}, {2, 2}, {1, 1}, {1, 1}, {1, 1});
  std::vector<T> storage(1 << 16);
  const Problem<2> problem = Problem<2>::packed(good);
  const Index dw_elements = Problem<2>::element_space(good.weight_lengths(), problem.weight_strides);
  const typename Op::Args ok{storage.data() + 20000, storage.data() + 40000, storage.data()};
  auto refused = [&](const Problem<2>& pr, const typename Op::Args& args, hipgrad::StatusCode code, const char* what) {
    const Status s = Op::can_implement(pr, args);
    EXPECT_EQ(s.code(), code) << what << ": " << s.to_string();
    EXPECT_FALSE(s.message().empty()) << what;
  };
  using hipgrad::StatusCode;
  ASSERT_LT(dw_elements, 20000);
  Problem<2> zero = problem;
  zero.params.K = 0;
  refused(zero, ok, StatusCode::kInvalidArgument, "K = 0");
  Problem<2> short_strides = problem;
  short_strides.output_strides.resize(2);
  refused(short_strides, ok, StatusCode::kInvalidArgument, "dy strides of the wrong rank");
  EXPECT_EQ(Op::splits_of(short_strides), 0);  // no plan of a problem that does not validate
  Problem<2> negative_pad = problem;
  negative_pad.params.right_pads[1] = -1;
  refused(negative_pad, ok, StatusCode::kInvalidArgument, "negative pad");
  refused(problem, {ok.x, nullptr, ok.dw}, StatusCode::kInvalidArgument, "null dy");
  refused(problem, {ok.x, ok.dy, storage.data() + 19990}, StatusCode::kInvalidArgument, "dw overlaps x");
  refused(problem, {ok.x, ok.dy, storage.data() + 39990}, StatusCode::kInvalidArgument, "dw overlaps dy");
  // One byte off an fp16 element: refused by name (on the GPU a misaligned address faults).
  T* odd = reinterpret_cast<T*>(reinterpret_cast<char*>(storage.data()) + 1);
  refused(problem, {ok.x, ok.dy, odd}, StatusCode::kInvalidArgument, "dw one byte off");
  EXPECT_NE(Op::can_implement(problem, {ok.x, ok.dy, odd}).message().find("dw is not aligned"), std::string::npos);
  Problem<2> aliasing = problem;
  aliasing.weight_strides[1] = 0;  // every k of dw at one place
  refused(aliasing, ok, StatusCode::kInvalidArgument, "dw strides alias");
  Problem<2> tf32 = problem;
  tf32.allow_tf32 = true;
  refused(tf32, ok, StatusCode::kInvalidArgument, "TF32 for fp16 data");
  Problem<2> negative_split = problem;
  negative_split.split_k = -1;
  refused(negative_split, ok, StatusCode::kInvalidArgument, "negative split");
  Problem<2> boxes =
      Problem<2>::packed(hipgrad::test::conv_params<2>(2, 2, 8, 8, {3, 3}, {9, 9}, {9, 9}, {1, 1}, {1, 1}, {1, 1}));
  boxes.algorithm = Algorithm::kTmaBoxes;
  refused(boxes, ok, StatusCode::kNotSupported, "tma_boxes with stride 9");
  Problem<2> nchw_boxes = Problem<2>::packed(good, ConvLayout::kNGCHW);
  nchw_boxes.algorithm = Algorithm::kTmaBoxes;
  refused(nchw_boxes, ok, StatusCode::kNotSupported, "tma_boxes with channels not contiguous");
  Problem<2> many_splits = problem;
  many_splits.split_k = 1025;
  refused(many_splits, ok, StatusCode::kNotSupported, "split_k above 1024");
  EXPECT_EQ(Op::workspace_size(many_splits), 0u);
  // 2^22 groups times 7 splits: more sub-problems than an op's host table holds (far-apart fake
  // pointers: can_implement never dereferences them).
  Problem<2> many_groups = Problem<2>::packed(
      hipgrad::test::conv_params<2>(Index{1} << 22, 1, 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}));
  many_groups.split_k = 7;
  many_groups.algorithm = Algorithm::kSimt;  // the GEMM paths' table (kAuto takes the direct kernels)
  const typename Op::Args far{reinterpret_cast<const T*>(Index{1} << 40), reinterpret_cast<const T*>(Index{2} << 40),
                              reinterpret_cast<T*>(Index{3} << 40)};
  refused(many_groups, far, StatusCode::kNotSupported, "2^22 groups times 7 splits");
  EXPECT_EQ(Op::workspace_size(zero), 0u);
  // A workspace smaller than workspace_size is an error, never a wrong answer; several splits
  // need room for their sums. One group, so that kAuto packs none and workspace_size is what the
  // call takes (where it may pack, it is the larger of two choices).
  ConvParams<2> one_group = good;
  one_group.G = 1;
  Problem<2> split = Problem<2>::packed(one_group);
  split.split_k = 3;
  EXPECT_GT(Op::workspace_size(split), Op::workspace_size(Problem<2>::packed(one_group)));
  EXPECT_EQ(Op::splits_of(split), 3);
  std::vector<unsigned char> small(Op::workspace_size(split) - 1);
  const Status s = Op::run(split, ok, small.data(), small.size(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
}

/// Calls on one problem, repeated as a training loop repeats them, make the box path's geometry
/// (its box-shape search) once.
TEST(ConvBackwardWeightProblem, RepeatedCallsSearchTheBoxesOnce) {
  using Op = hipgrad::conv::BackwardWeight<hipgrad::half, 2>;
  const Problem<2> problem =
      Problem<2>::packed(hipgrad::test::conv_params<2>(3, 5, 24, 40, {3, 3}, {29, 21}, {2, 2}, {1, 1}, {1, 1}, {1, 1}));
  const auto args = hipgrad::test::far_apart_args<Op::Args, hipgrad::half>();
  const auto counts = hipgrad::test::plan_counts_over_five_rounds([&] {
    EXPECT_TRUE(Op::can_implement(problem, args).is_ok());
    EXPECT_GT(Op::workspace_size(problem), 0u);
    EXPECT_GT(Op::splits_of(problem, args), 0);
    EXPECT_FALSE(Op::name(problem, args).empty());
  });
  EXPECT_EQ(counts.box_searches, 1);
}

}  // namespace
