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

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/groupnorm/detail/backward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/launch_plan.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_plan.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

namespace hipgrad::groupnorm {

template <typename T, typename TParam = T>
class Backward {
  static_assert(is_storage_type_v<T>, "GroupNorm data must be float, half or bfloat16");
  static_assert(std::is_same_v<TParam, T> || std::is_same_v<TParam, float>, "γ/β must be of the data type or float");

 public:
  using Problem = BackwardProblem;

  struct Args {
    const T* dy = nullptr;
    const T* x = nullptr;
    const TParam* gamma = nullptr;
    const TParam* beta = nullptr;  ///< read only with a fused Swish (to recompute its input)
    const float* mean = nullptr;   ///< [N, G]
    const float* rstd = nullptr;   ///< [N, G]
    T* dx = nullptr;               ///< optional
    TParam* dgamma = nullptr;      ///< [C], optional together with dbeta
    TParam* dbeta = nullptr;
  };

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
  static constexpr int kThreads = detail::kBlockThreads;
  static constexpr int kGroupThreads = 128;
  static constexpr int kV = kVector16<T>;

  using Plan = detail::Plan;

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
  /// Everything run() decides: the tiling of the three-pass launches, the one-read and staged
  /// plans (at most one usable decides the path) and the workspace: the larger of the carve-ups
  /// with and without dx (their layout paths, and so their tilings, may differ), so that a call
  /// is refused by the bound workspace_size states, whichever outputs it asks for.
  struct Plans {
    Plan tiles;
    detail::OneReadPlan one_read;
    detail::StagedPlan staged;
    std::size_t workspace = 0;
  };

  /// Args that stand for a call with dx (aligned, never dereferenced), for sizing and naming.
  static Args with_dx_args() {
    alignas(16) static unsigned char stand_in[16];
    Args a;
    a.dx = reinterpret_cast<T*>(stand_in);
    return a;
  }

  /// The call's plans, made once per problem, alignment, outputs wanted and device on this thread.
  static Plans plans(const BackwardProblem& p, const Args& a) {
    const DeviceInfo& device = current_device_info();
    detail::OpPlanKey key = detail::plan_key(device, p, {&p.x, &p.dy, &p.dx}, {a.x, a.dy, a.dx});
    key.add(a.dx != nullptr);
    thread_local RecentPlans<detail::OpPlanKey, Plans> recent;
    return recent.find_or_make(key, [&] { return make_plans(device, p, a); });
  }

  static Plans make_plans(const DeviceInfo& device, const BackwardProblem& p, const Args& a) {
    const TensorShape others[] = {p.dy, p.dx};
    Plans s;
    s.tiles = detail::make_plan<T>(device, p.x, p.groups, others, a.dx ? 2 : 1, {a.x, a.dy, a.dx});
    s.one_read = one_read_plan(s.tiles, p, a);
    s.staged = staged_plan(s.tiles, p);
    for (int dx : {0, 1}) {
      const Plan tiles = detail::make_plan<T>(device, p.x, p.groups, others, dx ? 2 : 1, {});
      WorkspaceCarver sizing(nullptr, 0);
      carve(tiles, staged_plan(tiles, p), p, sizing);
      s.workspace = sizing.used() > s.workspace ? sizing.used() : s.workspace;
    }
    return s;
  }

  static Status check_plans(const BackwardProblem& p, const Plans& s) {
    HIPGRAD_RETURN_IF_ERROR(detail::check_grid(s.tiles, p.x.n() * p.groups, "GroupNorm backward"));
    HIPGRAD_RETURN_IF_ERROR(detail::check_algorithm(p.algorithm, s.one_read));
    return detail::check_staged(p.algorithm, s.staged);
  }

  struct Buffers {
    detail::GradientSums* partials;
    detail::GradientSums* totals;
    detail::DataGradient* coefficients;
    unsigned long long* ready;  ///< the data blocks' flags for an in-grid fold (detail::TotalsFlags)
  };

