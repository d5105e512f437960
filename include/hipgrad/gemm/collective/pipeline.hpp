/// @file pipeline.hpp
/// @brief The stage rings of the tile GEMM's mainloops: StageRing, the ring of the cp.async
///        mainloops (filled by the chunk copies of async_copy.hpp, ordered by block barriers),
///        and for the warp-specialised kernel BarrierRing, whose stages are handed between
///        producer and consumers through two transaction barriers a stage, walked by a
///        PipelineState.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/primitives/async_copy.hpp"

namespace hipgrad::gemm {

/// The ring of kStages shared-memory stages of kStageBytes each. Iteration kt of the mainloop
/// computes on stage kt % kStages while tile kt + kStages − 1 is loaded into the stage that
/// iteration kt − 1 computed on: one barrier per iteration orders both.
template <int kStages, int kStageBytes>
struct StageRing {
  static_assert(kStages >= 2, "a pipeline needs at least two stages");
  static constexpr int kBytes = kStages * kStageBytes;
  char* base;
  HIPGRAD_DEVICE HIPGRAD_INLINE char* stage(int tile) const { return base + (tile % kStages) * kStageBytes; }
};

/// Where one side of a barrier ring stands: the stage it uses next and the parity of that
/// stage's barrier phase, which flips each time the side wraps around the ring. Producer and
/// consumers each keep one and advance it once per K tile, so they meet every stage in the
/// same order.
template <int kStages>
struct PipelineState {
  int index = 0;
  std::uint32_t phase = 0;
  HIPGRAD_DEVICE HIPGRAD_INLINE void advance() {
    if (++index == kStages) index = 0, phase ^= 1u;
  }
};

#if defined(HIPGRAD_GEMM_TMA)

/// The warp-specialised kernel's ring in shared memory. Per stage s two barriers: full[s]
/// completes when the producer's arrivals and every byte of the stage's copies are in; empty[s]
/// when each consumer warp has seen its wgmmas of the stage finish. The producer acquires a
/// stage by waiting for the phase before its own (a fresh barrier reports it complete), so it
/// fills every stage once before it first waits for a consumer.
template <int kStages, int kStageBytes>
struct BarrierRing {
  using State = PipelineState<kStages>;
  char* stages;
  std::uint64_t* full;
  std::uint64_t* empty;
  float* staging;  ///< the consumers' epilogue staging, after the barriers
  char* extra;     ///< the producer's own shared memory, after the staging
  HIPGRAD_DEVICE char* stage(int s) const { return stages + s * kStageBytes; }

  /// Producer: waits until the consumers have released stage s, met in phase `phase`.
  HIPGRAD_DEVICE HIPGRAD_INLINE void producer_acquire(int s, std::uint32_t phase) const {
    mbarrier_wait(&empty[s], phase ^ 1u);
  }
  /// Consumer: waits until the stage of `state` has landed.
  HIPGRAD_DEVICE HIPGRAD_INLINE void consumer_wait(const State& state) const {
    mbarrier_wait(&full[state.index], state.phase);
  }
  /// Consumer: one warp's release of stage s (empty[s] expects one arrival per consumer warp).
  HIPGRAD_DEVICE HIPGRAD_INLINE void consumer_release(int s) const { mbarrier_arrive(&empty[s]); }
};

#endif  // HIPGRAD_GEMM_TMA

}  // namespace hipgrad::gemm
