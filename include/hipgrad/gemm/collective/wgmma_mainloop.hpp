/// @file wgmma_mainloop.hpp
/// @brief The matrix mainloop on sm_90a: the same stage ring, copies and epilogue as the
///        mma.sync mainloop (tile_gemm.hpp), with warpgroup MMAs (wgmma_atom.hpp) reading the
///        swizzled stages in place instead of warps loading fragments.
///
/// The block's warps form kWarps / 4 warpgroups, each computing a band of rows of the block tile
/// with 64 × kBlockN wgmmas. fp16/bf16: both operands from shared memory, any orientation. TF32:
/// wgmma reads A from registers and needs B K-major in shared memory, so with an N-contiguous B
/// and a K-contiguous A the block computes Cᵀ = Bᵀ·Aᵀ (the roles swap: B's tile is read into
/// registers, A's is the K-major shared operand, and the epilogue swaps m and n back); with
/// neither operand K-contiguous where wgmma needs it, WgmmaPlan::kSupported is false and the
/// kernel runs the mma.sync mainloop.
///
/// Ordering per k tile t: every thread waits for its copies of tile t, fences them for the
/// asynchronous proxy, and the block barrier publishes the tile. For shared-memory operands the
/// wgmmas of tile t are left running while the next tile is prepared (wgmma.wait_group 1), so the
/// stage that may be refilled after the barrier of iteration t is the one of tile t − 2: tiles
/// are fetched kStages − 2 ahead. With register operands (TF32) the fragments must stay intact
/// until their wgmmas finish, so each tile waits for its own (wait_group 0) and tiles are fetched
/// kStages − 1 ahead, as in the mma.sync mainloop.
#pragma once

#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/arch/smem_layout.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/collective/pipeline.hpp"
#include "hipgrad/gemm/collective/tile_copy.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"

namespace hipgrad::gemm {

/// What a wgmma mainloop does for Config Cfg and loaders LoaderA, LoaderB (host and device).
template <typename Cfg, typename LoaderA, typename LoaderB>
struct WgmmaPlan {
  using T = typename LoaderA::Element;
  static constexpr bool k16Bit = sizeof(T) == 2;
  using TileA = OperandTile<T, Cfg::kBlockM, Cfg::kBlockK, LoaderA::kKContiguous>;
  using TileB = OperandTile<T, Cfg::kBlockN, Cfg::kBlockK, LoaderB::kKContiguous>;
  /// TF32 with an N-contiguous B: compute Cᵀ (wgmma's A is our B, its B our A).
  static constexpr bool kSwap = !k16Bit && !LoaderB::kKContiguous;
  static constexpr bool kRegisterA = !k16Bit;
  using TileX = std::conditional_t<kSwap, TileB, TileA>;  ///< wgmma's A operand (rows: its M)
  using TileY = std::conditional_t<kSwap, TileA, TileB>;  ///< wgmma's B operand (rows: its N)
  static constexpr int kRowsX = kSwap ? Cfg::kBlockN : Cfg::kBlockM;
  static constexpr int kN = kSwap ? Cfg::kBlockM : Cfg::kBlockN;
  static constexpr int kWarpgroups = Cfg::kWarps / 4;
  static constexpr int kGroupRows = kWarpgroups > 0 ? kRowsX / kWarpgroups : 0;
  static constexpr int kAtoms = kGroupRows / 64;  ///< 64-row wgmmas per warpgroup and K step
  static constexpr int kKStep = 32 / static_cast<int>(sizeof(T));
  static constexpr int kAccumulators = kN / 2;  ///< per thread and atom

  static constexpr bool supported() {
    if (Cfg::kWarps % 4 != 0 || kGroupRows % 64 != 0 || kAtoms < 1) return false;
    if (kN != 64 && kN != 128 && kN != 192 && kN != 256) return false;
    if (kAtoms * kAccumulators > 128) return false;  // accumulators of one thread
    if (Cfg::kBlockK % kKStep != 0 || Cfg::kStages < (kRegisterA ? 2 : 3)) return false;
    if (!wgmma_readable<TileY, kN>()) return false;
    if (kRegisterA) return TileY::kKContiguous && TileX::kBytes % 1024 == 0;
    return wgmma_readable<TileX, 64>();
  }
  static constexpr bool kSupported = supported();
};

namespace detail {

template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
struct WgmmaMainloop {
  using Plan = WgmmaPlan<Cfg, LoaderA, LoaderB>;
  using T = typename Plan::T;
  using TileA = typename Plan::TileA;
  using TileB = typename Plan::TileB;
  using TileX = typename Plan::TileX;
  using TileY = typename Plan::TileY;
  static constexpr int kThreads = Cfg::kWarps * 32;
  static constexpr int kAhead = Plan::kRegisterA ? Cfg::kStages - 1 : Cfg::kStages - 2;
  using Ring = StageRing<Cfg::kStages, TileA::kBytes + TileB::kBytes>;
  using Accumulators = float[Plan::kAtoms][Plan::kAccumulators];

#if defined(HIPGRAD_GEMM_WGMMA)
  HIPGRAD_DEVICE static void load_stage(char* stage, const LoaderA& a, const LoaderB& b, int m_base, int n_base,
                                        int kt) {
    copy_tile<TileA, kThreads>(stage, a, m_base, kt * Cfg::kBlockK);
    copy_tile<TileB, kThreads>(stage + TileA::kBytes, b, n_base, kt * Cfg::kBlockK);
  }

