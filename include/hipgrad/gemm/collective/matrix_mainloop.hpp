/// @file matrix_mainloop.hpp
/// @brief The matrix mainloop of one block: a multistage shared-memory pipeline of swizzled tiles
///        (cp.async copies) and one matrix atom per target (mma.sync, MFMA).
///
/// Tiles any M, N, K (the edges are zero-filled on load and skipped on store); a block computes
/// the K tiles of its TileWork.
#pragma once

#include <cstdint>

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/arch/smem_layout.hpp"
#include "hipgrad/gemm/collective/pipeline.hpp"
#include "hipgrad/gemm/collective/tile_copy.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"

namespace hipgrad::gemm {

namespace detail {

/// The matrix mainloop of one block with atom `Atom` (see mma_tile_gemm).
template <typename Cfg, typename Atom, typename LoaderA, typename LoaderB, typename Epilogue>
struct MatrixMainloop {
  using T = typename LoaderA::Element;
  using TileA = OperandTile<T, Cfg::kBlockM, Cfg::kBlockK, LoaderA::kKContiguous>;
  using TileB = OperandTile<T, Cfg::kBlockN, Cfg::kBlockK, LoaderB::kKContiguous>;
  static constexpr int kThreads = Cfg::kWarps * Atom::kLanes;
  static constexpr int kAtomsM = Cfg::kWarpM / Atom::kM, kAtomsN = Cfg::kWarpN / Atom::kN;
  static_assert(Cfg::kWarpM % Atom::kM == 0 && Cfg::kWarpN % Atom::kN == 0 && Cfg::kBlockK % Atom::kK == 0,
                "Config: the warp tile and kBlockK must be multiples of the matrix atom");
  using Ring = StageRing<Cfg::kStages, TileA::kBytes + TileB::kBytes>;
  using Accumulators = float[kAtomsM][kAtomsN][Atom::kAccumulators];

  HIPGRAD_DEVICE static void load_stage(char* stage, const LoaderA& a, const LoaderB& b, int m_base, int n_base,
                                        int kt) {
    copy_tile<TileA, kThreads>(stage, a, m_base, kt * Cfg::kBlockK);
    copy_tile<TileB, kThreads>(stage + TileA::kBytes, b, n_base, kt * Cfg::kBlockK);
  }

  HIPGRAD_DEVICE static void compute_stage(Accumulators& acc, const char* stage, int warp_m0, int warp_n0, int lane) {
    const char* tile_a = stage;
    const char* tile_b = stage + TileA::kBytes;
    HIPGRAD_UNROLL
    for (int kk = 0; kk < Cfg::kBlockK; kk += Atom::kK) {
      typename Atom::A fa[kAtomsM];
      typename Atom::B fb[kAtomsN];
      HIPGRAD_UNROLL
      for (int i = 0; i < kAtomsM; ++i) Atom::template load_a<TileA>(fa[i], tile_a, warp_m0 + i * Atom::kM, kk, lane);
      HIPGRAD_UNROLL
      for (int j = 0; j < kAtomsN; ++j) Atom::template load_b<TileB>(fb[j], tile_b, warp_n0 + j * Atom::kN, kk, lane);
      HIPGRAD_UNROLL
      for (int i = 0; i < kAtomsM; ++i) {
        HIPGRAD_UNROLL
        for (int j = 0; j < kAtomsN; ++j) Atom::mma(acc[i][j], fa[i], fb[j]);
      }
    }
  }

  HIPGRAD_DEVICE static void run(char* shared, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                 const TileWork& w) {
    const int m_base = w.tile.m * Cfg::kBlockM, n_base = w.tile.n * Cfg::kBlockN;
    const int kt_begin = w.kt_begin, kt_count = w.kt_count;
    const int warp = static_cast<int>(threadIdx.x) / Atom::kLanes, lane = static_cast<int>(threadIdx.x) % Atom::kLanes;
    const int warp_m0 = (warp / Cfg::kWarpsN) * Cfg::kWarpM, warp_n0 = (warp % Cfg::kWarpsN) * Cfg::kWarpN;

    Accumulators acc;
    HIPGRAD_UNROLL
    for (int i = 0; i < kAtomsM; ++i) HIPGRAD_UNROLL
    for (int j = 0; j < kAtomsN; ++j) HIPGRAD_UNROLL
    for (int e = 0; e < Atom::kAccumulators; ++e) acc[i][j][e] = 0.0f;

    const Ring ring{shared};
    HIPGRAD_UNROLL
    for (int s = 0; s < Cfg::kStages - 1; ++s) {
      if (s < kt_count) load_stage(ring.stage(s), a, b, m_base, n_base, kt_begin + s);
      commit_copies();  // empty groups too: the wait below counts groups
    }
    for (int t = 0; t < kt_count; ++t) {
      // Tile t has landed (at most kStages − 2 younger groups pending); the barrier publishes it
      // and tells every warp that the stage computed in iteration t − 1 may be overwritten.
      wait_copies<Cfg::kStages - 2>();
      block_sync();
      const int next = t + Cfg::kStages - 1;
      if (next < kt_count) load_stage(ring.stage(next), a, b, m_base, n_base, kt_begin + next);
      commit_copies();
      compute_stage(acc, ring.stage(t), warp_m0, warp_n0, lane);
    }
    wait_copies<0>();

    HIPGRAD_UNROLL
    for (int i = 0; i < kAtomsM; ++i) HIPGRAD_UNROLL
    for (int j = 0; j < kAtomsN; ++j) HIPGRAD_UNROLL
    for (int e = 0; e < Atom::kAccumulators; ++e) {
      const AccumulatorCoord c = Atom::accumulator(lane, e);
      epilogue.store(m_base + warp_m0 + i * Atom::kM + c.m, n_base + warp_n0 + j * Atom::kN + c.n, acc[i][j][e],
                     w.split);
    }
  }
};

}  // namespace detail
}  // namespace hipgrad::gemm
