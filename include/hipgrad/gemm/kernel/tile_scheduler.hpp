/// @file tile_scheduler.hpp
/// @brief The work items of one product: the grouped block order over its output tiles, the
///        work of a block of a grid kernel, and the persistent kernels' walk over tiles and K
///        splits (ProductSchedule; GroupedSchedule in grouped_tiles.hpp does the same over
///        several sub-problems).
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"

namespace hipgrad::gemm {

inline constexpr int kGroupM = 8;

/// Tile (m, n) of block `block` when tile rows are walked in groups of kGroupM.
HIPGRAD_HOST_DEVICE inline TileCoord grouped_tile(int block, int tiles_m, int tiles_n) {
  const int per_group = kGroupM * tiles_n;
  const int first_m = (block / per_group) * kGroupM;
  const int rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;
  const int in_group = block % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

/// Work item `item` of tiles_m·tiles_n·splits: tile item mod tiles (in grouped_tile's order) of
/// split item / tiles, per_split K tiles a split (fewer in the last).
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE TileWork tile_work(int item, int tiles_m, int tiles_n, int k_tiles, int per_split) {
  const int tiles = tiles_m * tiles_n;
  const int split = item / tiles;
  const int kt_begin = split * per_split;
  const int rest = k_tiles - kt_begin;
  return {grouped_tile(item % tiles, tiles_m, tiles_n), split, kt_begin, rest < per_split ? rest : per_split};
}

/// The work of a block of a grid kernel over one product: tile blockIdx.x (grouped_tile's
/// order) of K split blockIdx.z, k_tiles_per_split K tiles a split.
template <typename Cfg, typename LoaderA, typename LoaderB>
HIPGRAD_DEVICE HIPGRAD_INLINE TileWork block_tile_work(const LoaderA& a, const LoaderB& b, int k_tiles_per_split) {
  const int tiles_m = ceil_div(a.mn_size(), Cfg::kBlockM), tiles_n = ceil_div(b.mn_size(), Cfg::kBlockN);
  const int k_tiles = ceil_div(a.k_size(), Cfg::kBlockK);
  const int split = static_cast<int>(blockIdx.z), kt_begin = split * k_tiles_per_split;
  const int kt_count = k_tiles - kt_begin < k_tiles_per_split ? k_tiles - kt_begin : k_tiles_per_split;
  return {grouped_tile(static_cast<int>(blockIdx.x), tiles_m, tiles_n), split, kt_begin, kt_count};
}

/// The work items of one product: tiles_m·tiles_n tiles times the K splits (tile_work).
/// visit(item, f) calls f(a, b, epilogue, work) for work item `item`; GroupedSchedule
/// (grouped_tiles.hpp) does the same over several sub-problems.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
struct ProductSchedule {
  const LoaderA& a;
  const LoaderB& b;
  const Epilogue& epilogue;
  int tiles_m, tiles_n, k_tiles, per_split, items;

  HIPGRAD_DEVICE ProductSchedule(const LoaderA& a_, const LoaderB& b_, const Epilogue& epilogue_, int per_split_,
                                 int splits)
      : a(a_),
        b(b_),
        epilogue(epilogue_),
        tiles_m(ceil_div(a_.mn_size(), Cfg::kBlockM)),
        tiles_n(ceil_div(b_.mn_size(), Cfg::kBlockN)),
        k_tiles(ceil_div(a_.k_size(), Cfg::kBlockK)),
        per_split(per_split_),
        items(tiles_m * tiles_n * splits) {}

  template <typename Visit>
  HIPGRAD_DEVICE HIPGRAD_INLINE void visit(int item, Visit&& visit) const {
    visit(a, b, epilogue, tile_work(item, tiles_m, tiles_n, k_tiles, per_split));
  }
};

}  // namespace hipgrad::gemm
