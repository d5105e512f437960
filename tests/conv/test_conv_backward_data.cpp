/// @file test_conv_backward_data.cpp
/// @brief conv::BackwardData on the GPU against the CPU reference: 1-D, 2-D and 3-D; G 1, 2, 3,
///        32 and depthwise; strides 1–3, unequal across dimensions; dilations 1–3; asymmetric
///        pads, pads wider than the filter's reach; output length 1; filters wider than the
///        unpadded input; C and K not multiples of 8; NHWGC, GNHWC, NGCHW and padded strides;
///        fp32 exact and TF32, fp16, bf16; integer data compared exactly, decimal data within the
///        tolerance of fp32 sums; dx NaN-poisoned first, its padding checked untouched; seeded
///        random problems; every forced path that runs a problem; runs repeated bitwise. CPU-only:
///        the refusals of can_implement, each with a reason.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/poison.hpp"
#include "gemm/gemm_test_kinds.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "conv/conv_test_checks.hpp"
#include "conv/conv_test_problems.hpp"
#include "conv/conv_test_runs.hpp"
#include "conv_instances.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::conv::Algorithm;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::test::with_kind;
using namespace hipgrad::host;

using hipgrad::test::check_backward_data;

template <typename T, int NDim>
void check_every_path(const Problem<NDim>& problem, std::uint64_t seed) {
  hipgrad::test::check_every_path<hipgrad::conv::BackwardData<T, NDim>>(
      problem, seed,
      [](const Problem<NDim>& p, InitMethod init, std::uint64_t s) { check_backward_data<T, NDim>(p, init, s); });
}

template <typename K>
class ConvBackwardDataTest : public ::testing::Test {};
TYPED_TEST_SUITE(ConvBackwardDataTest, gemm_test::Kinds);

TYPED_TEST(ConvBackwardDataTest, ListedProblems1D) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  const std::vector<ConvParams<1>> list = hipgrad::test::listed_conv_problems_1d();
  std::uint64_t seed = 10;
  for (const ConvParams<1>& p : list) {
    for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW}) {
      check_every_path<T, 1>(with_kind<TypeParam>(Problem<1>::packed(p, layout)), seed += 8);
      if (::testing::Test::HasFailure()) return;
    }
    check_every_path<T, 1>(with_kind<TypeParam>(hipgrad::test::padded_conv_problem(p, ConvLayout::kNHWGC)), seed += 8);
    if (::testing::Test::HasFailure()) return;
  }
}

TYPED_TEST(ConvBackwardDataTest, ListedProblems2D) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  const std::vector<ConvParams<2>> list = hipgrad::test::listed_conv_problems_2d();
  std::uint64_t seed = 100;
  for (const ConvParams<2>& p : list) {
    for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW}) {
      check_every_path<T, 2>(with_kind<TypeParam>(Problem<2>::packed(p, layout)), seed += 8);
      if (::testing::Test::HasFailure()) return;
    }
    check_every_path<T, 2>(with_kind<TypeParam>(hipgrad::test::padded_conv_problem(p, ConvLayout::kGNHWC)), seed += 8);
    if (::testing::Test::HasFailure()) return;
  }
}

