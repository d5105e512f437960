/// @file forward.hpp
/// @brief GroupNorm forward with optional fused Swish: y = act(γ·(x − μ)·rstd + β), saving
///        mean and rstd [N, G] in fp32 for the backward.
///
///   using Op = hipgrad::groupnorm::Forward<hipgrad::half, float>;   // fp16 data, fp32 γ/β
///   auto problem = hipgrad::groupnorm::ForwardProblem::packed({N, C, H, W}, G, /*channels_last=*/true);
///   Op::Args args{x, gamma, beta, y, mean, rstd};
///   HIPGRAD_RETURN_IF_ERROR(Op::can_implement(problem, args));
///   // workspace of Op::workspace_size(problem) bytes, then
///   HIPGRAD_RETURN_IF_ERROR(Op::run(problem, args, workspace, bytes, stream));
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/groupnorm/detail/forward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/launch_plan.hpp"
#include "hipgrad/ops/groupnorm/detail/l2_reread_planes.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

namespace hipgrad::groupnorm {

/// T: x and y (float, half, bfloat16). TParam: γ and β (T or float). Statistics are fp32.
template <typename T, typename TParam = T>
class Forward {
  static_assert(is_storage_type_v<T>, "GroupNorm data must be float, half or bfloat16");
  static_assert(std::is_same_v<TParam, T> || std::is_same_v<TParam, float>, "γ/β must be of the data type or float");

 public:
  struct Args {
    const T* x = nullptr;
    const TParam* gamma = nullptr;
    const TParam* beta = nullptr;
    T* y = nullptr;
    float* mean = nullptr;  ///< [N, G], optional
    float* rstd = nullptr;  ///< [N, G], optional
  };

  static Status can_implement(const ForwardProblem& p, const Args& a) {
    HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
    const Plan pl = plan(p, a);
    HIPGRAD_RETURN_IF_ERROR(detail::check_algorithm(p.algorithm, reread_plan(pl, p)));
    return detail::check_grid(pl, p.x.n() * p.groups, "GroupNorm forward");
  }

  static std::size_t workspace_size(const ForwardProblem& p) {
    if (!p.validate().is_ok()) return 0;
    const Plan pl = plan(p, Args{});
    detail::WorkspaceCarver three_launch(nullptr, 0), reread(nullptr, 0);
    carve(pl, p, three_launch);
    if (detail::reread_layout(pl, kV)) carve_reread(detail::reread_sizing(p.x, p.groups, kV, kRereadVectors), 0, reread);
    return three_launch.used() > reread.used() ? three_launch.used() : reread.used();
  }

  static Status run(const ForwardProblem& p, const Args& a, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream) {
    HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
    const Plan pl = plan(p, a);
    HIPGRAD_RETURN_IF_ERROR(detail::check_grid(pl, p.x.n() * p.groups, "GroupNorm forward"));
    const detail::RereadPlan reread = reread_plan(pl, p);
    HIPGRAD_RETURN_IF_ERROR(detail::check_algorithm(p.algorithm, reread));
    if (reread.usable) return run_reread(reread, p, a, workspace, workspace_bytes, stream);
    detail::WorkspaceCarver carver(workspace, workspace_bytes);
    const Buffers b = carve(pl, p, carver);
    HIPGRAD_RETURN_IF_ERROR(detail::check_workspace(carver.used(), workspace, workspace_bytes));
    HIPGRAD_RETURN_IF_ERROR(launch_moments(pl, p, a, b, stream));
    detail::forward_group_statistics<TParam, kStatThreads><<<static_cast<unsigned>(p.x.n() * p.groups), kStatThreads, 0, stream>>>(
        b.partials, pl.geometry, p.epsilon, a.gamma, a.beta, a.mean, a.rstd, b.affine);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("forward_group_statistics");
    return launch_apply(pl, p, a, b, stream);
  }

  static std::string name(const ForwardProblem& p) {
    const Plan pl = plan(p, Args{});
    const bool reread = reread_plan(pl, p).usable;
    return std::string("groupnorm_fwd_") + type_name<T>() + "_" + type_name<TParam>() + "_" + detail::path_name(pl.path) +
           "_v" + std::to_string(pl.vector) + (reread ? "_l2_reread" : "") + "_" + activation_name(p.activation);
  }

 private:
  static constexpr int kThreads = detail::kBlockThreads;
  static constexpr int kStatThreads = 128;
  static constexpr int kV = kVector16<T>;
  static constexpr int kRereadVectors = 8;  ///< vectors of x a lane holds: 4 KB per warp

  using RereadSync = detail::UnitSync<detail::TileMoments, detail::GroupStatistics>;
  using RereadKernel = decltype(&detail::forward_l2_reread_planes<T, TParam, kV, kRereadVectors, Activation::kIdentity>);

  static RereadKernel reread_kernel(Activation activation) {
    if (activation == Activation::kSwish) return &detail::forward_l2_reread_planes<T, TParam, kV, kRereadVectors, Activation::kSwish>;
    return &detail::forward_l2_reread_planes<T, TParam, kV, kRereadVectors, Activation::kIdentity>;
  }

  static RereadSync carve_reread(const detail::RereadTiling& t, Index lag, detail::WorkspaceCarver& carver) {
    return detail::carve_unit_sync<detail::TileMoments, detail::GroupStatistics>(t, lag, carver);
  }

