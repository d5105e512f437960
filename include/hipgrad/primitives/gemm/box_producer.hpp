/// @file box_producer.hpp
/// @brief The warp-specialised kernel over grouped sub-problems whose operands copy their own
///        tiles by TMA from maps of up to five dimensions (a convolution's operands, box by box):
///        per K tile one producer warp announces the stage's bytes, and its lanes issue the
///        operands' copies, one each.
///
/// A box operand has Element, kKContiguous, mn_size() and k_size() as a loader has, and
///   const void* map;                          // its CUtensorMap, in device memory, written
///                                             // before the launch (the producer acquires it)
///   int tile_bytes() const;                   // what its copies of one tile bring
///   int copies() const;                       // copies a tile (A's and B's together ≤ 32)
///   void load_copy(int i, char* tile, int mn_base, int k_base, std::uint64_t* barrier) const;
///                                             // device: copy i of the tile
/// Copies count whole boxes whatever part lies outside the tensor (zero-filled), so the stage's
/// barrier expects the same bytes for every K tile.
#pragma once

#include <climits>
#include <cstdint>
#include <vector>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/primitives/gemm/grouped_launcher.hpp"
#include "hipgrad/primitives/gemm/grouped_tiles.hpp"
#include "hipgrad/primitives/gemm/tma.hpp"
#include "hipgrad/primitives/gemm/tma_mainloop.hpp"

namespace hipgrad::gemm {

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

template <typename Cfg, typename OperandA, typename OperandB>
struct BoxTmaProducer {
  static constexpr int kRegisters = 40;
  static constexpr int kArrivals = 1;
  static constexpr bool kFenceStages = false;
  static constexpr int kSharedBytes = 0;
  using Plan = WgmmaPlan<Cfg, OperandA, OperandB>;

  /// One warp: lane i issues copy i of the stage (A's, then B's), so that the copies'
  /// coordinates (divisions by the boxes' grid) are worked out side by side rather than one
  /// after another by one thread. A copy may land before lane 0's arrival announces its bytes:
  /// the barrier's phase cannot complete before that arrival.
  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const Schedule& schedule, int thread) {
    if (thread >= 32) return;
    const int lane = thread;
    int bytes = 0;
    for_each_free_stage<Cfg>(
        ring, schedule,
        [&](const OperandA& a, const OperandB& b, int, int) {
          tma_acquire_map(static_cast<const CUtensorMap*>(a.map));
          tma_acquire_map(static_cast<const CUtensorMap*>(b.map));
          bytes = a.tile_bytes() + b.tile_bytes();
        },
        [&](const OperandA& a, const OperandB& b, int s, int m_base, int n_base, int k) {
          if (lane == 0) mbarrier_arrive_expect_bytes(&ring.full[s], bytes);
          const int copies_a = a.copies();
          if (lane < copies_a) {
            a.load_copy(lane, ring.stage(s), m_base, k, &ring.full[s]);
          } else if (lane < copies_a + b.copies()) {
            b.load_copy(lane - copies_a, ring.stage(s) + Plan::TileA::kBytes, n_base, k, &ring.full[s]);
          }
        });
  }
};

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

/// Why grouped_box_tile_gemm cannot run Config Cfg on operands A and B on the current device
/// (null where it can): a configuration the TMA kernel runs, a CUDA build whose code for this
/// device is sm_90a, a driver with tensor maps, and the shared memory the device allows.
template <typename Cfg, typename OperandA, typename OperandB>
const char* box_kernel_blocker() {
  if constexpr (!tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    return "its tiles are not ones the TMA kernel runs";
  } else {
#if defined(HIPGRAD_BACKEND_CUDA)
    using T = typename OperandA::Element;
    const DeviceInfo& device = current_device_info();
    if (!device.known || !device_runs_wgmma(device.device))
      return "the code loaded for this device was not compiled for sm_90a";
    if (detail::tensor_map_encoder() == nullptr) return "the driver has no tensor maps";
    if (static_cast<std::size_t>(tma_kernel_shared_bytes<Cfg, T>()) > device.shared_per_block_opt_in) {
      return "more shared memory per block than the device allows";
    }
    return nullptr;
#else
    return "TMA exists in CUDA builds only";
#endif
  }
}

