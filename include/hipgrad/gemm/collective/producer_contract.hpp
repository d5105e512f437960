/// @file producer_contract.hpp
/// @brief What a producer of the warp-specialised kernel provides (is_producer, which the kernel
///        asserts) and the producers' walk over the stage ring in the consumers' order.
///
/// A Producer provides kRegisters (what its warpgroup keeps after the register hand-over),
/// kArrivals (the arrivals that complete a full barrier's phase besides the bytes announced),
/// kFenceStages (whether consumers fence a landed stage for the asynchronous proxy: copies the
/// generic proxy wrote, which wgmma reads), kSharedBytes (its own shared memory, Ring::extra)
/// and produce(ring, schedule, thread), called by every thread of its warpgroup (0–127).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/gemm/collective/pipeline.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"

namespace hipgrad::gemm {

/// Whether P is a producer of the warp-specialised kernel for rings Ring and schedules Schedule.
template <typename P, typename Ring, typename Schedule, typename = void>
struct is_producer : std::false_type {};
template <typename P, typename Ring, typename Schedule>
struct is_producer<P, Ring, Schedule,
                   std::void_t<decltype(P::produce(std::declval<const Ring&>(), std::declval<const Schedule&>(), 0))>>
    : std::bool_constant<std::is_convertible_v<decltype(P::kRegisters), int> &&
                         std::is_convertible_v<decltype(P::kArrivals), int> &&
                         std::is_convertible_v<decltype(P::kFenceStages), bool> &&
                         std::is_convertible_v<decltype(P::kSharedBytes), int>> {};

namespace detail {

/// A producer's walk over the stage ring, in the consumers' order: for each of the block's work
/// items calls start(a, b, m_base, n_base) with the item's operands, then for every K tile of the
/// item visit(a, b, s, pass, m_base, n_base, k) with its stage s, the ring's pass over the stages
/// (the parity of the stage's barrier phase) and the tile's coordinates: A at (m_base, k), B at
/// (n_base, k).
template <typename Cfg, typename Schedule, typename Start, typename Visit>
HIPGRAD_DEVICE HIPGRAD_INLINE void for_each_stage(const Schedule& schedule, Start&& start, Visit&& visit) {
  PipelineState<Cfg::kStages> state;
  for (int item = static_cast<int>(blockIdx.x); item < schedule.items; item += static_cast<int>(gridDim.x)) {
    schedule.visit(item, [&](const auto& a, const auto& b, const auto&, const TileWork& w) {
      const int m_base = w.tile.m * Cfg::kBlockM, n_base = w.tile.n * Cfg::kBlockN;
      start(a, b, m_base, n_base);
      for (int t = 0; t < w.kt_count; ++t) {
        visit(a, b, state.index, state.phase, m_base, n_base, (w.kt_begin + t) * Cfg::kBlockK);
        state.advance();
      }
    });
  }
}

#if defined(HIPGRAD_GEMM_TMA)

/// for_each_stage whose K tiles wait until the consumers have freed the stage, then
/// fill(a, b, s, m_base, n_base, k) fills it.
template <typename Cfg, typename Ring, typename Schedule, typename Start, typename Fill>
HIPGRAD_DEVICE HIPGRAD_INLINE void for_each_free_stage(const Ring& ring, const Schedule& schedule, Start&& start,
                                                       Fill&& fill) {
  for_each_stage<Cfg>(schedule, start,
                      [&](const auto& a, const auto& b, int s, std::uint32_t pass, int m_base, int n_base, int k) {
                        ring.producer_acquire(s, pass);
                        fill(a, b, s, m_base, n_base, k);
                      });
}

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail
}  // namespace hipgrad::gemm
