/// @file position_boxes.hpp
/// @brief A stride phase's dx positions cut into boxes, for a producer that loads each A tile of
///        backward-data as one box of dy's tensor map (not yet used by the op: the decomposition is
///        checked on the CPU first, tests/conv/test_conv_position_boxes.cpp).
///
/// A phase's positions form the grid (n, i_1, …, i_NDim) of N × count_1 × … × count_NDim (the
/// last dimension fastest). An M tile is one box of shape[0] × … × shape[NDim] grid points, its
/// rows in the same order (row r: the last dimension fastest). For the tap j and channels
/// k0 … k0 + BK − 1 its A tile is the box of dy at (k0, o_1 − j_1·dilation_1, …, n) with o = the
/// phase's output_base + the box's first i: the positions of a phase step by one dy position, so
/// a box of dx positions reads a box of dy. Coordinates outside dy (the padding) read as zeros
/// when a tensor map loads them. Rows past the grid (the last box of a dimension) are computed
/// and not stored.
#pragma once

#include <array>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::conv::detail {

/// The largest box extent of a tensor map, per dimension.
inline constexpr int kMaxBoxExtent = 256;

template <int NDim>
struct PositionBoxes {
  static constexpr int kDims = NDim + 1;  ///< n, then the phase's spatial dimensions
  Index extent[kDims];                    ///< N, then the phase's count per dimension
  int shape[kDims];                       ///< grid points of a box per dimension
  Index boxes[kDims];                     ///< ceil(extent / shape)

  /// Boxes of the whole grid: the phase's M tiles.
  HIPGRAD_HOST_DEVICE Index tiles() const {
    Index t = 1;
    for (int d = 0; d < kDims; ++d) t *= boxes[d];
    return t;
  }

  /// Grid points per box (at most the tile's rows).
  HIPGRAD_HOST_DEVICE int rows() const {
    int r = 1;
    for (int d = 0; d < kDims; ++d) r *= shape[d];
    return r;
  }

  /// The first grid point of tile t (tiles in grid order, the last dimension fastest).
  HIPGRAD_HOST_DEVICE void origin(Index t, Index* first) const {
    for (int d = kDims - 1; d >= 0; --d) {
      first[d] = (t % boxes[d]) * shape[d];
      t /= boxes[d];
    }
  }

  /// The grid point of row r of the box that starts at `first`; false where it lies past the grid.
  HIPGRAD_HOST_DEVICE bool point(const Index* first, int r, Index* at) const {
    bool inside = r < rows();
    for (int d = kDims - 1; d >= 0; --d) {
      at[d] = first[d] + r % shape[d];
      r /= shape[d];
      inside = inside && at[d] < extent[d];
    }
    return inside;
  }
};

/// The box shape with the fewest boxes for a grid of `extent` and tiles of `rows` rows (every
/// box costs a whole tile): Π shape ≤ rows and shape[d] ≤ min(extent[d], kMaxBoxExtent); among
/// equals, the longest last dimension (the longest runs of dy in memory), then the next.
template <int NDim>
PositionBoxes<NDim> position_boxes(const std::array<Index, NDim + 1>& extent, int rows) {
  constexpr int kDims = NDim + 1;
  PositionBoxes<NDim> best{};
  Index best_tiles = -1;
  std::array<int, kDims> shape{};
  // Depth-first over the shapes, the last dimension first.
  auto visit = [&](auto&& self, int d, int room) -> void {
    if (d < 0) {
      PositionBoxes<NDim> b{};
      Index tiles = 1;
      for (int e = 0; e < kDims; ++e) {
        b.extent[e] = extent[static_cast<std::size_t>(e)];
        b.shape[e] = shape[static_cast<std::size_t>(e)];
        b.boxes[e] = (b.extent[e] + b.shape[e] - 1) / b.shape[e];
        tiles *= b.boxes[e];
      }
      // Shapes are visited from the longest last dimension down, so ties keep the first seen.
      if (best_tiles < 0 || tiles < best_tiles) best = b, best_tiles = tiles;
      return;
    }
    const Index cap = extent[static_cast<std::size_t>(d)] < kMaxBoxExtent ? extent[static_cast<std::size_t>(d)]
                                                                          : kMaxBoxExtent;
    const int most = static_cast<int>(cap < room ? cap : room);
    for (int s = most > 0 ? most : 1; s >= 1; --s) {
      shape[static_cast<std::size_t>(d)] = s;
      self(self, d - 1, room / s);
    }
  };
  visit(visit, kDims - 1, rows);
  return best;
}

}  // namespace hipgrad::conv::detail
