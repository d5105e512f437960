/// @file pipeline.hpp
/// @brief The stage ring of the multistage tile GEMM mainloop, filled by the chunk copies of
///        async_copy.hpp (asynchronous on sm_80+, register-staged elsewhere).
#pragma once

#include "hipgrad/core/config.hpp"
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

}  // namespace hipgrad::gemm
