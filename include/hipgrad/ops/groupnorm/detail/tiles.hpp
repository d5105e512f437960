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

/// Column-tile mapping of channels-last kernels: V channels per thread.
template <int kThreads, int V>
struct ColumnMapping {
  Index columns;          ///< C / V vector columns
  int columns_per_block;  ///< min(columns, kThreads)
  int row_lanes;          ///< kThreads / columns_per_block: positions walked in parallel

  HIPGRAD_HOST_DEVICE explicit ColumnMapping(Index channels)
      : columns(channels / V),
        columns_per_block(static_cast<int>(columns < kThreads ? columns : kThreads)),
        row_lanes(kThreads / columns_per_block) {}

  HIPGRAD_HOST_DEVICE Index column_tiles() const { return (columns + columns_per_block - 1) / columns_per_block; }
};

/// Calls f(offset_x, offset_other) for every position of a planes tile handled by this thread,
/// scalar path (any strides): `other` is a second tensor with its own strides (y, dy or dx).
template <int kThreads, typename F>
HIPGRAD_DEVICE HIPGRAD_INLINE void for_each_strided(const Geometry& g, const PlaneTile& t, const DeviceStrides& a,
                                                    const DeviceStrides& b, F&& f) {
  for (Index s = t.begin + threadIdx.x; s < t.end; s += kThreads) f(g.offset(a, t.n, t.c, s), g.offset(b, t.n, t.c, s));
}

}  // namespace hipgrad::groupnorm::detail
