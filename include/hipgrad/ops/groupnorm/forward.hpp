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

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/groupnorm/detail/forward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/plan.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_plan.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

namespace hipgrad::groupnorm {

/// T: x and y (float, half, bfloat16). TParam: γ and β (T or float). Statistics are fp32.
template <typename T, typename TParam = T>
class Forward {
  static_assert(is_storage_type_v<T>, "GroupNorm data must be float, half or bfloat16");
  static_assert(std::is_same_v<TParam, T> || std::is_same_v<TParam, float>, "γ/β must be of the data type or float");

 public:
  using Problem = ForwardProblem;

  struct Args {
    const T* x = nullptr;
    const TParam* gamma = nullptr;
    const TParam* beta = nullptr;
    T* y = nullptr;
    float* mean = nullptr;  ///< [N, G], optional
    float* rstd = nullptr;  ///< [N, G], optional
  };

  // The members that reach the kernels (launches, and the plans' occupancy queries) are defined
  // after the class, not inline, so that an `extern template` declaration of the op keeps its
  // kernels out of the translation units that only call it.
  static Status can_implement(const ForwardProblem& p, const Args& a);

  /// The three-pass workspace, whichever path a call takes (the others need none): the tile count
  /// depends on the problem and the device only, not on the pointers.
  static std::size_t workspace_size(const ForwardProblem& p);

  static Status run(const ForwardProblem& p, const Args& a, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream);

  /// The path run() takes for these arguments (default: 16-byte aligned pointers).
  static std::string name(const ForwardProblem& p, const Args& a = Args{});

 private:
  static constexpr int kThreads = detail::kBlockThreads;
  static constexpr int kStatThreads = 128;
  static constexpr int kV = kVector16<T>;
  /// Bytes of x per thread, and the block sizes their registers allow (one_read_planes_kernels.hpp).
  using OneRead = detail::OneReadKernels<T, detail::OneReadShape<16, 1024>, detail::OneReadShape<32, 1024>,
                                         detail::OneReadShape<64, 1024>, detail::OneReadShape<128, 1024>>;

  static detail::OneReadPlan one_read_plan(const detail::Plan& pl, const ForwardProblem& p, const Args& a) {
    return OneRead::plan(p.algorithm, /*forward=*/true, pl, p.x, p.groups, {a.x, a.y});
  }

  static auto staged_kernel(const ForwardProblem& p) {
    return p.activation == Activation::kSwish ? detail::forward_staged_channels_last<T, TParam, Activation::kSwish>
                                              : detail::forward_staged_channels_last<T, TParam, Activation::kIdentity>;
  }

  static detail::StagedPlan staged_plan(const detail::Plan& pl, const ForwardProblem& p) {
    return detail::plan_staged<T>(p.algorithm, pl, p.x, p.groups, detail::StagedOp::kForward, staged_kernel(p));
  }

  static Status run_staged(const detail::StagedPlan& plan, const detail::Plan& pl, const ForwardProblem& p,
                           const Args& a, hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), ys = detail::device_strides(p.y);
    const auto kernel = staged_kernel(p);
    return detail::launch_staged(*pl.device, kernel, plan, 0, stream, a.x, xs, a.y, ys, pl.geometry, plan.rows,
                                 plan.layout, plan.stagger, a.gamma, a.beta, p.epsilon, p.swish_beta, a.mean, a.rstd);
  }

  static Status run_one_read(const detail::OneReadPlan& plan, const detail::Plan& pl, const ForwardProblem& p,
                             const Args& a, hipStream_t stream) {
    if (p.activation == Activation::kSwish) return run_one_read_as<Activation::kSwish>(plan, pl, p, a, stream);
    return run_one_read_as<Activation::kIdentity>(plan, pl, p, a, stream);
  }

