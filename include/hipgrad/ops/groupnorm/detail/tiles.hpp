/// @file tiles.hpp
/// @brief How a block walks its tile, for the two tuned layouts and the strided fallback.
///
/// Every GroupNorm kernel gives each thread a fixed channel (or a vector of V adjacent channels)
/// and lets it walk spatial positions, so per-channel constants live in registers:
///  * planes (NCHW, and any strides): a block owns (n, c, spatial tile); its threads stride
///    through the tile's positions, V contiguous positions per access when the plane is packed;
///  * channels last (NHWC): a block owns (n, spatial tile, column tile) of the [positions, C]
///    matrix of sample n; each thread owns V adjacent channels and strides through positions.
#pragma once

#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/groupnorm/detail/geometry.hpp"
#include "hipgrad/primitives/block_reduce.hpp"
#include "hipgrad/primitives/warp_reduce.hpp"

namespace hipgrad::groupnorm::detail {

/// The (n, c, spatial range) of a planes-tile, from a linear tile index.
struct PlaneTile {
  Index n, c, begin, end;

  HIPGRAD_HOST_DEVICE static PlaneTile at(const Geometry& g, Index tile) {
    PlaneTile t;
    const Index k = tile % g.tiles_per_sample_channel;
    const Index nc = tile / g.tiles_per_sample_channel;
    t.n = nc / g.c;
    t.c = nc % g.c;
    t.begin = k * g.tile_spatial;
    t.end = t.begin + g.tile_spatial < g.spatial ? t.begin + g.tile_spatial : g.spatial;
    return t;
  }
};

/// Which planes tile this thread works on, and its rank among the tile's threads. A tile is
/// walked by the whole block, or, for small planes, by kPlaneThreads threads (a warp), so that a
/// block walks kThreads / kPlaneThreads tiles at once instead of idling most of its threads.
/// `reverse` visits blocks last to first (the apply passes: see forward_apply_planes).
template <int kThreads, int kPlaneThreads>
struct PlaneWalker {
  static_assert(kThreads % kPlaneThreads == 0, "a block must hold whole tile walkers");
  static constexpr int kTilesPerBlock = kThreads / kPlaneThreads;
  Index tile;
  int thread;  ///< 0 .. kPlaneThreads - 1
  bool valid;  ///< false for the walkers of the last block that have no tile (whole warps)

  HIPGRAD_DEVICE PlaneWalker(Index total_tiles, bool reverse) {
    const Index block = reverse ? static_cast<Index>(gridDim.x) - 1 - blockIdx.x : static_cast<Index>(blockIdx.x);
    tile = block * kTilesPerBlock + threadIdx.x / kPlaneThreads;
    thread = static_cast<int>(threadIdx.x % kPlaneThreads);
    valid = tile < total_tiles;
  }
  HIPGRAD_DEVICE int walker() const { return static_cast<int>(threadIdx.x / kPlaneThreads); }
};

/// Reduction over the threads of one planes tile: the block's, or a logical warp's.
template <typename State, int kThreads, int kPlaneThreads>
struct TileReduce {
  using Impl =
      std::conditional_t<kPlaneThreads == kThreads, BlockReduce<State, kThreads>, WarpReduce<State, kPlaneThreads>>;
  using TempStorage = typename Impl::TempStorage[PlaneWalker<kThreads, kPlaneThreads>::kTilesPerBlock];

  /// The reduction, valid in the tile's thread 0. Every thread of a valid walker must call.
  template <typename Op>
  HIPGRAD_DEVICE static State reduce(TempStorage& storage, int walker, const State& value, Op op) {
    return Impl(storage[walker]).reduce(value, op);
  }
};

/// Column-tile mapping of channels-last kernels: V channels per thread, at most 32 vector
/// columns per block (a row segment of up to 512 bytes), split evenly over the column tiles; the
/// rest of the block walks positions in parallel lanes.
template <int kThreads, int V>
struct ColumnMapping {
  static constexpr Index kMaxColumnsPerBlock = 32;
  Index columns;          ///< C / V vector columns
  Index tiles;            ///< column tiles
  int columns_per_block;  ///< ceil(columns / tiles)
  int row_lanes;          ///< kThreads / columns_per_block: positions walked in parallel

  HIPGRAD_HOST_DEVICE explicit ColumnMapping(Index channels)
      : columns(channels >= V ? channels / V : 1),  // at least one (host-side sizing with C < V)
        tiles((columns + kMaxColumnsPerBlock - 1) / kMaxColumnsPerBlock),
        columns_per_block(static_cast<int>((columns + tiles - 1) / tiles)),
        row_lanes(kThreads / columns_per_block) {}

  HIPGRAD_HOST_DEVICE Index column_tiles() const { return tiles; }
};

/// This thread's place in a channels-last tile: sample n, tile k (positions [begin, end)), its
/// vector column and lane.
template <int kThreads, int V>
struct ColumnTile {
  ColumnMapping<kThreads, V> map;
  Index n, k, begin, end, column;
  int lane, column_in_block;
  bool active;  ///< false for threads beyond the last column or lane

  HIPGRAD_DEVICE ColumnTile(const Geometry& g, Index tile) : map(g.c) {
    k = tile % g.tiles_per_sample_channel;
    const Index column_tile = (tile / g.tiles_per_sample_channel) % map.column_tiles();
    n = tile / g.tiles_per_sample_channel / map.column_tiles();
    lane = threadIdx.x / map.columns_per_block;
    column_in_block = threadIdx.x % map.columns_per_block;
    column = column_tile * map.columns_per_block + column_in_block;
    active = lane < map.row_lanes && column < map.columns;
    begin = k * g.tile_spatial;
    end = begin + g.tile_spatial < g.spatial ? begin + g.tile_spatial : g.spatial;
  }
  /// Index of (lane, column, vector element j) in a [lanes][columns][V] shared array.
  HIPGRAD_DEVICE int lane_slot(int lane_index, int j) const {
    return (lane_index * map.columns_per_block + column_in_block) * V + j;
  }
};

/// After a barrier that follows every active thread's write of its V states to
/// lanes[t.lane_slot(lane, j)]: adds up the lanes of each (column, element) of the block in lane
/// order, one (column, element) per thread, and calls finish(column_in_block, j, total) with the
/// total. (One thread per column adding V elements' lanes in turn made each block's tail V times
/// as long; the order, and so the bits, are the same.)
template <int kThreads, int V, typename State, typename Finish>
HIPGRAD_DEVICE HIPGRAD_INLINE void sum_lanes(const ColumnTile<kThreads, V>& t, const State* lanes, Finish finish) {
  const int columns_per_block = t.map.columns_per_block;
  const Index first_column = t.column - t.column_in_block;
  for (int slot = static_cast<int>(threadIdx.x); slot < columns_per_block * V; slot += kThreads) {
    const int column_in_block = slot / V, j = slot % V;
    if (first_column + column_in_block >= t.map.columns) break;  // slots of later columns are beyond too
    State total = lanes[column_in_block * V + j];
    for (int l = 1; l < t.map.row_lanes; ++l) total = total + lanes[(l * columns_per_block + column_in_block) * V + j];
    finish(column_in_block, j, total);
  }
}

}  // namespace hipgrad::groupnorm::detail
