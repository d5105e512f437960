/// @file launch.hpp
/// @brief Host: backward-weight's launches of a plan (backward_weight/plan.hpp) — the grouped
///        gather GEMM over groups and splits, then the splits' ordered reduction; the box path's
///        launch is WeightBoxPath::run, the direct kernels' direct::launch_backward_weight, and
///        packed groups are the caller's (they run the op on the packed problem).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/backward_weight/plan.hpp"
#include "hipgrad/ops/conv/direct/launch.hpp"
#include "hipgrad/gemm/device/launcher.hpp"

namespace hipgrad::conv::detail {

/// The gather path's launch of every group and split; with several splits their fp32 sums go to
/// the workspace and are reduced in split order.
template <typename T, int NDim, typename Cfg, bool kVectors>
Status launch_weight_splits(const Problem<NDim>& problem, const T* x, const T* dy, T* dw, int splits, void* workspace,
                            std::size_t bytes, hipStream_t stream) {
  using Planner = WeightPlanner<T, NDim, Cfg>;
  using Launcher = typename Planner::template GatherLauncher<kVectors>;
  float* split_sums = splits > 1 ? reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) +
                                                            Planner::template split_sums_offset<kVectors>(problem))
                                 : nullptr;
  const auto problems = backward_weight_sub_problems<T, NDim, kVectors>(problem, x, dy, dw, splits, split_sums);
  const gemm::GroupedGemmPlan plan = Launcher::plan(problems.data(), static_cast<int>(problems.size()),
                                                    gemm_request<T>(problem), current_device_info());
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  HIPGRAD_RETURN_IF_ERROR(
      Launcher::launch(plan, problems.data(), static_cast<int>(problems.size()), workspace, bytes, stream));
  if (splits == 1) return Status::ok();
  return gemm::launch_split_k_reduction(split_sums, splits, dw_store<T, NDim, kVectors>(problem, dw), stream);
}

/// Launches a plan whose status is ok and whose route is neither kPacked nor kStaged, on a workspace checked
/// against the route's needs.
template <typename T, int NDim, typename Cfg>
Status launch_weight_plan(const typename WeightPlanner<T, NDim, Cfg>::Plan& plan, const Problem<NDim>& problem,
                          const T* x, const T* dy, T* dw, void* workspace, std::size_t bytes, hipStream_t stream) {
  switch (plan.route) {
    case WeightRoute::kDirect:
      if (reinterpret_cast<std::uintptr_t>(workspace) % alignof(float) != 0)
        return Status::invalid_argument("the workspace must be aligned to 4 bytes (it holds fp32 sums)");
      return direct::launch_backward_weight(plan.direct, x, dy, dw, static_cast<float*>(workspace), stream);
    case WeightRoute::kUnfolded:
      return launch_unfolded_weight<T, NDim, Cfg>(plan.unfolded, plan.splits, problem, x, dy, dw, workspace, stream);
    case WeightRoute::kBoxes:
      return WeightPlanner<T, NDim, Cfg>::Boxes::run(problem, x, dy, dw, plan.boxes, workspace, stream);
    case WeightRoute::kGathered:
      return plan.vectors
                 ? launch_weight_splits<T, NDim, Cfg, true>(problem, x, dy, dw, plan.splits, workspace, bytes, stream)
                 : launch_weight_splits<T, NDim, Cfg, false>(problem, x, dy, dw, plan.splits, workspace, bytes, stream);
    case WeightRoute::kPacked:
    case WeightRoute::kStaged: break;
  }
  return Status::not_supported("packed groups and staged tensors run the op on their own problem");
}

}  // namespace hipgrad::conv::detail