  static detail::RereadPlan reread_plan(const detail::Plan& pl, const ForwardProblem& p) {
    return detail::make_reread_plan(p.algorithm, pl, p.x, p.groups, kV, kRereadVectors, reread_kernel(p.activation));
  }

  static Status run_reread(const detail::RereadPlan& plan, const ForwardProblem& p, const Args& a,
                             void* workspace, std::size_t workspace_bytes, hipStream_t stream) {
    detail::WorkspaceCarver carver(workspace, workspace_bytes);
    const RereadSync sync = carve_reread(plan.tiling, plan.lag, carver);
    HIPGRAD_RETURN_IF_ERROR(detail::check_workspace(carver.used(), workspace, workspace_bytes));
    HIPGRAD_RETURN_IF_ERROR(detail::clear_unit_sync(sync, plan.tiling, stream));
    reread_kernel(p.activation)<<<plan.blocks, detail::kRereadThreads, 0, stream>>>(
        a.x, detail::device_strides(p.x), a.y, detail::device_strides(p.y), plan.tiling.geometry, plan.tiling.tiles, a.gamma,
        a.beta, p.epsilon, p.swish_beta, a.mean, a.rstd, sync);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("forward_l2_reread_planes");
    return Status::ok();
  }

  using Plan = detail::Plan;

  static Status check_arguments(const ForwardProblem& p, const Args& a) {
    HIPGRAD_RETURN_IF_ERROR(p.validate());
    if (!a.x || !a.gamma || !a.beta || !a.y) return Status::invalid_argument("x, gamma, beta and y must not be null");
    const std::size_t stats = static_cast<std::size_t>(p.x.n() * p.groups) * sizeof(float);
    const std::size_t params = static_cast<std::size_t>(p.x.c()) * sizeof(TParam);
    const std::size_t x_bytes = static_cast<std::size_t>(p.x.element_space()) * sizeof(T);
    const std::size_t y_bytes = static_cast<std::size_t>(p.y.element_space()) * sizeof(T);
    const detail::MemoryRange outputs[] = {{a.y, y_bytes, "y"}, {a.mean, stats, "mean"}, {a.rstd, stats, "rstd"}};
    const detail::MemoryRange inputs[] = {{a.x, x_bytes, "x"}, {a.gamma, params, "gamma"}, {a.beta, params, "beta"}};
    return detail::check_outputs_disjoint(outputs, inputs);
  }
  struct Buffers {
    detail::Moments* partials;
    detail::Affine* affine;
  };

  static Plan plan(const ForwardProblem& p, const Args& a) {
    return detail::make_plan<T>(p.x, p.groups, &p.y, 1, {a.x, a.y});
  }

  static Buffers carve(const Plan& pl, const ForwardProblem& p, detail::WorkspaceCarver& carver) {
    Buffers b;
    b.partials = carver.take<detail::Moments>(static_cast<std::size_t>(pl.tiles));
    b.affine = carver.take<detail::Affine>(static_cast<std::size_t>(p.x.n() * p.x.c()));
    return b;
  }

  static Status launch_moments(const Plan& pl, const ForwardProblem& p, const Args& a, const Buffers& b, hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x);
    return detail::visit_walk<T>(pl, [&](auto walk) {
      using W = decltype(walk);
      const unsigned blocks = static_cast<unsigned>(pl.blocks);
      if constexpr (W::kChannelsLast) {
        detail::forward_moments_channels_last<T, kThreads, W::kVector><<<blocks, kThreads, 0, stream>>>(
            a.x, xs, pl.geometry, b.partials);
      } else {
        detail::forward_moments_planes<T, kThreads, W::kVector, W::kPacked, W::kPlaneThreads>
            <<<blocks, kThreads, 0, stream>>>(a.x, xs, pl.geometry, pl.tiles, b.partials);
      }
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("forward_moments");
      return Status::ok();
    });
  }

  static Status launch_apply(const Plan& pl, const ForwardProblem& p, const Args& a, const Buffers& b, hipStream_t stream) {
    if (p.activation == Activation::kSwish) return launch_apply_as<Activation::kSwish>(pl, p, a, b, stream);
    return launch_apply_as<Activation::kIdentity>(pl, p, a, b, stream);
  }

  template <Activation kAct>
  static Status launch_apply_as(const Plan& pl, const ForwardProblem& p, const Args& a, const Buffers& b, hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), ys = detail::device_strides(p.y);
    return detail::visit_walk<T>(pl, [&](auto walk) {
      using W = decltype(walk);
      const unsigned blocks = static_cast<unsigned>(pl.blocks);
      if constexpr (W::kChannelsLast) {
        detail::forward_apply_channels_last<T, kThreads, W::kVector, kAct><<<blocks, kThreads, 0, stream>>>(
            a.x, a.y, xs, pl.geometry, b.affine, p.swish_beta);
      } else {
        detail::forward_apply_planes<T, kThreads, W::kVector, W::kPacked, W::kPlaneThreads, kAct>
            <<<blocks, kThreads, 0, stream>>>(a.x, xs, a.y, ys, pl.geometry, pl.tiles, b.affine, p.swish_beta);
      }
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("forward_apply");
      return Status::ok();
    });
  }
};

}  // namespace hipgrad::groupnorm
