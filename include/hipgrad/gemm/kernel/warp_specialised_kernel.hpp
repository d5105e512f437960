/// @file warp_specialised_kernel.hpp
/// @brief The warp-specialised, persistent tile GEMM kernels of sm_90a: the block's roles (one
///        producer warpgroup, the consumer warpgroups), its barrier ring and register hand-over,
///        with either producer: TMA copies of tensor-mapped operands (tma_producer.hpp) or
///        cp.async copies through any operand loader (gather_producer.hpp); the persistent grid
///        walks the work items of one product (ProductSchedule) or of several (GroupedSchedule).
#pragma once

#include <type_traits>

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/collective/gather_producer.hpp"
#include "hipgrad/gemm/collective/producer_contract.hpp"
#include "hipgrad/gemm/collective/tma_producer.hpp"
#include "hipgrad/gemm/collective/warp_specialised_consumer.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/kernel/tile_scheduler.hpp"

namespace hipgrad::gemm {

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

/// The warp-specialised kernel's body over a Producer: sets up the barrier ring, then one
/// warpgroup produces and the others consume (WarpSpecialisedConsumer), after handing
/// registers from the producer to the consumers.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue, typename Producer>
struct WarpSpecialisedKernel {
  using Consumer = WarpSpecialisedConsumer<Cfg, OperandA, OperandB, Epilogue, Producer>;
  using Ring = typename Consumer::Ring;
  static constexpr int kStageBytes = Consumer::kStageBytes;
  static constexpr int kConsumerWarps = Consumer::kConsumerWarps;
  static constexpr int kConsumerThreads = Consumer::kConsumerThreads;
  /// Registers per thread after the hand-over (setmaxnreg): the producer keeps
  /// Producer::kRegisters, the consumers share the rest of what the block was launched with
  /// (kLaunchRegisters a thread: 65536 / threads, at most 255, in multiples of 8), in multiples of
  /// 8, at most 232. An increase waits until the block's released registers cover it, so asking
  /// for more than the launch left would wait forever. Without the hand-over the TF32 consumers
  /// (accumulators and B fragments) spill at 384 threads, with it they do not. Only where it
  /// moves both sides the right way: with one consumer warpgroup (256 threads, 248 each) there
  /// is nothing to gain, and an "increase" below the current count is not allowed.
  static constexpr int kProducerRegisters = Producer::kRegisters;
  static constexpr int kBlockThreads = kConsumerThreads + 128;
  static constexpr int kLaunchRegisters = (65536 / kBlockThreads < 255 ? 65536 / kBlockThreads : 255) / 8 * 8;
  static constexpr int kConsumerShare =
      (kLaunchRegisters * kBlockThreads - 128 * kProducerRegisters) / kConsumerThreads / 8 * 8;
  static constexpr int kConsumerRegisters = kConsumerShare < 232 ? kConsumerShare : 232;
  static_assert(128 * kProducerRegisters + kConsumerThreads * kConsumerRegisters <= kLaunchRegisters * kBlockThreads,
                "the hand-over never asks for more registers than the launch gave the block");
  static constexpr bool kHandOverRegisters =
      kConsumerRegisters > kLaunchRegisters&& kProducerRegisters < kLaunchRegisters;

