/// @file backward_plan.hpp
/// @brief Host: the fused GroupNorm backward's plans — the three-pass tiling, the one-read and
///        staged plans (the usable one decides the path), the workspace and its carve-up — made
///        once per problem, alignment, outputs wanted and device on the calling thread.
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
#include "hipgrad/ops/groupnorm/detail/plan.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_plan.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

namespace hipgrad::groupnorm::detail {

/// The arguments of groupnorm::Backward<T, TParam>.
template <typename T, typename TParam>
struct BackwardArgs {
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

/// Backward<T, TParam>'s planning.
template <typename T, typename TParam>
struct BackwardPlanner {
  using Args = BackwardArgs<T, TParam>;
  static constexpr int kThreads = detail::kBlockThreads;
  static constexpr int kGroupThreads = 128;
  static constexpr int kV = kVector16<T>;

  using Plan = detail::Plan;

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
  /// (one_read_planes_kernels.hpp): 128 + 128 bytes need more than the 64 registers of a 1024-thread block.
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
};

}  // namespace hipgrad::groupnorm::detail
