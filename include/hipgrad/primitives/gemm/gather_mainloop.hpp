/// @file gather_mainloop.hpp
/// @brief The warp-specialised, persistent tile GEMM of sm_90a for operands read through any
///        operand loader (a convolution's implicit im2col, a dense matrix): the TMA kernel's
///        stage ring and consumer warpgroups (tma_mainloop.hpp), with a producer warpgroup that
///        fills each stage by cp.async of 16-byte vectors.
///
/// Why: the cp.async wgmma mainloop (wgmma_mainloop.hpp) makes every thread copy and ends every
/// K tile in a block barrier, so the consumers' wgmma stream stops at each tile. Here the copies
/// are the producer warpgroup's alone: each of its 128 threads copies its chunks of the stage and
/// arrives on the stage's full barrier when they land (cp.async.mbarrier.arrive.noinc), so the
/// barrier completes once all 128 threads' copies are in, without the producer waiting for them.
/// The consumers fence each landed stage for the asynchronous proxy (cp.async writes through the
/// generic proxy, wgmma reads through the asynchronous one) before their wgmmas read it.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/primitives/gemm/tile_copy.hpp"
#include "hipgrad/primitives/gemm/tma_mainloop.hpp"

namespace hipgrad::gemm {

/// Whether the gather kernel runs Config Cfg with loaders A, B: what the TMA kernel's consumers
/// run (tma_kernel_supported), for any loader of 16-byte aligned vectors.
template <typename Cfg, typename LoaderA, typename LoaderB>
HIPGRAD_HOST_DEVICE constexpr bool gather_kernel_supported() {
  return tma_kernel_supported<Cfg, LoaderA, LoaderB>();
}

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

/// The gather producer: its warpgroup's 128 threads wait for a free stage, copy their chunks of
/// both tiles (copy_tile_async: every chunk by cp.async, zero-filled ones too, so that the
/// arrival covers them) and arrive on the full barrier once those land.
template <typename Cfg, typename LoaderA, typename LoaderB>
struct GatherProducer {
  /// As the TMA producer: its copies run in a loop that is not unrolled (copy_tile_async), so
  /// 40 registers hold them, and the consumers keep the most.
  static constexpr int kRegisters = 40;
  static constexpr int kArrivals = 128;
  static constexpr bool kFenceStages = true;
  using Plan = WgmmaPlan<Cfg, LoaderA, LoaderB>;
  using TileA = typename Plan::TileA;
  using TileB = typename Plan::TileB;

  template <typename Ring>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const LoaderA& a, const LoaderB& b, int items, int tiles_m,
                                     int tiles_n, int k_tiles, int per_split, int thread) {
    for_each_free_stage<Cfg>(ring, items, tiles_m, tiles_n, k_tiles, per_split,
                             [&](int s, int m_base, int n_base, int k) {
                               copy_tile_async<TileA, 128>(ring.stage(s), a, m_base, k, thread);
                               copy_tile_async<TileB, 128>(ring.stage(s) + TileA::kBytes, b, n_base, k, thread);
                               mbarrier_arrive_when_copies_land(&ring.full[s]);
                             });
    // Copies still in flight when the thread exits complete all the same: the consumers wait
    // for the barriers they arrive on.
  }
};

template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
using GatherMainloop = WarpSpecialisedMainloop<Cfg, LoaderA, LoaderB, Epilogue, GatherProducer<Cfg, LoaderA, LoaderB>>;

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

}  // namespace hipgrad::gemm