  HIPGRAD_DEVICE static void zero(Accumulators& acc) {
    HIPGRAD_UNROLL
    for (int i = 0; i < Plan::kAtoms; ++i) HIPGRAD_UNROLL
    for (int e = 0; e < Plan::kAccumulators; ++e) acc[i][e] = 0.0f;
  }

  /// Hands a warpgroup's accumulators to the epilogue (the block tile's corner at m_base, n_base).
  HIPGRAD_DEVICE static void store(const Accumulators& acc, const Epilogue& epilogue, int m_base, int n_base, int row0,
                                   int warp_in_group, int lane, int split) {
    HIPGRAD_UNROLL
    for (int i = 0; i < Plan::kAtoms; ++i) HIPGRAD_UNROLL
    for (int e = 0; e < Plan::kAccumulators; ++e) {
      const AccumulatorCoord c = mma_sync_accumulator(lane, e);
      const int row = row0 + 64 * i + 16 * warp_in_group + c.m;  // along wgmma's M
      const int m = Plan::kSwap ? c.n : row, n = Plan::kSwap ? row : c.n;
      epilogue.store(m_base + m, n_base + n, acc[i][e], split);
    }
  }

  HIPGRAD_DEVICE static void pin(Accumulators& acc) {
    HIPGRAD_UNROLL
    for (int i = 0; i < Plan::kAtoms; ++i) HIPGRAD_UNROLL
    for (int e = 0; e < Plan::kAccumulators; ++e) pin_register(acc[i][e]);
  }

  /// Issues (and commits) the wgmmas of one stage for warpgroup rows [row0, row0 + kGroupRows).
  HIPGRAD_DEVICE static void compute_stage(Accumulators& acc, const char* stage, int row0, int warp_in_group,
                                           int lane) {
    const char* tile_x = Plan::kSwap ? stage + TileA::kBytes : stage;
    const char* tile_y = Plan::kSwap ? stage : stage + TileA::kBytes;
    if constexpr (Plan::kRegisterA) {
      std::uint32_t fragments[Cfg::kBlockK / Plan::kKStep][Plan::kAtoms][4];
      HIPGRAD_UNROLL
      for (int s = 0; s < Cfg::kBlockK / Plan::kKStep; ++s) HIPGRAD_UNROLL
      for (int i = 0; i < Plan::kAtoms; ++i)
        load_tf32_fragment<TileX, true>(fragments[s][i], tile_x, row0 + 64 * i + 16 * warp_in_group, s * Plan::kKStep,
                                        lane);
      pin(acc);
      wgmma_fence();
      HIPGRAD_UNROLL
      for (int s = 0; s < Cfg::kBlockK / Plan::kKStep; ++s) {
        const std::uint64_t b = wgmma_descriptor_at(tile_y, wgmma_block<TileY>(0, s * Plan::kKStep));
        HIPGRAD_UNROLL
        for (int i = 0; i < Plan::kAtoms; ++i) WgmmaRSTf32<Plan::kN>::mma(acc[i], fragments[s][i], b);
      }
    } else {
      pin(acc);
      wgmma_fence();
      HIPGRAD_UNROLL
      for (int s = 0; s < Cfg::kBlockK / Plan::kKStep; ++s) {
        const std::uint64_t b = wgmma_descriptor_at(tile_y, wgmma_block<TileY>(0, s * Plan::kKStep));
        HIPGRAD_UNROLL
        for (int i = 0; i < Plan::kAtoms; ++i) {
          const std::uint64_t a = wgmma_descriptor_at(tile_x, wgmma_block<TileX>(row0 + 64 * i, s * Plan::kKStep));
          WgmmaSS<T, Plan::kN>::template mma<TileX::kKContiguous ? 0 : 1, TileY::kKContiguous ? 0 : 1>(acc[i], a, b);
        }
      }
    }
    wgmma_commit();
    pin(acc);
  }

  HIPGRAD_DEVICE static void run(char* shared, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                 const TileWork& w) {
    const int m_base = w.tile.m * Cfg::kBlockM, n_base = w.tile.n * Cfg::kBlockN;
    const int kt_begin = w.kt_begin, kt_count = w.kt_count;
    const int thread = static_cast<int>(threadIdx.x);
    const int group = thread / 128, warp_in_group = (thread / 32) % 4, lane = thread % 32;
    const int row0 = group * Plan::kGroupRows;

    Accumulators acc;
    zero(acc);

    const Ring ring{shared};
    HIPGRAD_UNROLL
    for (int s = 0; s < kAhead; ++s) {
      if (s < kt_count) load_stage(ring.stage(s), a, b, m_base, n_base, kt_begin + s);
      commit_copies();  // empty groups too: the wait below counts groups
    }
    for (int t = 0; t < kt_count; ++t) {
      wait_copies<kAhead - 1>();
      fence_shared_for_async_proxy();
      // Publishes tile t; every warpgroup has also finished the wgmmas of tile t − 2 (t − 1 with
      // register operands), whose stage the copies below refill.
      block_sync();
      const int next = t + kAhead;
      if (next < kt_count) load_stage(ring.stage(next), a, b, m_base, n_base, kt_begin + next);
      commit_copies();
      compute_stage(acc, ring.stage(t), row0, warp_in_group, lane);
      wgmma_wait<Plan::kRegisterA ? 0 : 1>();
      pin(acc);
    }
    wgmma_wait<0>();
    pin(acc);
    wait_copies<0>();
    store(acc, epilogue, m_base, n_base, row0, warp_in_group, lane, w.split);
  }
#endif  // HIPGRAD_GEMM_WGMMA
};

}  // namespace detail
}  // namespace hipgrad::gemm
