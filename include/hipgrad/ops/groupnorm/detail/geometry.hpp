/// @file geometry.hpp
/// @brief What the GroupNorm kernels need to know of a problem: sizes, per-tensor strides and
///        how the work is cut into tiles, as plain structs passed by value to kernels.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

namespace hipgrad::groupnorm::detail {

/// Strides of one tensor: n, c and up to three spatial dimensions (unused ones 0).
struct DeviceStrides {
  Index n = 0, c = 0;
  Index spatial[3] = {0, 0, 0};
};

/// Sizes and tiling, shared by all kernels of one call.
struct Geometry {
  Index n = 0, c = 0, groups = 0, group_channels = 0;
  Index spatial = 0;  ///< product of the spatial lengths
  int spatial_rank = 0;
  Index spatial_lengths[3] = {1, 1, 1};
  Index tile_spatial = 0;              ///< spatial positions per tile
  Index tiles_per_sample_channel = 0;  ///< ceil(spatial / tile_spatial)

  /// Memory offset of (n, c, s) for a tensor with `strides`; s is the flattened spatial index.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE Index offset(const DeviceStrides& strides, Index ni, Index ci, Index s) const {
    Index o = ni * strides.n + ci * strides.c;
    for (int d = spatial_rank - 1; d >= 0; --d) {
      const Index len = spatial_lengths[d];
      o += (s % len) * strides.spatial[d];
      s /= len;
    }
    return o;
  }
};

inline DeviceStrides device_strides(const TensorShape& t) {
  DeviceStrides s;
  s.n = t.strides[0];
  s.c = t.strides[1];
  for (int d = 2; d < t.rank; ++d) s.spatial[d - 2] = t.strides[d];
  return s;
}

/// Geometry with tiles of about `target_tile` spatial positions, but at least enough tiles in
/// all to give every multiprocessor several blocks.
inline Geometry make_geometry(const TensorShape& x, Index groups, Index tile_spatial) {
  Geometry g;
  g.n = x.n();
  g.c = x.c();
  g.groups = groups;
  g.group_channels = x.c() / groups;
  g.spatial = x.spatial_size();
  g.spatial_rank = x.rank - 2;
  for (int d = 0; d < g.spatial_rank; ++d) g.spatial_lengths[d] = x.lengths[d + 2];
  g.tile_spatial = tile_spatial < 1 ? 1 : (tile_spatial > g.spatial ? g.spatial : tile_spatial);
  g.tiles_per_sample_channel = (g.spatial + g.tile_spatial - 1) / g.tile_spatial;
  return g;
}

}  // namespace hipgrad::groupnorm::detail
