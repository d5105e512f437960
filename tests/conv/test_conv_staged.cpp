/// @file test_conv_staged.cpp
/// @brief The staged route (ops/conv/common/staged.hpp). CPU: the rule (which problems may stage);
///        the copies' index maps run on the host — each tensor spread into its staged form (zeros
///        in the padded channels and K rows), the CPU reference run on the staged problem, the
///        result copied back — give the reference's dx and dw exactly on NCHW, odd channel counts,
///        G > 1, 1-D/2-D/3-D, strides, pads and weights in other strides, every caller element
///        written once; NCHW groups of whole vectors stage ahead of the direct kernels. GPU (fp16,
///        bf16, TF32): both ops under kAuto stage these problems and match the CPU reference,
///        outputs and workspace poisoned first; forced, it refuses with a reason.

#include <gtest/gtest.h>

#include <cmath>
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
#include "hipgrad/ops/conv/common/staged.hpp"

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
using detail::StagedTensor;

/// `p` with every tensor in `layout`, the weight in `w_layout`.
template <int NDim>
Problem<NDim> problem_of(const ConvParams<NDim>& p, ConvLayout layout, ConvLayout w_layout) {
  Problem<NDim> problem = Problem<NDim>::packed(p, layout);
  problem.weight_strides = hipgrad::conv::weight_strides(p, w_layout);
  return problem;
}

