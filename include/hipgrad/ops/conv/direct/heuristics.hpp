/// @file heuristics.hpp
/// @brief When kAuto takes the direct kernels: groups too narrow for a matrix tile to be more
///        than padding, where the tile GEMM would otherwise run its SIMT path or pad a group of
///        one or two channels to a whole tile.
#pragma once

#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::direct {

/// Channels per group (C and K alike) at or below which kAuto may take the direct path.
inline constexpr Index kAutoChannels = 32;

/// Channels on one side of a group (C or K) at or below which kAuto takes the direct path
/// whatever the tile GEMM would run: depthwise and channel multipliers.
inline constexpr Index kNarrowChannels = 2;

/// Whether kAuto takes the direct path for a problem of T (where its plan runs): groups of at
/// most kAutoChannels channels in and out, where either side has at most kNarrowChannels or the
/// tile GEMM would take its SIMT path (its operands' channels not contiguous, exact fp32, or a
/// group's channels not whole 16-byte vectors).
template <typename T, int NDim>
bool auto_takes_direct(const Problem<NDim>& problem, bool channels_contiguous) {
  const Index c = problem.params.C, k = problem.params.K;
  const Index bytes = static_cast<Index>(sizeof(T));
  const bool gemm_simt =
      !channels_contiguous || (sizeof(T) == 4 && !problem.allow_tf32) || (c * bytes) % 16 != 0 || (k * bytes) % 16 != 0;
  return problem.algorithm == Algorithm::kAuto && c <= kAutoChannels && k <= kAutoChannels &&
         (gemm_simt || c <= kNarrowChannels || k <= kNarrowChannels);
}

}  // namespace hipgrad::conv::direct
