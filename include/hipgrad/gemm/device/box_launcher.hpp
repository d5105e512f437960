/// @file box_launcher.hpp
/// @brief The launch of the box kernel (kernel/box_kernel.hpp) over grouped sub-problems whose
///        operands copy their tiles by TMA from maps of up to five dimensions, and the check of
///        whether it can run.
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/collective/box_producer.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"
#include "hipgrad/gemm/device/launch_core.hpp"
#include "hipgrad/gemm/device/tensor_map.hpp"
#include "hipgrad/gemm/kernel/box_kernel.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"

namespace hipgrad::gemm {

/// Why grouped_box_tile_gemm cannot run Config Cfg on operands A and B on the current device
/// (null where it can): a configuration the TMA kernel runs, a CUDA build whose code for this
/// device is sm_90a, a driver with tensor maps, and the shared memory the device allows.
template <typename Cfg, typename OperandA, typename OperandB>
const char* box_kernel_blocker() {
  if constexpr (!tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    return "its tiles are not ones the TMA kernel runs";
  } else {
#if defined(HIPGRAD_BACKEND_CUDA)
    const DeviceInfo& device = current_device_info();
    if (!device.known || !device_runs_wgmma(device.device)) return detail::warp_specialised_blocker(0, device);
    if (detail::tensor_map_encoder() == nullptr) return "the driver has no tensor maps";
    return detail::shared_memory_blocker(box_kernel_shared_bytes<Cfg, OperandA, OperandB>(), device);
#else
    return "TMA exists in CUDA builds only";
#endif
  }
}

#if defined(HIPGRAD_BACKEND_CUDA)

/// Launches grouped_box_tile_gemm over `count` sub-problems that read the `map_count` tensor maps
/// `maps`: the sub-problems, their item starts and the maps go to the kernel's parameters or to
/// `workspace` (grouped_tail_workspace_bytes of them; the maps at grouped_tail_offset, where the
/// operands must point) in one copy on `stream` (stage_grouped_problems).
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
Status launch_grouped_box_gemm(const SubProblem<OperandA, OperandB, Epilogue>* problems, int count,
                               const TensorMap* maps, int map_count, void* workspace, std::size_t bytes,
                               const DeviceInfo& device, hipStream_t stream) {
  using Problem = SubProblem<OperandA, OperandB, Epilogue>;
  if constexpr (!tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    (void)problems, (void)count, (void)maps, (void)map_count, (void)workspace, (void)bytes, (void)device, (void)stream;
    return Status::not_supported("the TMA kernel does not run this configuration in these layouts");
  } else {
    const int shared = box_kernel_shared_bytes<Cfg, OperandA, OperandB>();
    if (const char* blocker = detail::warp_specialised_blocker(shared, device)) return Status::not_supported(blocker);
    const std::size_t map_bytes = static_cast<std::size_t>(map_count) * sizeof(CUtensorMap);
    HIPGRAD_RETURN_IF_ERROR(check_workspace(grouped_tail_workspace_bytes<Problem>(count, map_bytes), workspace, bytes));
    std::vector<GroupedExtent> extents(static_cast<std::size_t>(count));
    for (int g = 0; g < count; ++g)
      extents[static_cast<std::size_t>(g)] = {problems[g].a.mn_size(), problems[g].b.mn_size()};
    const std::vector<long long> starts = grouped_tile_starts(extents, Cfg::kBlockM, Cfg::kBlockN);
    if (starts.back() > INT_MAX) return Status::not_supported("more than 2^31 - 1 output tiles over the sub-problems");
    if (starts.back() == 0) return Status::ok();
    GroupedProblems<OperandA, OperandB, Epilogue> staged{};
    HIPGRAD_RETURN_IF_ERROR(
        stage_grouped_problems(problems, count, starts, workspace, stream, &staged, maps, map_bytes));
    return with_table_place(staged.in_parameters, [&](auto in) {
      return detail::launch_tile_kernel(grouped_box_tile_gemm<Cfg, OperandA, OperandB, Epilogue, decltype(in)::value>,
                                        "grouped_box_tile_gemm", dim3(detail::persistent_blocks(starts.back(), device)),
                                        tma_kernel_threads<Cfg>(), shared, stream, staged);
    });
  }
}

#else

/// No TMA in this backend: the boxed launch is refused, with the reason.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
Status launch_grouped_box_gemm(const SubProblem<OperandA, OperandB, Epilogue>*, int, const TensorMap*, int, void*,
                               std::size_t, const DeviceInfo&, hipStream_t) {
  return Status::not_supported("TMA exists in CUDA builds only");
}

#endif  // HIPGRAD_BACKEND_CUDA

}  // namespace hipgrad::gemm