TYPED_TEST(ConvBackwardDataTest, ListedProblems3D) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  const std::vector<ConvParams<3>> list = hipgrad::test::listed_conv_problems_3d();
  std::uint64_t seed = 200;
  for (const ConvParams<3>& p : list) {
    for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW}) {
      check_every_path<T, 3>(with_kind<TypeParam>(Problem<3>::packed(p, layout)), seed += 8);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

/// Seeded random problems of every rank and layout, on kAuto.
TYPED_TEST(ConvBackwardDataTest, SeededRandomProblems) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  std::mt19937_64 rng(20261127);
  auto pick = [&rng](int lo, int hi) { return static_cast<Index>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const ConvLayout layouts[] = {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW};
  for (int trial = 0; trial < 24; ++trial) {
    ConvParams<2> p;
    p.G = pick(1, 3), p.N = pick(1, 3), p.K = pick(1, 40), p.C = pick(1, 40);
    for (int d = 0; d < 2; ++d) {
      p.filter[d] = pick(1, 4), p.strides[d] = pick(1, 3), p.dilations[d] = pick(1, 3);
      p.left_pads[d] = pick(0, 3), p.right_pads[d] = pick(0, 3), p.input[d] = pick(1, 20);
      const Index reach = p.dilations[d] * (p.filter[d] - 1) + 1;
      if (p.input[d] + p.left_pads[d] + p.right_pads[d] < reach) p.right_pads[d] = reach - p.input[d] - p.left_pads[d];
    }
    const Problem<2> problem = with_kind<TypeParam>(Problem<2>::packed(p, layouts[trial % 3]));
    check_backward_data<T, 2>(problem, trial % 2 ? InitMethod::kDecimals : InitMethod::kIntegers, 1000 + trial);
    if (::testing::Test::HasFailure()) return;
  }
}

/// Two runs of one problem give the same bits.
TYPED_TEST(ConvBackwardDataTest, RunsAreBitwiseRepeatable) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  using Op = hipgrad::conv::BackwardData<T, 2>;
  const Problem<2> problem = with_kind<TypeParam>(Problem<2>::packed(
      hipgrad::test::conv_params<2>(2, 2, 24, 16, {3, 3}, {13, 13}, {2, 2}, {1, 1}, {1, 1}, {1, 1})));
  const ConvParams<2>& p = problem.params;
  Tensor<T> dy(p.output_lengths(), problem.output_strides), w(p.weight_lengths(), problem.weight_strides);
  fill(dy, InitMethod::kDecimals, 5);
  fill(w, InitMethod::kDecimals, 6);
  DeviceBuffer<T> ddy, dw, first, second;
  DeviceBuffer<unsigned char> workspace;
  ASSERT_TRUE(ddy.allocate(dy.storage().size()).is_ok() && ddy.copy_from(dy).is_ok());
  ASSERT_TRUE(dw.allocate(w.storage().size()).is_ok() && dw.copy_from(w).is_ok());
  const std::size_t dx_elements =
      static_cast<std::size_t>(Problem<2>::element_space(p.input_lengths(), problem.input_strides));
  ASSERT_TRUE(first.allocate(dx_elements).is_ok() && second.allocate(dx_elements).is_ok());
  ASSERT_TRUE(workspace.allocate(Op::workspace_size(problem)).is_ok());
  for (DeviceBuffer<T>* dx : {&first, &second}) {
    const Status s =
        Op::run(problem, {ddy.data(), dw.data(), dx->data()}, workspace.data(), workspace.bytes(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  std::vector<T> a(dx_elements), b(dx_elements);
  ASSERT_TRUE(first.copy_to_host(a.data(), a.size()).is_ok() && second.copy_to_host(b.data(), b.size()).is_ok());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0);
}

/// The gather path of a strided problem: one sub-problem per group and stride phase.
struct GatherCall {
  using T = hipgrad::half;
  using Op = hipgrad::conv::BackwardData<T, 2>;
  Problem<2> problem;
  DeviceBuffer<T> dy, w, dx;
  DeviceBuffer<unsigned char> workspace;

  explicit GatherCall(Index groups)
      : problem(Problem<2>::packed(
            hipgrad::test::conv_params<2>(groups, 2, 24, 16, {3, 3}, {13, 13}, {2, 2}, {1, 1}, {1, 1}, {1, 1}))) {
    problem.algorithm = Algorithm::kGather;
  }

  /// Allocates the tensors (dy and w with seeded integers, dx poisoned); why the path cannot run
  /// here where it cannot.
  std::optional<std::string> prepare() {
    const ConvParams<2>& p = problem.params;
    const auto elements = [](const auto& lengths, const auto& strides) {
      return static_cast<std::size_t>(Problem<2>::element_space(lengths, strides));
    };
    const auto integers = [](std::size_t n, unsigned seed) {
      std::mt19937 random(seed);
      std::vector<T> values(n);
      for (T& v : values) v = T(static_cast<float>(static_cast<int>(random() % 5) - 2));
      return values;
    };
    const std::vector<T> dy_host = integers(elements(p.output_lengths(), problem.output_strides), 1);
    const std::vector<T> w_host = integers(elements(p.weight_lengths(), problem.weight_strides), 2);
    EXPECT_TRUE(dy.allocate(dy_host.size()).is_ok() && dy.copy_from_host(dy_host.data(), dy_host.size()).is_ok());
    EXPECT_TRUE(w.allocate(w_host.size()).is_ok() && w.copy_from_host(w_host.data(), w_host.size()).is_ok());
    EXPECT_TRUE(dx.allocate(elements(p.input_lengths(), problem.input_strides)).is_ok() && dx.fill_bytes(0xFF).is_ok());
    EXPECT_TRUE(workspace.allocate(Op::workspace_size(problem)).is_ok());
    const Status check = Op::can_implement(problem, args());
    if (!check.is_ok()) return "the gather path does not run here: " + check.to_string();
    return std::nullopt;
  }

  Op::Args args() { return {dy.data(), w.data(), dx.data()}; }
  Status run(hipStream_t stream) { return Op::run(problem, args(), workspace.data(), workspace.bytes(), stream); }

  /// The call captured on `stream` into `*graph` (null where the capture failed): run's Status.
  Status run_captured(hipStream_t stream, hipGraph_t* graph) {
    *graph = nullptr;
    EXPECT_EQ(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal), hipSuccess);
    const Status s = run(stream);
    EXPECT_EQ(hipStreamEndCapture(stream, graph), hipSuccess);
    return s;
  }

  std::vector<T> result() const {
    std::vector<T> host(dx.size());
    EXPECT_TRUE(dx.copy_to_host(host.data(), host.size()).is_ok());
    return host;
  }
};

/// A sub-problem table small enough for the kernel's parameters (4 stride phases): the call is
/// captured into a graph whose replay, on a poisoned dx, gives the bits of a plain run.
TEST(ConvBackwardDataCapture, ParameterTablesRunInAGraph) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  GatherCall call(1);
  if (const auto why = call.prepare()) GTEST_SKIP() << *why;
  ASSERT_TRUE(call.run(nullptr).is_ok());
  const std::vector<GatherCall::T> plain = call.result();
  ASSERT_TRUE(call.dx.fill_bytes(0xFF).is_ok());
  hipStream_t stream = nullptr;
  ASSERT_EQ(hipStreamCreate(&stream), hipSuccess);
  hipGraph_t graph = nullptr;
  const Status captured = call.run_captured(stream, &graph);
  ASSERT_TRUE(captured.is_ok() && graph != nullptr) << captured.to_string();
  hipGraphExec_t exec = nullptr;
  ASSERT_EQ(hipGraphInstantiateWithFlags(&exec, graph, 0), hipSuccess);
  ASSERT_EQ(hipGraphLaunch(exec, stream), hipSuccess);
  ASSERT_EQ(hipStreamSynchronize(stream), hipSuccess);
  const std::vector<GatherCall::T> replayed = call.result();
  ASSERT_EQ(replayed.size(), plain.size());
  EXPECT_EQ(std::memcmp(replayed.data(), plain.data(), plain.size() * sizeof(GatherCall::T)), 0);
  EXPECT_EQ(hipGraphExecDestroy(exec), hipSuccess);
  EXPECT_EQ(hipGraphDestroy(graph), hipSuccess);
  EXPECT_EQ(hipStreamDestroy(stream), hipSuccess);
}