  /// Bytes of x and of dy per thread, and the block sizes their registers allow
  /// (one_read_planes.hpp): 128 + 128 bytes need more than the 64 registers of a 1024-thread block.
  using OneRead = detail::OneReadKernels<T, detail::OneReadShape<16, 1024>, detail::OneReadShape<32, 1024>,
                                         detail::OneReadShape<64, 1024>, detail::OneReadShape<128, 640>>;

  static detail::OneReadPlan one_read_plan(const detail::Plan& pl, const BackwardProblem& p, const Args& a) {
    detail::OneReadPlan plan = OneRead::plan(p.algorithm, /*forward=*/false, pl, p.x, p.groups, {a.x, a.dy, a.dx});
    if (!plan.usable) return plan;
    int resident = 0;
    const auto count = [&](auto kernel, const auto&) {
      resident = remembered_resident_clusters(kernel, plan.threads, static_cast<unsigned>(plan.cluster), 0,
                                              [] { return hipSuccess; });  // static shared memory, portable clusters
      return hipSuccess;
    };
    (void)(p.activation == Activation::kSwish ? with_one_read_kernel<Activation::kSwish, true>(plan, count)
                                              : with_one_read_kernel<Activation::kIdentity, true>(plan, count));
    plan.fold_blocks = detail::one_read_fold_blocks(plan, resident, p.x.c());
    return plan;
  }

  /// Calls f(kernel, mapping) with the one-read backward kernel of `plan` (with fold blocks or
  /// without) and its mapping (rows of a channels-last unit or planes); returns its hipError_t as
  /// a Status.
  template <Activation kAct, bool kFold, typename F>
  static Status with_one_read_kernel(const detail::OneReadPlan& plan, F&& f) {
    return OneRead::visit(plan, [&](auto shape, auto split) {
      using S = decltype(shape);
      constexpr int kVc = detail::kOneReadChannelVector;
      const hipError_t e =
          plan.channels_last
              ? f(detail::backward_one_read_channels_last<T, TParam, kVc, S::kBytes / sizeof(T), S::kMaxThreads, kAct,
                                                          decltype(split)::value, kFold>,
                  plan.rows)
              : f(detail::backward_one_read_planes<T, TParam, kV, S::kBytes / 16, S::kMaxThreads, kAct, kFold>,
                  plan.planes);
      return status_from_hip(e, "launch of backward_one_read", __FILE__, __LINE__);
    });
  }

  static auto staged_kernel(const BackwardProblem& p) {
    return p.activation == Activation::kSwish ? detail::backward_staged_channels_last<T, TParam, Activation::kSwish>
                                              : detail::backward_staged_channels_last<T, TParam, Activation::kIdentity>;
  }

  static detail::StagedOp staged_op(const BackwardProblem& p) {
    const bool groups = p.activation == Activation::kSwish ? detail::kStagedGroupMeeting<Activation::kSwish>
                                                           : detail::kStagedGroupMeeting<Activation::kIdentity>;
    return groups ? detail::StagedOp::kBackwardGroups : detail::StagedOp::kBackwardChannels;
  }

  /// Whether the staged kernel meets over groups (kStagedGroupMeeting): then each block keeps the
  /// totals of its own rows, one row per block of a cluster per sample, and releases a flag for
  /// the grid's fold blocks once they are written (detail::TotalsFlags).
  static bool staged_group_meeting(const detail::StagedPlan& staged, const BackwardProblem& p) {
    return staged.usable && staged_op(p) == detail::StagedOp::kBackwardGroups;
  }

  /// "_fold<blocks>" where the grid folds dγ/dβ in blocks of its own (run_staged, run_one_read),
  /// else "".
  static std::string fold_name(const Plans& s, const BackwardProblem& p, bool dgamma) {
    const Index blocks = !dgamma ? 0
                         : s.staged.usable
                             ? (staged_group_meeting(s.staged, p) ? detail::staged_fold_blocks(s.staged, p.x.c()) : 0)
                             : s.one_read.fold_blocks;
    return blocks > 0 ? "_fold" + std::to_string(blocks) : "";
  }

