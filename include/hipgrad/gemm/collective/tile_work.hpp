/// @file tile_work.hpp
/// @brief What one block computes of a product: the data a tile scheduler (kernel/) hands a
///        mainloop (collective/) per work item.
#pragma once

namespace hipgrad::gemm {

/// An output tile's coordinates in block tiles.
struct TileCoord {
  int m;
  int n;
};

/// What one block computes of a product: output tile `tile`, K tiles [kt_begin, kt_begin +
/// kt_count) of K split `split` (0 without a split).
struct TileWork {
  TileCoord tile;
  int split;
  int kt_begin;
  int kt_count;
};

}  // namespace hipgrad::gemm
