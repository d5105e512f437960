/// @file test_groupnorm_problem.cpp
/// @brief GroupNorm problems and can_implement: every kind of bad input gets a Status with a
///        reason, never a crash; layout classification and workspace sizes. Needs no GPU.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/backward_data.hpp"
#include "hipgrad/ops/groupnorm/backward_gamma_beta.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "groupnorm_instances.hpp"

namespace {

using hipgrad::Index;
using hipgrad::StatusCode;
namespace gn = hipgrad::groupnorm;
using Fwd = gn::Forward<hipgrad::half, float>;
using Bwd = gn::Backward<hipgrad::half, float>;

// Fake, distinct, aligned device addresses: can_implement never dereferences them.
template <typename T>
T* fake(std::uintptr_t slot) {
  return reinterpret_cast<T*>(slot << 32);
}

Fwd::Args forward_args() {
  return {fake<const hipgrad::half>(1), fake<const float>(2), fake<const float>(3),
          fake<hipgrad::half>(4),       fake<float>(5),       fake<float>(6)};
}

Bwd::Args backward_args() {
  return {fake<const hipgrad::half>(1),
          fake<const hipgrad::half>(2),
          fake<const float>(3),
          fake<const float>(4),
          fake<const float>(5),
          fake<const float>(6),
          fake<hipgrad::half>(7),
          fake<float>(8),
          fake<float>(9)};
}

void expect_invalid(const hipgrad::Status& s, const std::string& fragment) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
}

TEST(GroupNormProblem, ValidPackedProblemsAreAccepted) {
  for (bool channels_last : {false, true}) {
    const auto p = gn::ForwardProblem::packed({2, 64, 8, 8}, 8, channels_last);
    EXPECT_TRUE(Fwd::can_implement(p, forward_args()).is_ok()) << Fwd::can_implement(p, forward_args()).to_string();
    EXPECT_GT(Fwd::workspace_size(p), 0u);
    const auto b = gn::BackwardProblem::packed({2, 64, 8, 8}, 8, channels_last);
    EXPECT_TRUE(Bwd::can_implement(b, backward_args()).is_ok());
    EXPECT_GT(Bwd::workspace_size(b), 0u);
  }
  EXPECT_NE(Fwd::name(gn::ForwardProblem::packed({2, 64, 8, 8}, 8, true)).find("channels_last"), std::string::npos);
  EXPECT_NE(Fwd::name(gn::ForwardProblem::packed({2, 64, 8, 8}, 8, false)).find("planes"), std::string::npos);
}

TEST(GroupNormProblem, LayoutClassification) {
  const auto nchw = gn::ForwardProblem::packed({2, 6, 4, 5}, 3, false).x;
  const auto nhwc = gn::ForwardProblem::packed({2, 6, 4, 5}, 3, true).x;
  EXPECT_TRUE(nchw.channel_planes());
  EXPECT_FALSE(nchw.channels_last());
  EXPECT_TRUE(nhwc.channels_last());
  EXPECT_FALSE(nhwc.channel_planes());
  gn::TensorShape padded = nhwc;
  padded.strides[0] += 1;
  EXPECT_FALSE(padded.channels_last());
  EXPECT_FALSE(padded.channel_planes());
}