TEST(ConvStaged, RuleTakesNchwAndOddChannels) {
  const ConvParams<2> dense = conv_params<2>(1, 2, 64, 32, {3, 3}, {9, 8}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  auto whole = [](const Problem<2>& problem) { return detail::channels_in_whole_vectors<hipgrad::half>(problem); };
  EXPECT_TRUE(whole(Problem<2>::packed(dense)));
  EXPECT_TRUE(whole(Problem<2>::packed(dense, ConvLayout::kGNHWC)));
  EXPECT_FALSE(whole(Problem<2>::packed(dense, ConvLayout::kNGCHW)));
  ConvParams<2> odd_k = dense, odd_c = dense;
  odd_k.K = 3, odd_c.C = 12;
  EXPECT_FALSE(whole(Problem<2>::packed(odd_k)));
  EXPECT_FALSE(whole(Problem<2>::packed(odd_c)));
  EXPECT_TRUE((detail::channels_in_whole_vectors<float, 2>(Problem<2>::packed(odd_c))));  // 4 fp32 a vector
  // Runs for 16-bit data and TF32, not exact fp32; spatial dimensions must merge.
  const Problem<2> nchw = Problem<2>::packed(dense, ConvLayout::kNGCHW);
  EXPECT_EQ((detail::stage_blocker<hipgrad::half, 2>(nchw)), nullptr);
  EXPECT_NE((detail::stage_blocker<float, 2>(nchw)), nullptr);
  Problem<2> tf32 = nchw;
  tf32.allow_tf32 = true;
  EXPECT_EQ((detail::stage_blocker<float, 2>(tf32)), nullptr);
  Problem<2> padded_rows = nchw;
  padded_rows.input_strides = {32 * 9 * 9, 32 * 9 * 9, 9 * 9, 9, 1};  // H rows of 9 for W 8: no one index
  EXPECT_NE((detail::stage_blocker<hipgrad::half, 2>(padded_rows)), nullptr);
  // The staged problem: channels-last, C and K whole vectors.
  const Problem<2> staged = detail::staged_problem<hipgrad::half>(Problem<2>::packed(odd_k, ConvLayout::kNGCHW));
  EXPECT_EQ(staged.params.K, 8);
  EXPECT_EQ(staged.params.C, 32);
  EXPECT_TRUE(whole(staged));
  // Tensors already channels-last in whole vectors stay where the caller has them.
  const Problem<2> vae = Problem<2>::packed(odd_k);
  EXPECT_FALSE((detail::is_staged<hipgrad::half, 2>(vae, StagedTensor::kInput)));
  EXPECT_TRUE((detail::is_staged<hipgrad::half, 2>(vae, StagedTensor::kOutput)));
  EXPECT_TRUE((detail::is_staged<hipgrad::half, 2>(vae, StagedTensor::kWeight)));
  EXPECT_EQ(detail::staged_problem<hipgrad::half>(vae).input_strides, vae.input_strides);
  // Groups of whole vectors in NCHW stage ahead of the direct kernels (packed there); groups of 4
  // channels (their work padded to twice), channels-last groups and TF32 (no packed groups) do not.
  const ConvParams<2> g8 = conv_params<2>(32, 2, 8, 8, {3, 3}, {9, 8}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  ConvParams<2> g4 = g8;
  g4.C = 4, g4.K = 4;
  const auto before_direct = [](const Problem<2>& problem) {
    return detail::stages_before_direct<hipgrad::half, 2>(problem);
  };
  EXPECT_TRUE(before_direct(Problem<2>::packed(g8, ConvLayout::kNGCHW)));
  EXPECT_FALSE(before_direct(Problem<2>::packed(g4, ConvLayout::kNGCHW)));
  EXPECT_FALSE(before_direct(Problem<2>::packed(g8)));
  Problem<2> g8_tf32 = Problem<2>::packed(g8, ConvLayout::kNGCHW);
  g8_tf32.allow_tf32 = true;
  EXPECT_FALSE((detail::stages_before_direct<float, 2>(g8_tf32)));
  EXPECT_TRUE((detail::may_stage<hipgrad::half, 2>(Problem<2>::packed(g8, ConvLayout::kNGCHW), true)));
  EXPECT_FALSE((detail::may_stage<hipgrad::half, 2>(Problem<2>::packed(g4, ConvLayout::kNGCHW), true)));
}

/// The host's run of one copy: every element of the destination the kernel writes, from the
/// source through caller_offset and staged_offset; `writes` counts the caller's elements written.
template <typename T>
void copy_on_host(const detail::StageParams<T>& c, const std::vector<double>& from, std::vector<double>& to,
                  std::vector<int>* writes) {
  for (std::int64_t a = 0; a < c.a; ++a)
    for (std::int64_t b = 0; b < c.b; ++b)
      for (std::int64_t ch = 0; ch < c.channels; ++ch)
        for (std::int64_t x = 0; x < c.positions; ++x) {
          const bool used = b < c.b_used && ch < c.channels_used;
          const auto caller = static_cast<std::size_t>(detail::caller_offset(c, a, b, ch, x));
          const auto staged = static_cast<std::size_t>(detail::staged_offset(c, a, b, ch, x));
          if (c.spread) {
            to.at(staged) = used ? from.at(caller) : 0.0;
          } else if (used) {
            to.at(caller) = from.at(staged);
            ++(*writes)[caller];
          }
        }
}

/// Both ops through the staged copies on the host against the CPU reference, integer data.
template <int NDim>
void expect_staging_exact(const Problem<NDim>& problem, std::uint64_t seed) {
  SCOPED_TRACE(problem.to_string());
  using T = hipgrad::half;
  ASSERT_EQ((detail::stage_blocker<T, NDim>(problem)), nullptr);
  const ConvParams<NDim>& p = problem.params;
  const detail::StagedLayout<NDim> at = detail::staged_layout<T>(problem);
  const ConvParams<NDim>& s = at.problem.params;
  Tensor<double> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  Tensor<double> w(p.weight_lengths(), problem.weight_strides);
  hipgrad::host::fill(x, InitMethod::kIntegers, seed);
  hipgrad::host::fill(dy, InitMethod::kIntegers, seed + 1);
  hipgrad::host::fill(w, InitMethod::kIntegers, seed + 2);
  Tensor<double> sx(s.input_lengths(), at.problem.input_strides), sdy(s.output_lengths(), at.problem.output_strides);
  Tensor<double> sw(s.weight_lengths(), at.problem.weight_strides);
  for (Tensor<double>* t : {&sx, &sdy, &sw})
    for (double& v : t->storage()) v = std::nan("");
  // A tensor not copied is the caller's, at the caller's strides.
  const auto spread = [&](StagedTensor tensor, bool staged, const Tensor<double>& from, Tensor<double>& to) {
    if (!staged) {
      EXPECT_EQ(to.storage().size(), from.storage().size());
      to.storage() = from.storage();
      return;
    }
    copy_on_host(detail::stage_params<T>(problem, at.problem, tensor, true), from.storage(), to.storage(), nullptr);
  };
  spread(StagedTensor::kInput, at.input_staged, x, sx);
  spread(StagedTensor::kOutput, at.output_staged, dy, sdy);
  spread(StagedTensor::kWeight, at.weight_staged, w, sw);
  // Every staged element written (a NaN left would spread through the reference).
  const auto gather = [&](StagedTensor tensor, bool staged, const Tensor<double>& from,
                          const std::vector<Index>& lengths, const std::vector<Index>& strides) {
    Tensor<double> to(lengths, strides);
    if (!staged) {
      to.storage() = from.storage();
      return to;
    }
    for (double& v : to.storage()) v = std::nan("");
    std::vector<int> writes(to.storage().size(), 0);
    copy_on_host(detail::stage_params<T>(problem, at.problem, tensor, false), from.storage(), to.storage(), &writes);
    Index written = 0;
    for (int n : writes) written += n;
    Index elements = 1;
    for (Index l : lengths) elements *= l;
    // The caller's tensors here are packed: as many writes as elements, none twice, is each once.
    EXPECT_EQ(written, elements);
    for (int n : writes) EXPECT_LE(n, 1);
    return to;
  };

  Tensor<double> staged_dx(s.input_lengths(), at.problem.input_strides), expected_dx(p.input_lengths());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_data(sdy, sw, staged_dx, s).is_ok());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_data(dy, w, expected_dx, p).is_ok());
  const Tensor<double> dx =
      gather(StagedTensor::kInput, at.input_staged, staged_dx, p.input_lengths(), problem.input_strides);
  Tensor<double> staged_dw(s.weight_lengths(), at.problem.weight_strides), expected_dw(p.weight_lengths());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_weight(sx, sdy, staged_dw, s).is_ok());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_weight(x, dy, expected_dw, p).is_ok());
  const Tensor<double> dw =
      gather(StagedTensor::kWeight, at.weight_staged, staged_dw, p.weight_lengths(), problem.weight_strides);
  int wrong = 0;
  expected_dx.for_each_index([&](const std::vector<Index>& i) { wrong += dx(i) != expected_dx(i); });
  expected_dw.for_each_index([&](const std::vector<Index>& i) { wrong += dw(i) != expected_dw(i); });
  EXPECT_EQ(wrong, 0);
}