/// A table too large for the parameters (16 groups × 4 phases) is copied from host memory, which
/// a graph would read after the call freed it: refused under a capture, run outside one.
TEST(ConvBackwardDataCapture, CopiedTablesRefuseAGraphCapture) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  GatherCall call(16);
  if (const auto why = call.prepare()) GTEST_SKIP() << *why;
  hipStream_t stream = nullptr;
  ASSERT_EQ(hipStreamCreate(&stream), hipSuccess);
  hipGraph_t graph = nullptr;
  const Status s = call.run_captured(stream, &graph);
  if (graph != nullptr) EXPECT_EQ(hipGraphDestroy(graph), hipSuccess);
  EXPECT_EQ(hipStreamDestroy(stream), hipSuccess);
  EXPECT_EQ(s.code(), hipgrad::StatusCode::kNotSupported) << s.to_string();
  EXPECT_NE(s.message().find("captured into a graph"), std::string::npos) << s.to_string();
  // Outside a capture the same call runs.
  const Status outside = call.run(nullptr);
  EXPECT_TRUE(outside.is_ok()) << outside.to_string();
  EXPECT_EQ(hipDeviceSynchronize(), hipSuccess);
}

/// A dx of more than 2^31 elements (fp16, 1-D, 8 × (2^28 + 5) elements), on kAuto's path and the
/// direct kernels: 64-bit offsets in the loaders and the epilogue. dx is poisoned first and must hold no NaN afterwards; sampled
/// elements (the first, the last, seeded random ones) are compared with sums computed here.
TEST(ConvBackwardDataLarge, DxOfMoreThan2To31Elements) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = hipgrad::half;
  using Op = hipgrad::conv::BackwardData<T, 1>;
  const ConvParams<1> p = hipgrad::test::conv_params<1>(1, 1, 8, 8, {3}, {(Index{1} << 28) + 5}, {2}, {1}, {1}, {1});
  for (Algorithm algorithm : {Algorithm::kAuto, Algorithm::kDirect}) {
    SCOPED_TRACE(hipgrad::conv::algorithm_name(algorithm));
    Problem<1> problem = Problem<1>::packed(p);
    problem.algorithm = algorithm;
    const Index dx_elements = Problem<1>::element_space(p.input_lengths(), problem.input_strides);
    const Index dy_elements = Problem<1>::element_space(p.output_lengths(), problem.output_strides);
    ASSERT_GT(dx_elements, Index{1} << 31);
    // Small integers, exact in fp16 and in every sum here: dy from its offset, w from its index.
    auto dy_value = [](Index offset) { return static_cast<double>(offset % 7 - 3); };
    std::vector<T> dy(static_cast<std::size_t>(dy_elements));
    for (Index e = 0; e < dy_elements; ++e) dy[static_cast<std::size_t>(e)] = hipgrad::type_convert<T>(dy_value(e));
    Tensor<T> w(p.weight_lengths(), problem.weight_strides);
    fill(w, InitMethod::kIntegers, 3);
    DeviceBuffer<T> ddy, dw, ddx;
    DeviceBuffer<unsigned char> workspace;
    ASSERT_TRUE(ddy.allocate(dy.size()).is_ok() && ddy.copy_from_host(dy.data(), dy.size()).is_ok());
    ASSERT_TRUE(dw.allocate(w.storage().size()).is_ok() && dw.copy_from(w).is_ok());
    ASSERT_TRUE(ddx.allocate(static_cast<std::size_t>(dx_elements)).is_ok() && ddx.fill_bytes(0xff).is_ok());
    ASSERT_TRUE(workspace.allocate(Op::workspace_size(problem)).is_ok());
    const Status s =
        Op::run(problem, {ddy.data(), dw.data(), ddx.data()}, workspace.data(), workspace.bytes(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    std::vector<T> dx(static_cast<std::size_t>(dx_elements));
    ASSERT_TRUE(ddx.copy_to_host(dx.data(), dx.size()).is_ok());
    Index unwritten = 0;
    for (const T& v : dx) unwritten += std::isnan(hipgrad::type_convert<float>(v)) ? 1 : 0;
    EXPECT_EQ(unwritten, 0) << "dx elements left unwritten (NaN)";
    // dx[c, x] = Σ_k Σ_f dy[k, o] w[k, c, f] with x + 1 − f = 2o, 0 ≤ o < O (NWC: dy[o·K + k]).
    const Index out = p.output_spatial()[0];
    std::mt19937_64 rng(7);
    std::vector<Index> xs = {0, 1, 2, p.input[0] - 2, p.input[0] - 1};
    for (int i = 0; i < 64; ++i) xs.push_back(std::uniform_int_distribution<Index>(0, p.input[0] - 1)(rng));
    for (Index x : xs) {
      for (Index c = 0; c < p.C; ++c) {
        double sum = 0;
        for (Index f = 0; f < p.filter[0]; ++f) {
          const Index t = x + 1 - f;
          if (t < 0 || t % 2 != 0 || t / 2 >= out) continue;
          for (Index k = 0; k < p.K; ++k)
            sum += dy_value((t / 2) * p.K + k) * hipgrad::type_convert<double>(w.at(0, k, c, f));
        }
        const double got = hipgrad::type_convert<double>(dx[static_cast<std::size_t>(x * p.C + c)]);
        ASSERT_EQ(got, hipgrad::type_convert<double>(hipgrad::type_convert<T>(sum))) << "x " << x << " c " << c;
      }
    }
  }
}

/// What can_implement refuses, each with a reason (no GPU needed).
TEST(ConvBackwardDataProblem, CanImplementRejectsWithAReason) {
  using T = hipgrad::half;
  using Op = hipgrad::conv::BackwardData<T, 2>;
  const ConvParams<2> good = hipgrad::test::conv_params<2>(2, 2, 8, 8, {3, 3}, {9, 9}, {2, 2}, {1, 1}, {1, 1}, {1, 1});
  std::vector<T> storage(1 << 16);
  const Problem<2> problem = Problem<2>::packed(good);
  const Index dx_elements = Problem<2>::element_space(good.input_lengths(), problem.input_strides);
  const typename Op::Args ok{storage.data() + 30000, storage.data() + 50000, storage.data()};
  auto refused = [&](const Problem<2>& pr, const typename Op::Args& args, hipgrad::StatusCode code, const char* what) {
    const Status s = Op::can_implement(pr, args);
    EXPECT_EQ(s.code(), code) << what << ": " << s.to_string();
    EXPECT_FALSE(s.message().empty()) << what;
  };
  using hipgrad::StatusCode;
  ASSERT_LT(dx_elements, 30000);
  Problem<2> zero = problem;
  zero.params.C = 0;
  refused(zero, ok, StatusCode::kInvalidArgument, "C = 0");
  Problem<2> negative_pad = problem;
  negative_pad.params.left_pads[0] = -1;
  refused(negative_pad, ok, StatusCode::kInvalidArgument, "negative pad");
  Problem<2> no_output = problem;
  no_output.params.filter = {13, 3};
  refused(no_output, ok, StatusCode::kInvalidArgument, "output length <= 0");
  refused(problem, {nullptr, ok.w, ok.dx}, StatusCode::kInvalidArgument, "null dy");
  refused(problem, {ok.dy, ok.w, storage.data() + 29990}, StatusCode::kInvalidArgument, "dx overlaps dy");
  refused(problem, {ok.dy, ok.w, storage.data() + 49990}, StatusCode::kInvalidArgument, "dx overlaps w");
  // One byte off an fp16 element: refused by name (on the GPU a misaligned address faults).
  const T* odd = reinterpret_cast<const T*>(reinterpret_cast<const char*>(ok.dy) + 1);
  refused(problem, {odd, ok.w, ok.dx}, StatusCode::kInvalidArgument, "dy one byte off");
  EXPECT_NE(Op::can_implement(problem, {odd, ok.w, ok.dx}).message().find("dy is not aligned"), std::string::npos);
  Problem<2> aliasing = problem;
  aliasing.input_strides[3] = 0;  // every row of dx at one place
  refused(aliasing, ok, StatusCode::kInvalidArgument, "dx strides alias");
  Problem<2> short_strides = problem;
  short_strides.weight_strides.pop_back();
  refused(short_strides, ok, StatusCode::kInvalidArgument, "weight strides of the wrong rank");
  Problem<2> tf32 = problem;
  tf32.allow_tf32 = true;
  refused(tf32, ok, StatusCode::kInvalidArgument, "TF32 for fp16 data");
  Problem<2> unknown = problem;
  unknown.algorithm = static_cast<Algorithm>(9);
  refused(unknown, ok, StatusCode::kInvalidArgument, "unknown algorithm");
  EXPECT_EQ(Op::workspace_size(zero), 0u);
  // The TMA box path where its maps cannot read the operands: channels not contiguous (NGCHW),
  // and exact fp32, which has no matrix path; its workspace holds the maps too.
  Problem<2> ngchw = Problem<2>::packed(good, hipgrad::conv::ConvLayout::kNGCHW);
  ngchw.algorithm = Algorithm::kTmaBoxes;
  refused(ngchw, ok, StatusCode::kNotSupported, "tma_boxes with NGCHW");
  EXPECT_NE(Op::can_implement(ngchw, ok).message().find("contiguous"), std::string::npos);
  Problem<2> exact = problem;
  exact.algorithm = Algorithm::kTmaBoxes;
  using Fp32 = hipgrad::conv::BackwardData<float, 2>;
  std::vector<float> floats(1 << 16);
  const Fp32::Args fp32_args{floats.data() + 30000, floats.data() + 50000, floats.data()};
  EXPECT_NE(Fp32::can_implement(exact, fp32_args).message().find("exact fp32"), std::string::npos);
  // kAuto may take the box path for fp16/bf16 (its workspace is the larger), never for fp32: on
  // problems of more than 32 channels per group, which kAuto does not give the direct kernels
  // (they need no workspace).
  Problem<2> wide =
      Problem<2>::packed(hipgrad::test::conv_params<2>(1, 2, 40, 40, {3, 3}, {9, 9}, {2, 2}, {1, 1}, {1, 1}, {1, 1}));
  Problem<2> wide_boxes = wide;
  wide_boxes.algorithm = Algorithm::kTmaBoxes;
  EXPECT_EQ(Op::workspace_size(wide_boxes), Op::workspace_size(wide));
  Problem<2> depthwise =
      Problem<2>::packed(hipgrad::test::conv_params<2>(8, 2, 1, 1, {3, 3}, {9, 9}, {1, 1}, {1, 1}, {1, 1}, {1, 1}));
  EXPECT_EQ(Op::workspace_size(depthwise), 0u) << "kAuto's direct kernels of a depthwise problem";
  Problem<2> fp32_boxes = wide;
  fp32_boxes.allow_tf32 = true;
  const Problem<2> fp32_auto = fp32_boxes;
  fp32_boxes.algorithm = Algorithm::kTmaBoxes;
  EXPECT_GT(Fp32::workspace_size(fp32_boxes), Fp32::workspace_size(fp32_auto));
}

/// Calls on one problem, repeated as a training loop repeats them, decompose its stride phases
/// once and search its phases' boxes once.
TEST(ConvBackwardDataProblem, RepeatedCallsDecomposeAndSearchOnce) {
  using Op = hipgrad::conv::BackwardData<hipgrad::half, 2>;
  // Stride 2 (four phases), 40 channels (neither packed nor direct), sizes no other test takes.
  const Problem<2> problem =
      Problem<2>::packed(hipgrad::test::conv_params<2>(3, 5, 24, 40, {3, 3}, {27, 23}, {2, 2}, {1, 1}, {1, 1}, {1, 1}));
  const auto args = hipgrad::test::far_apart_args<Op::Args, hipgrad::half>();
  const auto counts = hipgrad::test::plan_counts_over_five_rounds([&] {
    EXPECT_TRUE(Op::can_implement(problem, args).is_ok());
    EXPECT_GT(Op::workspace_size(problem), 0u);
    EXPECT_FALSE(Op::name(problem, args).empty());
  });
  EXPECT_EQ(counts.phase_decompositions, 1);
  EXPECT_EQ(counts.box_searches, 1);  // kAuto weighs the box path for fp16
}

}  // namespace
