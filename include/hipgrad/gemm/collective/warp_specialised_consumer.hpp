/// @file warp_specialised_consumer.hpp
/// @brief The consumers of the warp-specialised, persistent tile GEMM of sm_90a: kWarps / 4
///        warpgroups run the wgmmas of WgmmaMainloop on each stage of the barrier ring as soon
///        as it lands, release it once those wgmmas have finished, and hand each work item's
///        accumulators to the epilogue (staged through shared memory where the epilogue stores
///        vectors), while the producer warpgroup already fills the ring with the next item's tiles.
///
/// Why this shape: in the cp.async mainloop every thread issues copies and every k tile ends in
/// a block barrier, so the copies' address registers and the barrier sit in the wgmma warps'
/// loop. Here the copies are the producer's, the consumers meet it only at per-stage
/// transaction barriers (BarrierRing), and the consumers get the registers the producer gives
/// up (setmaxnreg, kernel/warp_specialised_kernel.hpp).
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/collective/pipeline.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"

namespace hipgrad::gemm {


/// Whether the TMA kernel runs Config Cfg with operands A, B: a wgmma configuration of at most
/// two consumer warpgroups. (With three and a producer, 512 threads, ptxas budgets the wgmmas
/// 128 registers whatever setmaxnreg grants, too few for 64 × 256 fp32 accumulators.)
template <typename Cfg, typename OperandA, typename OperandB>
HIPGRAD_HOST_DEVICE constexpr bool tma_kernel_supported() {
  return WgmmaPlan<Cfg, OperandA, OperandB>::kSupported && Cfg::kWarps <= 8;
}

/// Threads of a block of the TMA kernel for Config Cfg: Cfg's warps consume, one warpgroup more
/// produces.
template <typename Cfg>
HIPGRAD_HOST_DEVICE constexpr int tma_kernel_threads() {
  return (Cfg::kWarps + 4) * 32;
}
/// Shared memory in which a consumer warpgroup stages its accumulators for the epilogue, one
/// slab of columns at a time (WarpSpecialisedConsumer::store_staged).
inline constexpr int kEpilogueStagingBytes = 8192;

/// Dynamic shared memory of the TMA kernel: the stage ring (1024-byte aligned), two 8-byte
/// barriers per stage and each consumer warpgroup's epilogue staging.
template <typename Cfg, typename T>
constexpr int tma_kernel_shared_bytes() {
  return Cfg::template shared_bytes<T>() + 16 * Cfg::kStages + Cfg::kWarps / 4 * kEpilogueStagingBytes;
}

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

/// The consumer warpgroups of the warp-specialised kernel over a Producer
/// (producer_contract.hpp), whose kFenceStages says whether a landed stage needs a fence for
/// the asynchronous proxy.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue, typename Producer>
struct WarpSpecialisedConsumer {
  using Stages = WgmmaMainloop<Cfg, OperandA, OperandB, Epilogue>;
  using Plan = typename Stages::Plan;
  using TileA = typename Plan::TileA;
  using TileB = typename Plan::TileB;
  using Accumulators = typename Stages::Accumulators;
  static constexpr int kStageBytes = TileA::kBytes + TileB::kBytes;
  static constexpr int kConsumerWarps = Cfg::kWarps;
  static constexpr int kConsumerThreads = 32 * kConsumerWarps;
  /// Register operands (TF32) must stay intact until their wgmmas end: those stages are released
  /// after wait_group 0, shared-memory ones one stage later (wait_group 1).
  static constexpr int kPendingBatches = Plan::kRegisterA ? 0 : 1;
  /// Consumer warpgroup g meets on hardware barrier kStagingBarrier + g in the staged epilogue
  /// (0 is the block's, 1 a producer's own).
  static constexpr int kStagingBarrier = 2;

  using Ring = BarrierRing<Cfg::kStages, kStageBytes>;

  /// Epilogues with store_vector get the warpgroup's tile through shared memory (store_staged),
  /// except where the block computes Cᵀ (TF32 with an N-contiguous B): there a warp's fragment
  /// already holds runs of n, and staging measured slower.
  static constexpr bool kStagedEpilogue = EpilogueStoresVectors<Epilogue>::value && !Plan::kSwap;

