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
///
/// TF32 wgmma reads B K-major only; a B whose copies bring it MN-major (32-bit panels of BK = 32
/// positions) declares kKContiguous (what the consumers read) and kTransposedOnArrival: its
/// copies complete a barrier of their own, the producer's other three warps turn each landed
/// panel K-major in place (panel_transpose.hpp, rounding to TF32 on the way), fence their writes
/// for wgmma's proxy and then arrive on the stage's full barrier.
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
#include "hipgrad/primitives/gemm/grouped_launcher.hpp"
#include "hipgrad/primitives/gemm/grouped_tiles.hpp"
#include "hipgrad/primitives/gemm/panel_transpose.hpp"
#include "hipgrad/primitives/gemm/tma.hpp"
#include "hipgrad/primitives/gemm/tma_mainloop.hpp"

namespace hipgrad::gemm {

/// Whether box operand O's copies land MN-major for the producer to turn K-major (O declares
/// kTransposedOnArrival; others never are).
template <typename O, typename = void>
struct TransposedOnArrival : std::false_type {};
template <typename O>
struct TransposedOnArrival<O, std::void_t<decltype(O::kTransposedOnArrival)>>
    : std::bool_constant<O::kTransposedOnArrival> {};

/// Dynamic shared memory of the box kernel: the TMA kernel's, and where B is transposed on
/// arrival a barrier a stage for its copies.
template <typename Cfg, typename OperandA, typename OperandB>
constexpr int box_kernel_shared_bytes() {
  return tma_kernel_shared_bytes<Cfg, typename OperandA::Element>() +
         (TransposedOnArrival<OperandB>::value ? 8 * Cfg::kStages : 0);
}

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

template <typename Cfg, typename OperandA, typename OperandB>
struct BoxTmaProducer {
  static constexpr bool kTranspose = TransposedOnArrival<OperandB>::value;
  static_assert(!TransposedOnArrival<OperandA>::value, "only B is transposed on arrival (A may come from registers)");
  static constexpr int kTransposeWarps = 3;
  /// Registers the producer warpgroup keeps: the copy lanes work out 3-D coordinates (40 spilled
  /// there), the transposing warps hold two 4 × 4 blocks and their addresses.
  static constexpr int kRegisters = kTranspose ? 96 : 56;
  static constexpr int kArrivals = 1 + (kTranspose ? kTransposeWarps : 0);
  static constexpr bool kFenceStages = false;
  static constexpr int kSharedBytes = kTranspose ? 8 * Cfg::kStages : 0;
  static constexpr int kProducerBarrier = 1;
  using Plan = WgmmaPlan<Cfg, OperandA, OperandB>;
  static_assert(!kTranspose || (sizeof(typename OperandB::Element) == 4 && Cfg::kBlockK == 32 &&
                                Plan::TileB::kKContiguous && Cfg::kBlockN % 32 == 0),
                "a B transposed on arrival is 32-bit panels of 32 positions");

  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const Schedule& schedule, int thread) {
    auto* landed = reinterpret_cast<std::uint64_t*>(ring.extra);
    if constexpr (kTranspose) {
      if (thread == 0) {
        for (int s = 0; s < Cfg::kStages; ++s) mbarrier_init(&landed[s], 1);
        mbarrier_init_fence();
      }
      named_barrier_sync(kProducerBarrier, 128);
      if (thread >= 32) return transpose(ring, landed, schedule, thread - 32);
    }
    if (thread < 32) copy(ring, landed, schedule, thread);
  }

  /// One warp: lane i issues copy i of the stage (A's, then B's), so that the copies'
  /// coordinates (divisions by the boxes' grid) are worked out side by side rather than one
  /// after another by one thread. A copy may land before lane 0's arrival announces its bytes:
  /// the barrier's phase cannot complete before that arrival.
  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void copy(const Ring& ring, std::uint64_t* landed, const Schedule& schedule, int lane) {
    int bytes_a = 0, bytes_b = 0;
    for_each_free_stage<Cfg>(
        ring, schedule,
        [&](const OperandA& a, const OperandB& b, int, int) {
          tma_acquire_map(static_cast<const CUtensorMap*>(a.map));
          tma_acquire_map(static_cast<const CUtensorMap*>(b.map));
          bytes_a = a.tile_bytes(), bytes_b = b.tile_bytes();
        },
        [&](const OperandA& a, const OperandB& b, int s, int m_base, int n_base, int k) {
          std::uint64_t* barrier_b = kTranspose ? &landed[s] : &ring.full[s];
          if (lane == 0) {
            if constexpr (kTranspose) {
              mbarrier_arrive_expect_bytes(&ring.full[s], bytes_a);
              mbarrier_arrive_expect_bytes(barrier_b, bytes_b);
            } else {
              mbarrier_arrive_expect_bytes(&ring.full[s], bytes_a + bytes_b);
            }
          }
          const int copies_a = a.copies();
          if (lane < copies_a) {
            a.load_copy(lane, ring.stage(s), m_base, k, &ring.full[s]);
          } else if (lane < copies_a + b.copies()) {
            b.load_copy(lane - copies_a, ring.stage(s) + Plan::TileA::kBytes, n_base, k, barrier_b);
          }
        });
  }