TEST(ConvStaged, CopiesGiveTheReference) {
  std::uint64_t seed = 14000;
  // PyTorch's NCHW, whole-vector channels; G > 1; odd K and C; 1-D and 3-D; weights in other strides.
  expect_staging_exact(problem_of(conv_params<2>(1, 2, 16, 8, {3, 3}, {7, 6}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                                  ConvLayout::kNGCHW, ConvLayout::kNGCHW),
                       seed++);
  expect_staging_exact(problem_of(conv_params<2>(3, 2, 8, 16, {3, 2}, {9, 7}, {2, 2}, {1, 2}, {1, 0}, {0, 1}),
                                  ConvLayout::kNGCHW, ConvLayout::kNHWGC),
                       seed++);
  expect_staging_exact(problem_of(conv_params<2>(1, 1, 3, 24, {3, 3}, {11, 5}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                                  ConvLayout::kNHWGC, ConvLayout::kNHWGC),
                       seed++);
  expect_staging_exact(problem_of(conv_params<2>(2, 3, 5, 13, {1, 1}, {4, 9}, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
                                  ConvLayout::kGNHWC, ConvLayout::kNGCHW),
                       seed++);
  expect_staging_exact(
      problem_of(conv_params<1>(2, 2, 9, 40, {5}, {37}, {3}, {2}, {4}, {1}), ConvLayout::kNGCHW, ConvLayout::kGNHWC),
      seed++);
  expect_staging_exact(
      problem_of(conv_params<3>(1, 2, 16, 8, {1, 3, 3}, {3, 9, 8}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}),
                 ConvLayout::kNGCHW, ConvLayout::kNGCHW),
      seed++);
  expect_staging_exact(
      problem_of(conv_params<3>(1, 1, 20, 3, {2, 3, 1}, {4, 5, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {0, 1, 0}),
                 ConvLayout::kNHWGC, ConvLayout::kNGCHW),
      seed++);
}

TEST(ConvStaged, ForcedRefusesWithAReason) {
  const ConvParams<2> p = conv_params<2>(1, 2, 16, 8, {3, 3}, {7, 6}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  Problem<2> problem = Problem<2>::packed(p, ConvLayout::kNGCHW);
  problem.algorithm = Algorithm::kStaged;
  // H rows padded past W (7 for 6 columns): H and W no longer one index.
  problem.input_strides = {8 * 7 * 7, 8 * 7 * 7, 7 * 7, 7, 1};
  using Data = hipgrad::conv::BackwardData<hipgrad::half, 2>;
  using Weight = hipgrad::conv::BackwardWeight<hipgrad::half, 2>;
  const hipgrad::Status data = Data::can_implement(problem, hipgrad::test::far_apart_args<Data::Args, hipgrad::half>());
  const hipgrad::Status weight =
      Weight::can_implement(problem, hipgrad::test::far_apart_args<Weight::Args, hipgrad::half>());
  for (const hipgrad::Status& s : {data, weight}) {
    EXPECT_EQ(s.code(), hipgrad::StatusCode::kNotSupported) << s.to_string();
    EXPECT_NE(s.message().find("algorithm staged cannot run: "), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("one stride"), std::string::npos) << s.to_string();
  }
  Problem<2> exact = Problem<2>::packed(p, ConvLayout::kNGCHW);
  exact.algorithm = Algorithm::kStaged;
  using ExactData = hipgrad::conv::BackwardData<float, 2>;
  const hipgrad::Status s = ExactData::can_implement(exact, hipgrad::test::far_apart_args<ExactData::Args, float>());
  EXPECT_NE(s.message().find("exact fp32"), std::string::npos) << s.to_string();
}

template <typename T>
class ConvStagedTest : public ::testing::Test {};
using StagedTypes = ::testing::Types<hipgrad::half, hipgrad::bfloat16, float>;
TYPED_TEST_SUITE(ConvStagedTest, StagedTypes);

/// Both ops under kAuto (float: TF32) on `problem`, integer and decimal data: both must stage.
template <typename T, int NDim>
void check_staged(Problem<NDim> problem, std::uint64_t seed) {
  problem.allow_tf32 = std::is_same_v<T, float>;
  hipgrad::test::check_auto_route<T, NDim>(problem, seed, "_staged_");
}

TYPED_TEST(ConvStagedTest, AutoStagesAndMatchesTheReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  std::uint64_t seed = 15000;
  // NCHW (weights too, as PyTorch's), odd sizes, stride 2, G > 1, 1-D and 3-D (a strided video layer).
  check_staged<T, 2>(Problem<2>::packed(conv_params<2>(1, 2, 64, 48, {3, 3}, {17, 13}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                                        ConvLayout::kNGCHW),
                     seed += 10);
  check_staged<T, 2>(Problem<2>::packed(conv_params<2>(1, 3, 32, 64, {3, 3}, {15, 16}, {2, 2}, {1, 1}, {1, 1}, {0, 0}),
                                        ConvLayout::kNGCHW),
                     seed += 10);
  check_staged<T, 2>(Problem<2>::packed(conv_params<2>(1, 2, 128, 64, {1, 1}, {7, 9}, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
                                        ConvLayout::kNGCHW),
                     seed += 10);
  check_staged<T, 2>(Problem<2>::packed(conv_params<2>(2, 2, 64, 64, {3, 3}, {9, 10}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                                        ConvLayout::kNGCHW),
                     seed += 10);
  check_staged<T, 1>(
      Problem<1>::packed(conv_params<1>(1, 2, 48, 64, {3}, {101}, {1}, {1}, {1}, {1}), ConvLayout::kNGCHW), seed += 10);
  check_staged<T, 3>(Problem<3>::packed(conv_params<3>(1, 2, 64, 64, {1, 3, 3}, {3, 17, 15}, {1, 2, 2}, {1, 1, 1},
                                                       {0, 1, 1}, {0, 1, 1}),
                                        ConvLayout::kNGCHW),
                     seed += 10);
  // ResNeXt-like groups of 8 and 16 channels in NCHW (16-bit: staged ahead of the direct kernels).
  if (sizeof(T) == 2) {
    check_staged<T, 2>(Problem<2>::packed(conv_params<2>(8, 2, 8, 8, {3, 3}, {11, 12}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                                          ConvLayout::kNGCHW),
                       seed += 10);
    check_staged<T, 2>(Problem<2>::packed(conv_params<2>(4, 2, 16, 16, {3, 3}, {9, 7}, {2, 2}, {1, 1}, {1, 1}, {1, 1}),
                                          ConvLayout::kNGCHW),
                       seed += 10);
  }
  // A VAE's 3-channel output conv: K = 3, channels-last (16-bit: TF32 backward-data has no box
  // path to stage for) and NCHW.
  for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kNGCHW}) {
    if (sizeof(T) == 4 && layout == ConvLayout::kNHWGC) continue;
    check_staged<T, 2>(
        Problem<2>::packed(conv_params<2>(1, 2, 3, 128, {3, 3}, {19, 18}, {1, 1}, {1, 1}, {1, 1}, {1, 1}), layout),
        seed += 10);
  }
}

}  // namespace