  /// Hands a warpgroup's accumulators to the epilogue in runs of kEpilogueVector n of one m:
  /// slab by slab of kSlab columns, the warpgroup writes its accumulators of the slab to
  /// `staging` (rows m, 16-byte chunks XOR-swizzled by row, so that neither the fragment writes
  /// nor the row reads meet in one bank), meets on its own hardware barrier, and each thread
  /// reads runs of 8 and stores them; a second meeting lets the next slab overwrite the staging.
  HIPGRAD_DEVICE static void store_staged(const Accumulators& acc, const Epilogue& epilogue, float* staging,
                                          int m_base, int n_base, int row0, int warp_in_group, int lane,
                                          int split, int barrier) {
    static_assert(!Plan::kSwap, "a staged tile is rows of m");
    constexpr int kSlab = kEpilogueStagingBytes / 4 / Plan::kGroupRows;
    static_assert(kSlab % 8 == 0 && Plan::kN % kSlab == 0, "slabs of whole 8-column fragments");
    constexpr int kChunks = kSlab / 4;
    constexpr int kRunsPerRow = kSlab / kEpilogueVector;
    constexpr int kRuns = Plan::kGroupRows * kRunsPerRow;
    static_assert(kRuns % 128 == 0, "every thread stores the same number of runs");
    const auto at = [](int r, int c) { return r * kSlab + ((c / 4) ^ (r % kChunks)) * 4 + c % 4; };
    const int thread = static_cast<int>(threadIdx.x) % 128;
    HIPGRAD_UNROLL
    for (int slab = 0; slab < Plan::kN / kSlab; ++slab) {
      // A slab wholly past the problem's n stores nothing: the warpgroup skips the rest as one.
      if (n_base + slab * kSlab >= epilogue.n_size) break;
      HIPGRAD_UNROLL
      for (int i = 0; i < Plan::kAtoms; ++i) HIPGRAD_UNROLL
      for (int e = 0; e < Plan::kAccumulators; e += 2) {
        if (8 * (e >> 2) / kSlab != slab) continue;  // decided at compile time
        const AccumulatorCoord c = mma_sync_accumulator(lane, e);
        // e and e + 1 are columns n, n + 1 of one row: one 8-byte write.
        *reinterpret_cast<float2*>(staging + at(64 * i + 16 * warp_in_group + c.m, c.n - slab * kSlab)) =
            make_float2(acc[i][e], acc[i][e + 1]);
      }
      named_barrier_sync(barrier, 128);
      HIPGRAD_UNROLL
      for (int run = thread; run < kRuns; run += 128) {
        const int r = run / kRunsPerRow, c = run % kRunsPerRow * kEpilogueVector;
        float values[kEpilogueVector];
        *reinterpret_cast<float4*>(values) = *reinterpret_cast<const float4*>(staging + at(r, c));
        *reinterpret_cast<float4*>(values + 4) = *reinterpret_cast<const float4*>(staging + at(r, c + 4));
        epilogue.store_vector(m_base + row0 + r, n_base + slab * kSlab + c, values, split);
      }
      named_barrier_sync(barrier, 128);
    }

  }

  /// A consumer warpgroup's loop: per K tile wait for the stage, issue its wgmmas, release the
  /// stage whose wgmmas have finished; per work item hand the accumulators to the epilogue.
  template <typename Schedule>
  HIPGRAD_DEVICE static void consume(const Ring& ring, const Schedule& schedule) {
    const int thread = static_cast<int>(threadIdx.x);
    const int group = thread / 128, warp_in_group = (thread / 32) % 4, lane = thread % 32;
    const int row0 = group * Plan::kGroupRows;
    PipelineState<Cfg::kStages> state;
    for (int item = static_cast<int>(blockIdx.x); item < schedule.items; item += static_cast<int>(gridDim.x)) {
      schedule.visit(item, [&](const OperandA&, const OperandB&, const Epilogue& epilogue, const TileWork& w) {
        Accumulators acc;
        Stages::zero(acc);
        int previous = 0;
        for (int t = 0; t < w.kt_count; ++t) {
          ring.consumer_wait(state);
          if constexpr (Producer::kFenceStages) fence_shared_for_async_proxy();
          Stages::compute_stage(acc, ring.stage(state.index), row0, warp_in_group, lane);
          wgmma_wait<kPendingBatches>();
          Stages::pin(acc);
          if (kPendingBatches == 0) {
            // Register operands: every lane read the stage with its own loads, and lane 0's
            // arrival releases only its own; the warp barrier orders the others' before it, so
            // that the producer's next copies into the stage come after all of them.
            __syncwarp();
            if (lane == 0) ring.consumer_release(state.index);
          } else if (t > 0 && lane == 0) {
            ring.consumer_release(previous);
          }
          previous = state.index;
          state.advance();
        }
        wgmma_wait<0>();
        Stages::pin(acc);
        if (kPendingBatches == 1 && w.kt_count > 0 && lane == 0) ring.consumer_release(previous);
        if constexpr (kStagedEpilogue) {
          store_staged(acc, epilogue, ring.staging + group * (kEpilogueStagingBytes / 4), w.tile.m * Cfg::kBlockM,
                       w.tile.n * Cfg::kBlockN, row0, warp_in_group, lane, w.split, kStagingBarrier + group);
        } else {
          Stages::store(acc, epilogue, w.tile.m * Cfg::kBlockM, w.tile.n * Cfg::kBlockN, row0, warp_in_group, lane,
                        w.split);
        }
      });
    }
  }
};

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

}  // namespace hipgrad::gemm