TEST(GroupNormProblem, BadSizesAreRejectedWithAReason) {
  auto p = gn::ForwardProblem::packed({2, 30, 4, 4}, 4, false);
  expect_invalid(Fwd::can_implement(p, forward_args()), "C=30 is not divisible by G=4");
  p = gn::ForwardProblem::packed({2, 32, 4, 4}, 0, false);
  expect_invalid(Fwd::can_implement(p, forward_args()), "G must be positive");
  p = gn::ForwardProblem::packed({2, 32, 4, 4}, -2, false);
  expect_invalid(Fwd::can_implement(p, forward_args()), "G must be positive");
  p = gn::ForwardProblem::packed({2, 32, 0, 4}, 4, false);
  // packed() keeps the lengths it cannot build strides for, so that validate() names the fault.
  expect_invalid(Fwd::can_implement(p, forward_args()), "x: length 0 in dimension 2 must be positive");
  gn::ForwardProblem q = gn::ForwardProblem::packed({2, 32, 4, 4}, 4, false);
  q.x.lengths[2] = -3;
  expect_invalid(Fwd::can_implement(q, forward_args()), "must be positive");
  p = gn::ForwardProblem::packed({2, 32, 4, 4, 4, 4}, 4, false);  // rank 6
  expect_invalid(Fwd::can_implement(p, forward_args()), "rank");
  EXPECT_EQ(Fwd::workspace_size(p), 0u);
}

TEST(GroupNormProblem, BadEpsilonAndActivationParameters) {
  auto p = gn::ForwardProblem::packed({2, 32, 4, 4}, 4, false);
  p.epsilon = 0.0f;
  expect_invalid(Fwd::can_implement(p, forward_args()), "epsilon");
  p.epsilon = -1e-5f;
  expect_invalid(Fwd::can_implement(p, forward_args()), "epsilon");
  p.epsilon = 1e-5f;
  p.activation = gn::Activation::kSwish;
  p.swish_beta = INFINITY;
  expect_invalid(Fwd::can_implement(p, forward_args()), "swish beta");
  p.swish_beta = 1.0f;
  p.algorithm = static_cast<gn::Algorithm>(7);
  expect_invalid(Fwd::can_implement(p, forward_args()), "unknown algorithm 7");
  auto b = gn::BackwardProblem::packed({2, 32, 4, 4}, 4, true);
  b.algorithm = static_cast<gn::Algorithm>(-1);
  expect_invalid(Bwd::can_implement(b, backward_args()), "unknown algorithm -1");
}

TEST(GroupNormProblem, NullPointersAndMismatchedTensors) {
  const auto p = gn::ForwardProblem::packed({2, 32, 4, 4}, 4, false);
  auto a = forward_args();
  a.x = nullptr;
  expect_invalid(Fwd::can_implement(p, a), "must not be null");
  a = forward_args();
  a.mean = nullptr;  // statistics are optional
  a.rstd = nullptr;
  EXPECT_TRUE(Fwd::can_implement(p, a).is_ok());
  auto q = p;
  q.y.lengths[1] = 16;
  expect_invalid(Fwd::can_implement(q, forward_args()), "lengths of x");

  const auto b = gn::BackwardProblem::packed({2, 32, 4, 4}, 4, true);
  auto ba = backward_args();
  ba.dgamma = nullptr;
  expect_invalid(Bwd::can_implement(b, ba), "go together");
  ba.dbeta = nullptr;
  ba.dx = nullptr;
  expect_invalid(Bwd::can_implement(b, ba), "nothing to compute");
  ba = backward_args();
  ba.rstd = nullptr;
  expect_invalid(Bwd::can_implement(b, ba), "must not be null");
  auto swish = b;
  swish.activation = gn::Activation::kSwish;
  ba = backward_args();
  ba.beta = nullptr;
  expect_invalid(Bwd::can_implement(swish, ba), "needs beta");
  EXPECT_TRUE(Bwd::can_implement(b, ba).is_ok());  // without Swish beta is not read
  using DataOp = gn::BackwardData<hipgrad::half, float>;
  expect_invalid(DataOp::can_implement(b, DataOp::Args{}), "dx must not be null");
  using GammaBetaOp = gn::BackwardGammaBeta<hipgrad::half, float>;
  expect_invalid(GammaBetaOp::can_implement(b, GammaBetaOp::Args{}), "dgamma and dbeta");
}

