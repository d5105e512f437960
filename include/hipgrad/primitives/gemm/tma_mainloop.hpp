/// @file tma_mainloop.hpp
/// @brief The warp-specialised, persistent tile GEMM of sm_90a: one producer warpgroup fills the
///        stage ring with TMA copies, kWarps / 4 consumer warpgroups run the wgmmas of
///        WgmmaMainloop on each stage as soon as it lands, and the blocks walk the output tiles
///        (and K splits) in turn, so the producer fetches the next tile while the consumers
///        store the last.
///
/// Why this shape: in the cp.async mainloop every thread issues copies and every k tile ends in
/// a block barrier, so the copies' address registers and the barrier sit in the wgmma warps'
/// loop. Here the copies are one thread's
/// TMA instructions, the consumers meet the producer only at per-stage transaction barriers
/// (mbarrier), and the consumers get the registers the producer gives up (setmaxnreg).
///
/// Per stage s two barriers: full[s] completes when the producer's arrival and every byte of the
/// stage's copies are in; empty[s] completes when each consumer warp has seen its wgmmas of the
/// stage finish. Each side counts its passes around the ring, and the parity of that count is
/// the barrier phase it waits for: the producer waits for the phase before (a fresh barrier
/// reports it complete), so it fills every stage once before it first waits for a consumer.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/primitives/gemm/epilogue.hpp"
#include "hipgrad/primitives/gemm/pipeline.hpp"
#include "hipgrad/primitives/gemm/tile_copy.hpp"
#include "hipgrad/primitives/gemm/tma.hpp"
#include "hipgrad/primitives/gemm/wgmma_mainloop.hpp"

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
/// slab of columns at a time (WarpSpecialisedMainloop::store_staged).
inline constexpr int kEpilogueStagingBytes = 8192;

/// Dynamic shared memory of the TMA kernel: the stage ring (1024-byte aligned), two 8-byte
/// barriers per stage and each consumer warpgroup's epilogue staging.
template <typename Cfg, typename T>
constexpr int tma_kernel_shared_bytes() {
  return Cfg::template shared_bytes<T>() + 16 * Cfg::kStages + Cfg::kWarps / 4 * kEpilogueStagingBytes;
}

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

/// The warp-specialised kernel's body over a Producer (TmaProducer below, GatherProducer in
/// gather_mainloop.hpp): one warpgroup produces, the consumers are the same for every producer.
/// A Producer provides kRegisters (what its warpgroup keeps after the hand-over), kArrivals (the
/// arrivals that complete a full barrier's phase besides the bytes announced), kFenceStages
/// (whether consumers fence a landed stage for the asynchronous proxy: copies the generic proxy
/// wrote, which wgmma reads), kSharedBytes (its own shared memory, Ring::extra) and
/// produce(ring, schedule, thread), called by every thread of its warpgroup (`thread` 0–127).
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue, typename Producer>
struct WarpSpecialisedMainloop {
  using Stages = WgmmaMainloop<Cfg, OperandA, OperandB, Epilogue>;
  using Plan = typename Stages::Plan;
  using TileA = typename Plan::TileA;
  using TileB = typename Plan::TileB;
  using Accumulators = typename Stages::Accumulators;
  static constexpr int kStageBytes = TileA::kBytes + TileB::kBytes;
  static constexpr int kConsumerWarps = Cfg::kWarps;
  static constexpr int kConsumerThreads = 32 * kConsumerWarps;
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
  /// Register operands (TF32) must stay intact until their wgmmas end: those stages are released
  /// after wait_group 0, shared-memory ones one stage later (wait_group 1).
  static constexpr int kPendingBatches = Plan::kRegisterA ? 0 : 1;
  /// Consumer warpgroup g meets on hardware barrier kStagingBarrier + g in the staged epilogue
  /// (0 is the block's, 1 a producer's own).
  static constexpr int kStagingBarrier = 2;

