/// @file channel_tiles_reduce.hpp
/// @brief Block-wide reduction of a group's per-(channel, tile) partials into per-channel totals,
///        parallel over channels and tiles alike.
///
/// A group holds C/G channels of T tiles each. With few channels and many tiles (N = 1, large
/// images) a thread per channel would walk thousands of tiles in sequence; a block reduction per
/// channel would run a barrier tree per channel. The block is split instead into channel lanes ×
/// tile lanes: as many channel lanes as there are channels (a power of two, at most the block),
/// the rest of the block as tile lanes. Each thread folds its tiles in order, then each
/// channel's tile lanes are combined by a fixed tree in shared memory, so the order depends on
/// the sizes only: deterministic.
#pragma once

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::groupnorm::detail {

template <int kThreads>
HIPGRAD_HOST_DEVICE constexpr int tile_lanes_for(Index channels, Index tiles) {
  int channel_lanes = 1;
  while (channel_lanes < kThreads && channel_lanes < channels) channel_lanes *= 2;
  int tile_lanes = kThreads / channel_lanes;
  while (tile_lanes > 1 && tile_lanes / 2 >= tiles) tile_lanes /= 2;  // no idle tile lanes
  return tile_lanes;
}

/// For c in [0, channels): visit(c, fold of partials[c·tiles + k] over k) — called by one thread
/// per channel. Every thread of the block must call; `scratch` holds kThreads states.
template <int kThreads, typename State, typename Op, typename Visit>
HIPGRAD_DEVICE void reduce_channel_tiles(const State* __restrict__ partials, Index channels, Index tiles,
                                         const State& identity, Op op, State* scratch, Visit&& visit) {
  const int tile_lanes = tile_lanes_for<kThreads>(channels, tiles);
  const int channel_lanes = kThreads / tile_lanes;
  const int tl = threadIdx.x % tile_lanes, cl = threadIdx.x / tile_lanes;
  for (Index batch = 0; batch < channels; batch += channel_lanes) {
    const Index c = batch + cl;
    State folded = identity;
    if (c < channels)
      for (Index k = tl; k < tiles; k += tile_lanes) folded = op(folded, partials[c * tiles + k]);
    scratch[threadIdx.x] = folded;
    block_sync();
    for (int stride = tile_lanes / 2; stride > 0; stride /= 2) {
      if (tl < stride) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
      block_sync();
    }
    if (tl == 0 && c < channels) visit(c, scratch[threadIdx.x]);
    block_sync();  // scratch is rewritten by the next batch
  }
}

}  // namespace hipgrad::groupnorm::detail