#if defined(HIPGRAD_BACKEND_CUDA)

/// The warp-specialised kernel over grouped sub-problems of box operands: the persistent grid,
/// threads and shared memory (tma_kernel_shared_bytes) of the TMA kernel, no K split.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
__global__ void __launch_bounds__(tma_kernel_threads<Cfg>(), 1)
    grouped_box_tile_gemm(const GroupedProblems<OperandA, OperandB, Epilogue> problems) {
#if defined(HIPGRAD_GEMM_TMA)
  if constexpr (tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    using Mainloop = detail::WarpSpecialisedMainloop<Cfg, OperandA, OperandB, Epilogue,
                                                     detail::BoxTmaProducer<Cfg, OperandA, OperandB>>;
    Mainloop::run(detail::aligned_kernel_shared<Cfg>(), GroupedSchedule<Cfg, OperandA, OperandB, Epilogue>(problems));
    return;
  }
#endif
  (void)problems;
  __trap();
}

/// Launches grouped_box_tile_gemm over `count` sub-problems (their maps already in device
/// memory): the sub-problems and their item starts go to `workspace`
/// (grouped_workspace_bytes<SubProblem<…>>(count)) on `stream`.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
Status launch_grouped_box_gemm(const SubProblem<OperandA, OperandB, Epilogue>* problems, int count, void* workspace,
                               std::size_t bytes, const DeviceInfo& device, hipStream_t stream) {
  using Problem = SubProblem<OperandA, OperandB, Epilogue>;
  using T = typename OperandA::Element;
  if constexpr (!tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    (void)problems, (void)count, (void)workspace, (void)bytes, (void)device, (void)stream;
    return Status::not_supported("the TMA kernel does not run this configuration in these layouts");
  } else {
    if (!device_runs_wgmma(device.device))
      return Status::not_supported("the code loaded for this device was not compiled for sm_90a");
    const int shared = tma_kernel_shared_bytes<Cfg, T>();
    if (static_cast<std::size_t>(shared) > device.shared_per_block_opt_in) {
      return Status::not_supported("the configuration needs more shared memory per block than the device allows");
    }
    HIPGRAD_RETURN_IF_ERROR(check_workspace(grouped_workspace_bytes<Problem>(count), workspace, bytes));
    std::vector<GroupedExtent> extents(static_cast<std::size_t>(count));
    for (int g = 0; g < count; ++g)
      extents[static_cast<std::size_t>(g)] = {problems[g].a.mn_size(), problems[g].b.mn_size()};
    const std::vector<long long> starts = grouped_tile_starts(extents, Cfg::kBlockM, Cfg::kBlockN);
    if (starts.back() > INT_MAX) return Status::not_supported("more than 2^31 - 1 output tiles over the sub-problems");
    if (starts.back() == 0) return Status::ok();
    GroupedProblems<OperandA, OperandB, Epilogue> staged{};
    HIPGRAD_RETURN_IF_ERROR(stage_grouped_problems(problems, count, starts, workspace, stream, &staged));
    const auto kernel = grouped_box_tile_gemm<Cfg, OperandA, OperandB, Epilogue>;
    HIPGRAD_RETURN_IF_HIP_ERROR(opt_in_shared_memory(kernel, static_cast<std::size_t>(shared)));
    const long long blocks = starts.back() < device.multiprocessors ? starts.back() : device.multiprocessors;
    kernel<<<static_cast<unsigned>(blocks), tma_kernel_threads<Cfg>(), shared, stream>>>(staged);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("grouped_box_tile_gemm");
    return Status::ok();
  }
}

#endif  // HIPGRAD_BACKEND_CUDA

}  // namespace hipgrad::gemm
