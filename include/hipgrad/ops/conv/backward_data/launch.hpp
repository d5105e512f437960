/// @file launch.hpp
/// @brief Host: backward-data's launches of a plan (backward_data/plan.hpp) — the box path's maps
///        and sub-problems, the grouped gather GEMM's sub-problems, the plain GEMM, the direct
///        kernels; packed groups are the caller's (they run the op on the packed problem).
#pragma once

#include <cstddef>
#include <vector>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/backward_data/plan.hpp"
#include "hipgrad/ops/conv/direct/launch.hpp"
#include "hipgrad/gemm/device/box_launcher.hpp"

namespace hipgrad::conv::detail {

/// The box path with configuration TileCfg: the maps encoded into the workspace behind the
/// sub-problem table, then one grouped launch.
template <typename T, int NDim, typename TileCfg>
Status launch_data_boxes(const Problem<NDim>& problem, const T* dy, const T* w, T* dx, void* workspace,
                         std::size_t bytes, hipStream_t stream) {
  if constexpr (TileCfg::kBlockK * sizeof(T) == kTmaRowBytes) {
    using Plan = gemm::WgmmaPlan<TileCfg, DyBoxes<T, NDim>, WBoxes<T, NDim>>;
    const int count = static_cast<int>(problem.params.G * static_cast<Index>(backward_data_phases(problem).size()));
    auto* maps_on_device =
        static_cast<unsigned char*>(workspace) + gemm::grouped_tail_offset<BoxSubProblem<T, NDim>>(count);
    const BoxPlan<T, NDim> plan = box_plan<T, NDim>(problem, dx, maps_on_device, TileCfg::kBlockM, TileCfg::kBlockN,
                                                    Plan::TileB::Layout::kPanelBytes);
    static_assert(sizeof(gemm::TensorMap) == kTensorMapBytes, "the workspace holds 128-byte tensor maps");
    std::vector<gemm::TensorMap> maps(plan.maps.size());
    for (std::size_t i = 0; i < maps.size(); ++i) {
      const void* base = i == 0 ? static_cast<const void*>(w) : static_cast<const void*>(dy);
      HIPGRAD_RETURN_IF_ERROR(gemm::encode_tensor_map_shape<T>(plan.maps[i], base, &maps[i]));
    }
    return gemm::launch_grouped_box_gemm<TileCfg>(plan.problems.data(), count, maps.data(),
                                                  static_cast<int>(maps.size()), workspace, bytes,
                                                  current_device_info(), stream);
  } else {
    (void)problem, (void)dy, (void)w, (void)dx, (void)workspace, (void)bytes, (void)stream;
    return Status::not_supported("algorithm tma_boxes: tiles that are not 128-byte rows");
  }
}

/// Launches a plan whose status is ok and whose route is neither kPacked nor kStaged, on a workspace checked
/// against plan.workspace.
template <typename T, int NDim, typename Tiles>
Status launch_data_plan(const typename DataPlanner<T, NDim, Tiles>::Plan& plan, const Problem<NDim>& problem,
                        const T* dy, const T* w, T* dx, void* workspace, std::size_t bytes, hipStream_t stream) {
  using Planner = DataPlanner<T, NDim, Tiles>;
  switch (plan.route) {
    case DataRoute::kDirect: return direct::launch_backward_data(plan.direct, dy, w, dx, stream);
    case DataRoute::kBoxes:
      return Tiles::with_box_tile(plan.tile, [&](auto cfg) {
        return launch_data_boxes<T, NDim, decltype(cfg)>(problem, dy, w, dx, workspace, bytes, stream);
      });
    case DataRoute::kUnfolded:
      return launch_unfolded_data<T, NDim, typename Tiles::Wide>(plan.unfolded, problem, dy, w, dx, workspace, stream);
    case DataRoute::kPlainGemm:
      return PlainGemmRunner<T, typename Tiles::Wide>::launch(plan.plain, plain_gemm(problem, dy, w, dx), stream);
    case DataRoute::kGathered:
      return Planner::with_gather_launcher(plan, [&](auto vectors, auto launcher) {
        using Launcher = decltype(launcher);
        const auto problems = backward_data_sub_problems<T, NDim, decltype(vectors)::value>(problem, dy, w, dx);
        return Launcher::launch(plan.gathered, problems.data(), static_cast<int>(problems.size()), workspace, bytes,
                                stream);
      });
    case DataRoute::kPacked:
    case DataRoute::kStaged: break;
  }
  return Status::not_supported("packed groups and staged tensors run the op on their own problem");
}

}  // namespace hipgrad::conv::detail