TEST(GroupNormProblem, AliasingOutputsAreRejected) {
  const auto p = gn::ForwardProblem::packed({2, 32, 4, 4}, 4, false);
  auto a = forward_args();
  a.y = const_cast<hipgrad::half*>(a.x) + 7;  // overlapping x
  expect_invalid(Fwd::can_implement(p, a), "y overlaps x");
  a = forward_args();
  a.mean = reinterpret_cast<float*>(const_cast<hipgrad::half*>(a.x)) + 1;  // statistics written into x
  expect_invalid(Fwd::can_implement(p, a), "mean overlaps x");
  auto q = p;
  q.y.strides[3] = 0;  // two elements of y at one address
  expect_invalid(Fwd::can_implement(q, forward_args()), "map two elements to one address");

  const auto b = gn::BackwardProblem::packed({2, 32, 4, 4}, 4, false);
  auto ba = backward_args();
  ba.dx = const_cast<hipgrad::half*>(ba.dy);
  expect_invalid(Bwd::can_implement(b, ba), "dx overlaps");
  ba = backward_args();
  ba.dbeta = ba.dgamma + 3;
  expect_invalid(Bwd::can_implement(b, ba), "dbeta overlaps dgamma");
  ba = backward_args();
  ba.dgamma = const_cast<float*>(ba.gamma);  // dγ written over the γ still being read
  expect_invalid(Bwd::can_implement(b, ba), "dgamma overlaps gamma");
}

/// Pointers off their elements' alignment (an fp16 tensor one byte off, an fp32 one two bytes
/// off) are refused by name before anything launches: on the GPU they would fault.
TEST(GroupNormProblem, MisalignedPointersAreRejected) {
  auto off = [](auto* p, std::uintptr_t bytes) {
    return reinterpret_cast<decltype(p)>(reinterpret_cast<std::uintptr_t>(p) + bytes);
  };
  const auto p = gn::ForwardProblem::packed({2, 32, 4, 4}, 4, false);
  auto a = forward_args();
  a.x = off(a.x, 1);
  expect_invalid(Fwd::can_implement(p, a), "x is not aligned to its 2-byte elements");
  a = forward_args();
  a.rstd = off(a.rstd, 2);
  expect_invalid(Fwd::can_implement(p, a), "rstd is not aligned to its 4-byte elements");
  const auto b = gn::BackwardProblem::packed({2, 32, 4, 4}, 4, false);
  auto ba = backward_args();
  ba.dgamma = off(ba.dgamma, 2);
  expect_invalid(Bwd::can_implement(b, ba), "dgamma is not aligned");
  ba = backward_args();
  ba.dy = off(ba.dy, 1);
  expect_invalid(Bwd::can_implement(b, ba), "dy is not aligned");
}

TEST(GroupNormProblem, RunRejectsASmallWorkspace) {
  // Below workspace_size is refused on every path, also where the path taken needs less (the
  // one-read forward needs none): the bound does not depend on the pointers or the GPU's choice.
  for (gn::Algorithm algorithm : {gn::Algorithm::kAuto, gn::Algorithm::kThreePass}) {
    auto p = gn::ForwardProblem::packed({2, 32, 4, 4}, 4, false);
    p.algorithm = algorithm;
    const std::size_t bytes = Fwd::workspace_size(p);
    ASSERT_GT(bytes, 0u);
    EXPECT_EQ(Fwd::run(p, forward_args(), nullptr, 0, nullptr).code(), StatusCode::kWorkspaceTooSmall);
    const auto s = Fwd::run(p, forward_args(), fake<void>(64), bytes - 1, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kWorkspaceTooSmall) << s.to_string();
    auto b = gn::BackwardProblem::packed({2, 32, 4, 4}, 4, true);
    b.algorithm = algorithm;
    Bwd::Args data_only = backward_args();
    data_only.dgamma = data_only.dbeta = nullptr;
    const auto t = Bwd::run(b, data_only, fake<void>(64), Bwd::workspace_size(b) - 1, nullptr);
    EXPECT_EQ(t.code(), StatusCode::kWorkspaceTooSmall) << t.to_string();
  }
}

}  // namespace
