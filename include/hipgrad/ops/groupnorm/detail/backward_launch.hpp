/// @file backward_launch.hpp
/// @brief Host: the fused GroupNorm backward's launches of a plan (backward_plan.hpp) — the
///        staged and one-read kernels (with their in-grid fold or a dγ/dβ kernel after them) and
///        the three-pass sums, coefficients, dγ/dβ and dx.
#pragma once

#include <cstddef>

#include "hipgrad/core/cluster.hpp"
#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/ops/groupnorm/detail/backward_plan.hpp"

namespace hipgrad::groupnorm::detail {

/// Backward<T, TParam>'s launches.
template <typename T, typename TParam>
struct BackwardLaunches {
  using Planner = BackwardPlanner<T, TParam>;
  using Args = BackwardArgs<T, TParam>;
  using Buffers = typename Planner::Buffers;
  using Plan = detail::Plan;
  static constexpr int kThreads = Planner::kThreads;
  static constexpr int kGroupThreads = Planner::kGroupThreads;
  static constexpr int kV = Planner::kV;

  /// dx and the per-(n, c) totals in one read of x and dy through shared memory, and dγ/dβ: by
  /// fold blocks in the same grid where it meets over groups and the GPU has room for them
  /// (detail::fold_in_grid), else by a kernel after it.
  static Status run_staged(const detail::StagedPlan& plan, const Plan& pl, const BackwardProblem& p, const Args& a,
                           const Buffers& b, hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), dys = detail::device_strides(p.dy),
                                dxs = detail::device_strides(p.dx);
    const auto kernel = Planner::staged_kernel(p);
    const Index fold_blocks =
        a.dgamma && Planner::staged_group_meeting(plan, p) ? detail::staged_fold_blocks(plan, p.x.c()) : 0;
    detail::TotalsFlags ready;
    if (fold_blocks > 0)
      ready = detail::TotalsFlags{b.ready, detail::next_totals_generation(),
                                  plan.rows.band_groups * pl.geometry.group_channels, plan.blocks()};
    HIPGRAD_RETURN_IF_ERROR(detail::launch_staged(*pl.device, kernel, plan, fold_blocks, stream, a.dy, dys, a.x, xs,
                                                  a.dx, dxs, pl.geometry, plan.rows, plan.layout, plan.stagger, a.mean,
                                                  a.rstd, a.gamma, a.beta, p.swish_beta, a.dgamma ? b.totals : nullptr,
                                                  ready, a.dgamma, a.dbeta));
    return a.dgamma && fold_blocks == 0
               ? launch_gamma_beta(pl.geometry, a, b.totals, static_cast<int>(Planner::totals_parts(plan, p)), stream)
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
    const Status launched = fold_blocks > 0 ? Planner::template with_one_read_kernel<kAct, true>(plan, launch)
                                            : Planner::template with_one_read_kernel<kAct, false>(plan, launch);
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

}  // namespace hipgrad::groupnorm::detail
