/// @file backward.hpp
/// @brief GroupNorm backward, fused: dx, dγ and dβ from one pass of sums over x and dy, optionally
///        through a fused Swish. BackwardData and BackwardGammaBeta are this op with one of the
///        two outputs left out.
///
///   using Op = hipgrad::groupnorm::Backward<hipgrad::half, float>;
///   auto problem = hipgrad::groupnorm::BackwardProblem::packed({N, C, H, W}, G, /*channels_last=*/true);
///   Op::Args args{dy, x, gamma, beta, mean, rstd, dx, dgamma, dbeta};
///   HIPGRAD_RETURN_IF_ERROR(Op::run(problem, args, workspace, Op::workspace_size(problem), stream));
///
/// mean and rstd are the forward's [N, G] fp32 statistics. dx may be null (then only dγ, dβ are
/// computed), or dγ and dβ may both be null (then only dx). Results are deterministic.
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/groupnorm/detail/backward_launch.hpp"
#include "hipgrad/ops/groupnorm/detail/backward_plan.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

namespace hipgrad::groupnorm {

template <typename T, typename TParam = T>
class Backward {
  static_assert(is_storage_type_v<T>, "GroupNorm data must be float, half or bfloat16");
  static_assert(std::is_same_v<TParam, T> || std::is_same_v<TParam, float>, "γ/β must be of the data type or float");

 public:
  using Problem = BackwardProblem;

  using Args = detail::BackwardArgs<T, TParam>;

  // The members that reach the kernels (launches, and the plans' occupancy queries) are defined
  // after the class, not inline, so that an `extern template` declaration of the op keeps its
  // kernels out of the translation units that only call it.
  static Status can_implement(const BackwardProblem& p, const Args& a);

  /// Enough for a call with or without dx (their layout paths, and so their tilings, may differ),
  /// on either path (the one-read path needs the per-(n, c) totals only, which the three-pass
  /// carve-up starts with).
  static std::size_t workspace_size(const BackwardProblem& p);

  static Status run(const BackwardProblem& p, const Args& a, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream);

  /// The path run() takes for these arguments (default, or no output given: dx, dγ and dβ
  /// wanted, 16-byte aligned pointers).
  static std::string name(const BackwardProblem& p, const Args& a = Args{});

 private:
  using Planner = detail::BackwardPlanner<T, TParam>;
  using Launches = detail::BackwardLaunches<T, TParam>;

  static Status check_arguments(const BackwardProblem& p, const Args& a) {
    HIPGRAD_RETURN_IF_ERROR(p.validate());
    if (!a.dy || !a.x || !a.gamma || !a.mean || !a.rstd) {
      return Status::invalid_argument("dy, x, gamma, mean and rstd must not be null");
    }
    if (p.activation == Activation::kSwish && !a.beta) return Status::invalid_argument("a fused Swish needs beta");
    if ((a.dgamma == nullptr) != (a.dbeta == nullptr)) return Status::invalid_argument("dgamma and dbeta go together");
    if (!a.dx && !a.dgamma) return Status::invalid_argument("nothing to compute: dx, dgamma and dbeta are all null");
    const auto tensor_bytes = [](const TensorShape& t) {
      return static_cast<std::size_t>(t.element_space()) * sizeof(T);
    };
    const std::size_t stats = static_cast<std::size_t>(p.x.n() * p.groups) * sizeof(float);
    const std::size_t params = static_cast<std::size_t>(p.x.c()) * sizeof(TParam);
    constexpr std::size_t kData = sizeof(T), kParam = sizeof(TParam), kStat = sizeof(float);
    const MemoryRange outputs[] = {{a.dx, tensor_bytes(p.dx), "dx", kData},
                                   {a.dgamma, params, "dgamma", kParam},
                                   {a.dbeta, params, "dbeta", kParam}};
    const MemoryRange inputs[] = {{a.dy, tensor_bytes(p.dy), "dy", kData}, {a.x, tensor_bytes(p.x), "x", kData},
                                  {a.gamma, params, "gamma", kParam},      {a.beta, params, "beta", kParam},
                                  {a.mean, stats, "mean", kStat},          {a.rstd, stats, "rstd", kStat}};
    return check_memory_ranges(outputs, inputs);
  }
};

template <typename T, typename TParam>
Status Backward<T, TParam>::can_implement(const BackwardProblem& p, const Args& a) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
  return Planner::check_plans(p, Planner::plans(p, a));
}

template <typename T, typename TParam>
std::size_t Backward<T, TParam>::workspace_size(const BackwardProblem& p) {
  if (!p.validate().is_ok()) return 0;
  return Planner::plans(p, Planner::with_dx_args()).workspace;
}

template <typename T, typename TParam>
Status Backward<T, TParam>::run(const BackwardProblem& p, const Args& a, void* workspace, std::size_t workspace_bytes,
                                hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
  const typename Planner::Plans s = Planner::plans(p, a);
  HIPGRAD_RETURN_IF_ERROR(Planner::check_plans(p, s));
  HIPGRAD_RETURN_IF_ERROR(check_workspace(s.workspace, workspace, workspace_bytes));  // workspace_size's bound
  WorkspaceCarver carver(workspace, workspace_bytes);
  const typename Planner::Buffers b = Planner::carve(s.tiles, s.staged, p, carver);
  if (s.staged.usable) return Launches::run_staged(s.staged, s.tiles, p, a, b, stream);
  if (s.one_read.usable) {
    if (p.activation == Activation::kSwish)
      return Launches::template run_one_read<Activation::kSwish>(s.one_read, s.tiles, p, a, b, stream);
    return Launches::template run_one_read<Activation::kIdentity>(s.one_read, s.tiles, p, a, b, stream);
  }
  if (p.activation == Activation::kSwish)
    return Launches::template run_as<Activation::kSwish>(s.tiles, p, a, b, stream);
  return Launches::template run_as<Activation::kIdentity>(s.tiles, p, a, b, stream);
}

template <typename T, typename TParam>
std::string Backward<T, TParam>::name(const BackwardProblem& p, const Args& a) {
  const typename Planner::Plans s = Planner::plans(p, a.dx || a.dgamma ? a : Planner::with_dx_args());
  return std::string("groupnorm_bwd_") + type_name<T>() + "_" + type_name<TParam>() + "_" +
         detail::path_name(s.tiles.path) + "_v" + std::to_string(s.tiles.vector) +
         (s.staged.usable ? detail::staged_name(s.staged) : detail::one_read_name(s.one_read)) +
         Planner::fold_name(s, p, a.dgamma != nullptr || a.dx == nullptr) + "_" + activation_name(p.activation);
}

}  // namespace hipgrad::groupnorm