  struct Ring {
    char* stages;
    std::uint64_t* full;
    std::uint64_t* empty;
    float* staging;  ///< kEpilogueStagingBytes per consumer warpgroup, after the barriers
    char* extra;     ///< the producer's own Producer::kSharedBytes, after the staging
    HIPGRAD_DEVICE char* stage(int s) const { return stages + s * kStageBytes; }
  };

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
    int s = 0;
    std::uint32_t pass = 0;
    for (int item = static_cast<int>(blockIdx.x); item < schedule.items; item += static_cast<int>(gridDim.x)) {
      schedule.visit(item, [&](const OperandA&, const OperandB&, const Epilogue& epilogue, const TileWork& w) {
        Accumulators acc;
        Stages::zero(acc);
        int previous = 0;
        for (int t = 0; t < w.kt_count; ++t) {
          mbarrier_wait(&ring.full[s], pass);
          if constexpr (Producer::kFenceStages) fence_shared_for_async_proxy();
          Stages::compute_stage(acc, ring.stage(s), row0, warp_in_group, lane);
          wgmma_wait<kPendingBatches>();
          Stages::pin(acc);
          if (kPendingBatches == 0) {
            // Register operands: every lane read the stage with its own loads, and lane 0's
            // arrival releases only its own; the warp barrier orders the others' before it, so
            // that the producer's next copies into the stage come after all of them.
            __syncwarp();
            if (lane == 0) mbarrier_arrive(&ring.empty[s]);
          } else if (t > 0 && lane == 0) {
            mbarrier_arrive(&ring.empty[previous]);
          }
          previous = s;
          if (++s == Cfg::kStages) s = 0, pass ^= 1u;
        }
        wgmma_wait<0>();
        Stages::pin(acc);
        if (kPendingBatches == 1 && w.kt_count > 0 && lane == 0) mbarrier_arrive(&ring.empty[previous]);
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

  /// The block's part of one product (ProductSchedule) or of several (GroupedSchedule).
  template <typename Schedule>
  HIPGRAD_DEVICE static void run(char* shared, const Schedule& schedule) {
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
      consume(ring, schedule);
    } else {
      if constexpr (kHandOverRegisters) warpgroup_registers_decrease<kProducerRegisters>();
      Producer::produce(ring, schedule, thread - kConsumerThreads);
    }
  }
};

/// A producer's walk over the stage ring, in the consumers' order: for each of the block's work
/// items calls start(a, b, m_base, n_base) with the item's operands, then for every K tile of the
/// item visit(a, b, s, pass, m_base, n_base, k) with its stage s, the ring's pass over the stages
/// (the parity of the stage's barrier phase) and the tile's coordinates: A at (m_base, k), B at
/// (n_base, k).
template <typename Cfg, typename Schedule, typename Start, typename Visit>
HIPGRAD_DEVICE HIPGRAD_INLINE void for_each_stage(const Schedule& schedule, Start&& start, Visit&& visit) {
  int s = 0;
  std::uint32_t pass = 0;
  for (int item = static_cast<int>(blockIdx.x); item < schedule.items; item += static_cast<int>(gridDim.x)) {
    schedule.visit(item, [&](const auto& a, const auto& b, const auto&, const TileWork& w) {
      const int m_base = w.tile.m * Cfg::kBlockM, n_base = w.tile.n * Cfg::kBlockN;
      start(a, b, m_base, n_base);
      for (int t = 0; t < w.kt_count; ++t) {
        visit(a, b, s, pass, m_base, n_base, (w.kt_begin + t) * Cfg::kBlockK);
        if (++s == Cfg::kStages) s = 0, pass ^= 1u;
      }
    });
  }
}

/// for_each_stage whose K tiles wait until the consumers have freed the stage, then
/// fill(a, b, s, m_base, n_base, k) fills it.
template <typename Cfg, typename Ring, typename Schedule, typename Start, typename Fill>
HIPGRAD_DEVICE HIPGRAD_INLINE void for_each_free_stage(const Ring& ring, const Schedule& schedule, Start&& start,
                                                       Fill&& fill) {
  for_each_stage<Cfg>(schedule, start,
                      [&](const auto& a, const auto& b, int s, std::uint32_t pass, int m_base, int n_base, int k) {
                        mbarrier_wait(&ring.empty[s], pass ^ 1u);
                        fill(a, b, s, m_base, n_base, k);
                      });
}

/// The TMA producer: one thread per K tile waits for the stage to be free, announces its bytes
/// and starts the two tensor-map copies, which complete the full barrier themselves.
template <typename Cfg, typename OperandA, typename OperandB>
struct TmaProducer {
  static constexpr int kRegisters = 40;
  static constexpr int kArrivals = 1;
  static constexpr bool kFenceStages = false;
  static constexpr int kSharedBytes = 0;
  using Plan = WgmmaPlan<Cfg, OperandA, OperandB>;
  using TileA = typename Plan::TileA;
  using TileB = typename Plan::TileB;

  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const Schedule& schedule, int thread) {
    if (thread != 0) return;
    tma_prefetch_map(&schedule.a.map);
    tma_prefetch_map(&schedule.b.map);
    for_each_free_stage<Cfg>(
        ring, schedule, [](const OperandA&, const OperandB&, int, int) {},
        [&](const OperandA& a, const OperandB& b, int s, int m_base, int n_base, int k) {
          mbarrier_arrive_expect_bytes(&ring.full[s], TileA::kBytes + TileB::kBytes);
          tma_load_tile<TileA>(ring.stage(s), a, m_base, k, &ring.full[s]);
          tma_load_tile<TileB>(ring.stage(s) + TileA::kBytes, b, n_base, k, &ring.full[s]);
        });
  }
};

template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue>
using TmaMainloop = WarpSpecialisedMainloop<Cfg, OperandA, OperandB, Epilogue, TmaProducer<Cfg, OperandA, OperandB>>;

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

}  // namespace hipgrad::gemm