  /// Rows of totals per sample.
  static std::size_t totals_parts(const detail::StagedPlan& staged, const BackwardProblem& p) {
    return staged_group_meeting(staged, p) ? static_cast<std::size_t>(staged.cluster()) : 1;
  }

  static detail::StagedPlan staged_plan(const Plan& pl, const BackwardProblem& p) {
    return detail::plan_staged<T>(p.algorithm, pl, p.x, p.groups, staged_op(p), staged_kernel(p));
  }

  /// dx and the per-(n, c) totals in one read of x and dy through shared memory, and dγ/dβ: by
  /// fold blocks in the same grid where it meets over groups and the GPU has room for them
  /// (detail::fold_in_grid), else by a kernel after it.
  static Status run_staged(const detail::StagedPlan& plan, const Plan& pl, const BackwardProblem& p, const Args& a,
                           const Buffers& b, hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), dys = detail::device_strides(p.dy),
                                dxs = detail::device_strides(p.dx);
    const auto kernel = staged_kernel(p);
    const Index fold_blocks = a.dgamma && staged_group_meeting(plan, p) ? detail::staged_fold_blocks(plan, p.x.c()) : 0;
    detail::TotalsFlags ready;
    if (fold_blocks > 0)
      ready = detail::TotalsFlags{b.ready, detail::next_totals_generation(),
                                  plan.rows.band_groups * pl.geometry.group_channels, plan.blocks()};
    HIPGRAD_RETURN_IF_ERROR(detail::launch_staged(*pl.device, kernel, plan, fold_blocks, stream, a.dy, dys, a.x, xs,
                                                  a.dx, dxs, pl.geometry, plan.rows, plan.layout, plan.stagger, a.mean,
                                                  a.rstd, a.gamma, a.beta, p.swish_beta, a.dgamma ? b.totals : nullptr,
                                                  ready, a.dgamma, a.dbeta));
    return a.dgamma && fold_blocks == 0
               ? launch_gamma_beta(pl.geometry, a, b.totals, static_cast<int>(totals_parts(plan, p)), stream)
               : Status::ok();
  }