  template <Activation kAct>
  static Status run_one_read_as(const detail::OneReadPlan& plan, const detail::Plan& pl, const ForwardProblem& p,
                                const Args& a, hipStream_t stream) {
    const auto blocks = static_cast<unsigned>(plan.blocks()), cluster = static_cast<unsigned>(plan.cluster);
    const detail::DeviceStrides xs = detail::device_strides(p.x), ys = detail::device_strides(p.y);
    return OneRead::visit(plan, [&](auto shape, auto split) {
      using S = decltype(shape);
      constexpr int kVc = detail::kOneReadChannelVector;
      const hipError_t launched =
          plan.channels_last
              ? launch_clustered(detail::forward_one_read_channels_last<T, TParam, kVc, S::kBytes / sizeof(T),
                                                                        S::kMaxThreads, kAct, decltype(split)::value>,
                                 blocks, plan.threads, cluster, stream, a.x, xs, a.y, ys, pl.geometry, plan.rows,
                                 a.gamma, a.beta, p.epsilon, p.swish_beta, a.mean, a.rstd)
              : launch_clustered(detail::forward_one_read_planes<T, TParam, kV, S::kBytes / 16, S::kMaxThreads, kAct>,
                                 blocks, plan.threads, cluster, stream, a.x, xs, a.y, ys, pl.geometry, plan.planes,
                                 a.gamma, a.beta, p.epsilon, p.swish_beta, a.mean, a.rstd);
      return status_from_hip(launched, "launch of forward_one_read", __FILE__, __LINE__);
    });
  }

  using Plan = detail::Plan;

  /// Everything run() decides: the tiling of the three-pass launches, the one-read and staged
  /// plans (at most one usable decides the path) and the three-pass workspace.
  struct Plans {
    Plan tiles;
    detail::OneReadPlan one_read;
    detail::StagedPlan staged;
    std::size_t workspace = 0;
  };

  /// The call's plans, made once per problem, alignment and device on this thread.
  static Plans plans(const ForwardProblem& p, const Args& a) {
    const DeviceInfo& device = current_device_info();
    const detail::OpPlanKey key = detail::plan_key(device, p, {&p.x, &p.y}, {a.x, a.y});
    thread_local RecentPlans<detail::OpPlanKey, Plans> recent;
    return recent.find_or_make(key, [&] { return make_plans(device, p, a); });
  }

  static Plans make_plans(const DeviceInfo& device, const ForwardProblem& p, const Args& a) {
    Plans s;
    s.tiles = detail::make_plan<T>(device, p.x, p.groups, &p.y, 1, {a.x, a.y});
    s.one_read = one_read_plan(s.tiles, p, a);
    s.staged = staged_plan(s.tiles, p);
    WorkspaceCarver three_pass(nullptr, 0);
    carve(s.tiles, p, three_pass);
    s.workspace = three_pass.used();
    return s;
  }

  static Status check_plans(const ForwardProblem& p, const Plans& s) {
    HIPGRAD_RETURN_IF_ERROR(detail::check_grid(s.tiles, p.x.n() * p.groups, "GroupNorm forward"));
    HIPGRAD_RETURN_IF_ERROR(detail::check_algorithm(p.algorithm, s.one_read));
    return detail::check_staged(p.algorithm, s.staged);
  }

  static Status check_arguments(const ForwardProblem& p, const Args& a) {
    HIPGRAD_RETURN_IF_ERROR(p.validate());
    if (!a.x || !a.gamma || !a.beta || !a.y) return Status::invalid_argument("x, gamma, beta and y must not be null");
    const std::size_t stats = static_cast<std::size_t>(p.x.n() * p.groups) * sizeof(float);
    const std::size_t params = static_cast<std::size_t>(p.x.c()) * sizeof(TParam);
    const std::size_t x_bytes = static_cast<std::size_t>(p.x.element_space()) * sizeof(T);
    const std::size_t y_bytes = static_cast<std::size_t>(p.y.element_space()) * sizeof(T);
    constexpr std::size_t kData = sizeof(T), kParam = sizeof(TParam), kStat = sizeof(float);
    const MemoryRange outputs[] = {
        {a.y, y_bytes, "y", kData}, {a.mean, stats, "mean", kStat}, {a.rstd, stats, "rstd", kStat}};
    const MemoryRange inputs[] = {
        {a.x, x_bytes, "x", kData}, {a.gamma, params, "gamma", kParam}, {a.beta, params, "beta", kParam}};
    return check_memory_ranges(outputs, inputs);
  }
  struct Buffers {
    detail::Moments* partials;
    detail::Affine* affine;
  };

  static Buffers carve(const Plan& pl, const ForwardProblem& p, WorkspaceCarver& carver) {
    Buffers b;
    b.partials = carver.take<detail::Moments>(static_cast<std::size_t>(pl.tiles));
    b.affine = carver.take<detail::Affine>(static_cast<std::size_t>(p.x.n() * p.x.c()));
    return b;
  }