  /// The block's part of one product (ProductSchedule) or of several (GroupedSchedule).
  template <typename Schedule>
  HIPGRAD_DEVICE static void run(char* shared, const Schedule& schedule) {
    static_assert(
        is_producer<Producer, Ring, Schedule>::value,
        "a producer provides kRegisters, kArrivals, kFenceStages, kSharedBytes and produce(ring, schedule, thread)");
    char* after_barriers = shared + Cfg::kStages * (kStageBytes + 16);
    const Ring ring{shared, reinterpret_cast<std::uint64_t*>(shared + Cfg::kStages * kStageBytes),
                    reinterpret_cast<std::uint64_t*>(shared + Cfg::kStages * kStageBytes) + Cfg::kStages,
                    reinterpret_cast<float*>(after_barriers),
                    after_barriers + kConsumerWarps / 4 * kEpilogueStagingBytes};
    const int thread = static_cast<int>(threadIdx.x);
    if (thread == 0) {
      for (int s = 0; s < Cfg::kStages; ++s) {
        mbarrier_init(&ring.full[s], Producer::kArrivals);
        mbarrier_init(&ring.empty[s], kConsumerWarps);
      }
      mbarrier_init_fence();
    }
    block_sync();
    // The warpgroup as a warp-uniform value, so that each branch is taken by whole warpgroups.
    const int group = __shfl_sync(0xffffffffu, thread / 128, 0);
    if (group < kConsumerWarps / 4) {
      if constexpr (kHandOverRegisters) warpgroup_registers_increase<kConsumerRegisters>();
      Consumer::consume(ring, schedule);
    } else {
      if constexpr (kHandOverRegisters) warpgroup_registers_decrease<kProducerRegisters>();
      Producer::produce(ring, schedule, thread - kConsumerThreads);
    }
  }
};

template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
using TmaMainloop = WarpSpecialisedKernel<Cfg, OperandA, OperandB, Epilogue, TmaProducer<Cfg, OperandA, OperandB>>;
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
using GatherMainloop = WarpSpecialisedKernel<Cfg, LoaderA, LoaderB, Epilogue, GatherProducer<Cfg, LoaderA, LoaderB>>;

/// The block's dynamic shared memory, aligned to Cfg::kSharedAlignment (tma_kernel_shared_bytes
/// leaves room for it).
template <typename Cfg>
HIPGRAD_DEVICE HIPGRAD_INLINE char* aligned_kernel_shared() {
  extern __shared__ uint4 gemm_shared[];
  char* shared = reinterpret_cast<char*>(gemm_shared);
  const std::uint32_t address = shared_address(shared);
  return shared + (Cfg::kSharedAlignment - address % Cfg::kSharedAlignment) % Cfg::kSharedAlignment;
}

/// A warp-specialised kernel's body over one product: Mainloop::run on the block's aligned
/// dynamic shared memory.
template <typename Mainloop, typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
HIPGRAD_DEVICE HIPGRAD_INLINE void run_warp_specialised(const OperandA& a, const OperandB& b, const Epilogue& epilogue,
                                                        int k_tiles_per_split, int splits) {
  Mainloop::run(aligned_kernel_shared<Cfg>(),
                ProductSchedule<Cfg, OperandA, OperandB, Epilogue>(a, b, epilogue, k_tiles_per_split, splits));
}

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

/// Which producer fills the warp-specialised kernel's stages.
enum class StageProducer {
  kTma,     ///< tensor-map copies (TmaOperand operands)
  kGather,  ///< cp.async through operand loaders
};

#if defined(HIPGRAD_GEMM_TENSOR_MAPS)

/// The warp-specialised tile GEMM (sm_90a): a persistent grid of at most one block per
/// multiprocessor walking tiles_m·tiles_n·splits work items, tma_kernel_threads<Cfg>() threads,
/// tma_kernel_shared_bytes<Cfg, T>() (gather: gather_kernel_shared_bytes) of dynamic shared memory. Only for devices where
/// device_runs_wgmma() and for configurations tma_kernel_supported (gather_kernel_supported):
/// elsewhere the body traps.
template <typename Cfg, StageProducer kProducer, typename OperandA, typename OperandB, typename Epilogue>
__global__ void __launch_bounds__(tma_kernel_threads<Cfg>(), 1)
    warp_specialised_tile_gemm(const __grid_constant__ OperandA a, const __grid_constant__ OperandB b,
                               Epilogue epilogue, int k_tiles_per_split, int splits) {
#if defined(HIPGRAD_GEMM_TMA)
  constexpr bool kTma = kProducer == StageProducer::kTma;
  if constexpr (kTma ? tma_kernel_supported<Cfg, OperandA, OperandB>()
                     : gather_kernel_supported<Cfg, OperandA, OperandB>()) {
    using Mainloop = std::conditional_t<kTma, detail::TmaMainloop<Cfg, OperandA, OperandB, Epilogue>,
                                        detail::GatherMainloop<Cfg, OperandA, OperandB, Epilogue>>;
    detail::run_warp_specialised<Mainloop, Cfg>(a, b, epilogue, k_tiles_per_split, splits);
    return;
  }
#endif
  (void)a, (void)b, (void)epilogue, (void)k_tiles_per_split, (void)splits;
  __trap();
}

/// The gather kernel over the sub-problems of a grouped launch (grouped_tiles.hpp): the same
/// persistent grid, threads and shared memory (gather_kernel_shared_bytes) as
/// warp_specialised_tile_gemm's gather kernel, walking problems.items work items, no K split.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue, bool kInParameters>
__global__ void __launch_bounds__(tma_kernel_threads<Cfg>(), 1)
    grouped_gather_tile_gemm(const HIPGRAD_GRID_CONSTANT GroupedProblems<LoaderA, LoaderB, Epilogue> problems) {
#if defined(HIPGRAD_GEMM_TMA)
  if constexpr (gather_kernel_supported<Cfg, LoaderA, LoaderB>()) {
    using Mainloop = detail::GatherMainloop<Cfg, LoaderA, LoaderB, Epilogue>;
    Mainloop::run(detail::aligned_kernel_shared<Cfg>(),
                  GroupedSchedule<Cfg, LoaderA, LoaderB, Epilogue, kInParameters>(problems));
    return;
  }
#endif
  (void)problems;
  __trap();
}

#endif  // HIPGRAD_GEMM_TENSOR_MAPS

}  // namespace hipgrad::gemm