  /// dx and the per-(n, c) totals in one read of x and dy, and dγ/dβ from the totals: by fold
  /// blocks in the same grid where the GPU holds it all at once (detail::one_read_fold_blocks),
  /// else by a kernel after it.
  template <Activation kAct>
  static Status run_one_read(const detail::OneReadPlan& plan, const Plan& pl, const BackwardProblem& p, const Args& a,
                             const Buffers& b, hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), dys = detail::device_strides(p.dy),
                                dxs = detail::device_strides(p.dx);
    detail::GradientSums* totals = a.dgamma ? b.totals : nullptr;
    const Index fold_blocks = a.dgamma ? plan.fold_blocks : 0;
    detail::TotalsFlags ready;
    if (fold_blocks > 0)
      ready = detail::TotalsFlags{
          b.ready, detail::next_totals_generation(),
          plan.channels_last ? plan.rows.band_groups * pl.geometry.group_channels : pl.geometry.group_channels,
          plan.blocks()};
    const auto blocks = static_cast<unsigned>(plan.blocks() + fold_blocks);
    const auto launch = [&](auto kernel, const auto& mapping) {
      return launch_clustered(kernel, blocks, plan.threads, static_cast<unsigned>(plan.cluster), stream, a.dy, dys, a.x,
                              xs, a.dx, dxs, pl.geometry, mapping, a.mean, a.rstd, a.gamma, a.beta, p.swish_beta,
                              totals, ready, a.dgamma, a.dbeta);
    };
    const Status launched = fold_blocks > 0 ? with_one_read_kernel<kAct, true>(plan, launch)
                                            : with_one_read_kernel<kAct, false>(plan, launch);
    HIPGRAD_RETURN_IF_ERROR(launched);
    return a.dgamma && fold_blocks == 0 ? launch_gamma_beta(pl.geometry, a, b.totals, 1, stream) : Status::ok();
  }

  /// dγ/dβ from `totals`, [N][parts][C] (backward_gamma_beta), once the grid before it has
  /// completed.
  static Status launch_gamma_beta(const detail::Geometry& g, const Args& a, const detail::GradientSums* totals,
                                  int parts, hipStream_t stream) {
    const unsigned threads = detail::gamma_beta_threads(g.n * parts);
    const auto blocks = static_cast<unsigned>(ceil_div(g.c, Index{detail::kGammaBetaChannels}));
    return status_from_hip(launch_dependent(detail::backward_gamma_beta<TParam>, blocks, threads, 0, stream, totals,
                                            parts, g, a.rstd, a.dgamma, a.dbeta),
                           "launch of backward_gamma_beta", __FILE__, __LINE__);
  }

  static Buffers carve(const Plan& pl, const detail::StagedPlan& staged, const BackwardProblem& p,
                       WorkspaceCarver& carver) {
    const std::size_t nc = static_cast<std::size_t>(p.x.n() * p.x.c());
    Buffers b;
    b.partials = carver.take<detail::GradientSums>(static_cast<std::size_t>(pl.tiles));
    b.totals = carver.take<detail::GradientSums>(nc * totals_parts(staged, p));
    b.coefficients = carver.take<detail::DataGradient>(nc);
    // The staged blocks' flags, or the one-read units' (at most one per group).
    const std::size_t units = static_cast<std::size_t>(p.x.n() * p.groups);
    const std::size_t staged_blocks =
        staged_group_meeting(staged, p) ? static_cast<std::size_t>(staged.blocks()) : std::size_t{0};
    b.ready = carver.take<unsigned long long>(staged_blocks > units ? staged_blocks : units);
    return b;
  }

  template <Activation kAct>
  static Status run_as(const Plan& pl, const BackwardProblem& p, const Args& a, const Buffers& b, hipStream_t stream) {
    HIPGRAD_RETURN_IF_ERROR(launch_sums<kAct>(pl, p, a, b, stream));
    const detail::Geometry& g = pl.geometry;
    HIPGRAD_RETURN_IF_ERROR(
        status_from_hip(launch_dependent(detail::backward_group_coefficients<TParam, kGroupThreads>,
                                         static_cast<unsigned>(p.x.n() * p.groups), kGroupThreads, 0, stream,
                                         b.partials, g, a.rstd, a.gamma, b.totals, a.dx ? b.coefficients : nullptr),
                        "launch of backward_group_coefficients", __FILE__, __LINE__));
    if (a.dgamma) HIPGRAD_RETURN_IF_ERROR(launch_gamma_beta(g, a, b.totals, 1, stream));
    return a.dx ? launch_data<kAct>(pl, p, a, b, stream) : Status::ok();
  }

  template <Activation kAct>
  static Status launch_sums(const Plan& pl, const BackwardProblem& p, const Args& a, const Buffers& b,
                            hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), dys = detail::device_strides(p.dy);
    return detail::visit_walk<T>(pl, [&](auto walk) {
      using W = decltype(walk);
      const unsigned blocks = static_cast<unsigned>(pl.blocks);
      if constexpr (W::kChannelsLast) {
        detail::backward_sums_channels_last<T, TParam, kThreads, W::kVector, kAct><<<blocks, kThreads, 0, stream>>>(
            a.dy, a.x, xs, pl.geometry, a.mean, a.rstd, a.gamma, a.beta, p.swish_beta, b.partials);
      } else {
        detail::backward_sums_planes<T, TParam, kThreads, W::kVector, W::kPacked, W::kPlaneThreads, kAct>
            <<<blocks, kThreads, 0, stream>>>(a.dy, dys, a.x, xs, pl.geometry, pl.tiles, a.mean, a.rstd, a.gamma,
                                              a.beta, p.swish_beta, b.partials);
      }
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("backward_sums");
      return Status::ok();
    });
  }

  template <Activation kAct>
  static Status launch_data(const Plan& pl, const BackwardProblem& p, const Args& a, const Buffers& b,
                            hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), dys = detail::device_strides(p.dy),
                                dxs = detail::device_strides(p.dx);
    return detail::visit_walk<T>(pl, [&](auto walk) {
      using W = decltype(walk);
      const unsigned blocks = static_cast<unsigned>(pl.blocks);
      hipError_t launched;
      if constexpr (W::kChannelsLast) {
        launched = launch_dependent(detail::backward_data_channels_last<T, TParam, kThreads, W::kVector, kAct>, blocks,
                                    kThreads, 0, stream, a.dy, a.x, a.dx, xs, pl.geometry, a.mean, a.rstd, a.gamma,
                                    a.beta, p.swish_beta, b.coefficients);
      } else {
        launched = launch_dependent(
            detail::backward_data_planes<T, TParam, kThreads, W::kVector, W::kPacked, W::kPlaneThreads, kAct>, blocks,
            kThreads, 0, stream, a.dy, dys, a.x, xs, a.dx, dxs, pl.geometry, pl.tiles, a.mean, a.rstd, a.gamma, a.beta,
            p.swish_beta, b.coefficients);
      }
      return status_from_hip(launched, "launch of backward_data", __FILE__, __LINE__);
    });
  }
};