  static Status launch_moments(const Plan& pl, const ForwardProblem& p, const Args& a, const Buffers& b,
                               hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x);
    return detail::visit_walk<T>(pl, [&](auto walk) {
      using W = decltype(walk);
      const unsigned blocks = static_cast<unsigned>(pl.blocks);
      if constexpr (W::kChannelsLast) {
        detail::forward_moments_channels_last<T, kThreads, W::kVector>
            <<<blocks, kThreads, 0, stream>>>(a.x, xs, pl.geometry, b.partials);
      } else {
        detail::forward_moments_planes<T, kThreads, W::kVector, W::kPacked, W::kPlaneThreads>
            <<<blocks, kThreads, 0, stream>>>(a.x, xs, pl.geometry, pl.tiles, b.partials);
      }
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("forward_moments");
      return Status::ok();
    });
  }

  static Status launch_apply(const Plan& pl, const ForwardProblem& p, const Args& a, const Buffers& b,
                             hipStream_t stream) {
    if (p.activation == Activation::kSwish) return launch_apply_as<Activation::kSwish>(pl, p, a, b, stream);
    return launch_apply_as<Activation::kIdentity>(pl, p, a, b, stream);
  }

  template <Activation kAct>
  static Status launch_apply_as(const Plan& pl, const ForwardProblem& p, const Args& a, const Buffers& b,
                                hipStream_t stream) {
    const detail::DeviceStrides xs = detail::device_strides(p.x), ys = detail::device_strides(p.y);
    return detail::visit_walk<T>(pl, [&](auto walk) {
      using W = decltype(walk);
      const unsigned blocks = static_cast<unsigned>(pl.blocks);
      hipError_t launched;
      if constexpr (W::kChannelsLast) {
        launched = launch_dependent(detail::forward_apply_channels_last<T, kThreads, W::kVector, kAct>, blocks,
                                    kThreads, 0, stream, a.x, a.y, xs, pl.geometry, b.affine, p.swish_beta);
      } else {
        launched = launch_dependent(
            detail::forward_apply_planes<T, kThreads, W::kVector, W::kPacked, W::kPlaneThreads, kAct>, blocks, kThreads,
            0, stream, a.x, xs, a.y, ys, pl.geometry, pl.tiles, b.affine, p.swish_beta);
      }
      return status_from_hip(launched, "launch of forward_apply", __FILE__, __LINE__);
    });
  }
};

template <typename T, typename TParam>
Status Forward<T, TParam>::can_implement(const ForwardProblem& p, const Args& a) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
  return check_plans(p, plans(p, a));
}

template <typename T, typename TParam>
std::size_t Forward<T, TParam>::workspace_size(const ForwardProblem& p) {
  if (!p.validate().is_ok()) return 0;
  return plans(p, Args{}).workspace;
}

template <typename T, typename TParam>
Status Forward<T, TParam>::run(const ForwardProblem& p, const Args& a, void* workspace, std::size_t workspace_bytes,
                               hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(p, a));
  const Plans s = plans(p, a);
  HIPGRAD_RETURN_IF_ERROR(check_plans(p, s));
  HIPGRAD_RETURN_IF_ERROR(check_workspace(s.workspace, workspace, workspace_bytes));  // whichever path runs
  if (s.staged.usable) return run_staged(s.staged, s.tiles, p, a, stream);
  if (s.one_read.usable) return run_one_read(s.one_read, s.tiles, p, a, stream);
  WorkspaceCarver carver(workspace, workspace_bytes);
  const Buffers b = carve(s.tiles, p, carver);
  HIPGRAD_RETURN_IF_ERROR(launch_moments(s.tiles, p, a, b, stream));
  HIPGRAD_RETURN_IF_ERROR(
      status_from_hip(launch_dependent(detail::forward_group_statistics<T, TParam, kStatThreads>,
                                       static_cast<unsigned>(p.x.n() * p.groups), kStatThreads, 0, stream, b.partials,
                                       s.tiles.geometry, p.epsilon, a.gamma, a.beta, a.mean, a.rstd, b.affine),
                      "launch of forward_group_statistics", __FILE__, __LINE__));
  return launch_apply(s.tiles, p, a, b, stream);
}

template <typename T, typename TParam>
std::string Forward<T, TParam>::name(const ForwardProblem& p, const Args& a) {
  const Plans s = plans(p, a);
  return std::string("groupnorm_fwd_") + type_name<T>() + "_" + type_name<TParam>() + "_" +
         detail::path_name(s.tiles.path) + "_v" + std::to_string(s.tiles.vector) +
         (s.staged.usable ? detail::staged_name(s.staged) : detail::one_read_name(s.one_read)) + "_" +
         activation_name(p.activation);
}

}  // namespace hipgrad::groupnorm