  /// Warps 1–3: per K tile, once B's copies land, each thread takes panel tasks in turn; its
  /// writes are fenced for wgmma's (asynchronous) proxy before its warp arrives on full[s].
  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void transpose(const Ring& ring, std::uint64_t* landed, const Schedule& schedule, int thread) {
    constexpr int kThreads = 32 * kTransposeWarps;
    constexpr int kTasks = Cfg::kBlockN / 32 * kPanelTransposeTasks;
    for_each_stage<Cfg>(
        schedule, [](const OperandA&, const OperandB&, int, int) {},
        [&](const OperandA&, const OperandB&, int s, std::uint32_t pass, int, int, int) {
          mbarrier_wait(&landed[s], pass);
          char* tile = ring.stage(s) + Plan::TileA::kBytes;
          for (int task = thread; task < kTasks; task += kThreads) {
            transpose_panel_task(tile + task / kPanelTransposeTasks * TransposedPanel::kBytes,
                                 task % kPanelTransposeTasks, [](std::uint32_t bits) { return to_tf32(bits); });
          }
          fence_shared_for_async_proxy();
          __syncwarp();
          if (thread % 32 == 0) mbarrier_arrive(&ring.full[s]);
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
    const DeviceInfo& device = current_device_info();
    if (!device.known || !device_runs_wgmma(device.device))
      return "the code loaded for this device was not compiled for sm_90a";
    if (detail::tensor_map_encoder() == nullptr) return "the driver has no tensor maps";
    if (static_cast<std::size_t>(box_kernel_shared_bytes<Cfg, OperandA, OperandB>()) > device.shared_per_block_opt_in) {
      return "more shared memory per block than the device allows";
    }
    return nullptr;
#else
    return "TMA exists in CUDA builds only";
#endif
  }
}

#if defined(HIPGRAD_BACKEND_CUDA)

/// The warp-specialised kernel over grouped sub-problems of box operands: the persistent grid and
/// threads of the TMA kernel, box_kernel_shared_bytes of shared memory, no K split.
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

/// Launches grouped_box_tile_gemm over `count` sub-problems that read the `map_count` tensor maps
/// `maps`: the sub-problems, their item starts and the maps go to `workspace`
/// (grouped_tail_workspace_bytes of them; the maps at grouped_tail_offset, where the operands must
/// point) in one copy on `stream`.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
Status launch_grouped_box_gemm(const SubProblem<OperandA, OperandB, Epilogue>* problems, int count,
                               const TensorMap* maps, int map_count, void* workspace, std::size_t bytes,
                               const DeviceInfo& device, hipStream_t stream) {
  using Problem = SubProblem<OperandA, OperandB, Epilogue>;
  if constexpr (!tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    (void)problems, (void)count, (void)maps, (void)map_count, (void)workspace, (void)bytes, (void)device, (void)stream;
    return Status::not_supported("the TMA kernel does not run this configuration in these layouts");
  } else {
    if (!device_runs_wgmma(device.device))
      return Status::not_supported("the code loaded for this device was not compiled for sm_90a");
    const int shared = box_kernel_shared_bytes<Cfg, OperandA, OperandB>();
    if (static_cast<std::size_t>(shared) > device.shared_per_block_opt_in) {
      return Status::not_supported("the configuration needs more shared memory per block than the device allows");
    }
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
    const auto kernel = grouped_box_tile_gemm<Cfg, OperandA, OperandB, Epilogue>;
    HIPGRAD_RETURN_IF_HIP_ERROR(opt_in_shared_memory(kernel, static_cast<std::size_t>(shared)));
    const long long blocks = starts.back() < device.multiprocessors ? starts.back() : device.multiprocessors;
    kernel<<<static_cast<unsigned>(blocks), tma_kernel_threads<Cfg>(), shared, stream>>>(staged);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("grouped_box_tile_gemm");
    return Status::ok();
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