template <typename T, typename TParam>
Status Backward<T, TParam>::can_implement(const BackwardProblem& p, const Args& a) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
  return check_plans(p, plans(p, a));
}

template <typename T, typename TParam>
std::size_t Backward<T, TParam>::workspace_size(const BackwardProblem& p) {
  if (!p.validate().is_ok()) return 0;
  return plans(p, with_dx_args()).workspace;
}

template <typename T, typename TParam>
Status Backward<T, TParam>::run(const BackwardProblem& p, const Args& a, void* workspace, std::size_t workspace_bytes,
                                hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
  const Plans s = plans(p, a);
  HIPGRAD_RETURN_IF_ERROR(check_plans(p, s));
  HIPGRAD_RETURN_IF_ERROR(check_workspace(s.workspace, workspace, workspace_bytes));  // workspace_size's bound
  WorkspaceCarver carver(workspace, workspace_bytes);
  const Buffers b = carve(s.tiles, s.staged, p, carver);
  if (s.staged.usable) return run_staged(s.staged, s.tiles, p, a, b, stream);
  if (s.one_read.usable) {
    if (p.activation == Activation::kSwish)
      return run_one_read<Activation::kSwish>(s.one_read, s.tiles, p, a, b, stream);
    return run_one_read<Activation::kIdentity>(s.one_read, s.tiles, p, a, b, stream);
  }
  if (p.activation == Activation::kSwish) return run_as<Activation::kSwish>(s.tiles, p, a, b, stream);
  return run_as<Activation::kIdentity>(s.tiles, p, a, b, stream);
}

template <typename T, typename TParam>
std::string Backward<T, TParam>::name(const BackwardProblem& p, const Args& a) {
  const Plans s = plans(p, a.dx || a.dgamma ? a : with_dx_args());
  return std::string("groupnorm_bwd_") + type_name<T>() + "_" + type_name<TParam>() + "_" +
         detail::path_name(s.tiles.path) + "_v" + std::to_string(s.tiles.vector) +
         (s.staged.usable ? detail::staged_name(s.staged) : detail::one_read_name(s.one_read)) +
         fold_name(s, p, a.dgamma != nullptr || a.dx == nullptr) + "_" + activation_name(p.activation);
}

}  // namespace hipgrad::groupnorm
