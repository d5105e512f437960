/// @file tile_copy.hpp
/// @brief What the matrix mainloops share: the grouped block order over output tiles, a block's
///        work, and the copy of one operand tile from global memory into a swizzled
///        shared-memory stage.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/primitives/gemm/operand_loader.hpp"
#include "hipgrad/primitives/gemm/pipeline.hpp"

namespace hipgrad::gemm {

inline constexpr int kGroupM = 8;

/// Tile (m, n) of block `block` when tile rows are walked in groups of kGroupM.
struct TileCoord {
  int m;
  int n;
};
HIPGRAD_HOST_DEVICE inline TileCoord grouped_tile(int block, int tiles_m, int tiles_n) {
  const int per_group = kGroupM * tiles_n;
  const int first_m = (block / per_group) * kGroupM;
  const int rows = tiles_m - first_m < kGroupM ? tiles_m - first_m : kGroupM;
  const int in_group = block % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

/// What one block computes of a product: output tile `tile`, K tiles [kt_begin, kt_begin +
/// kt_count) of K split `split` (0 without a split).
struct TileWork {
  TileCoord tile;
  int split;
  int kt_begin;
  int kt_count;
};

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

namespace detail {

/// Copies chunk `c` (row-major over the tile's rows of Layout::kChunks chunks) of an operand
/// tile at (mn_base, k_base) into its swizzled place in `tile`. kAllAsync: by cp.async whether
/// the chunk is whole, partial or empty (copy_chunk_async; NVIDIA sm_80 and later), else
/// copy_chunk.
template <typename Tile, bool kAllAsync, typename Loader>
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_tile_chunk(char* tile, const Loader& loader, int mn_base, int k_base, int c) {
  using T = typename Loader::Element;
  constexpr int kChunksPerRow = Tile::Layout::kChunks;
  const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
  const int element = chunk * Tile::kChunkElements;
  const int mn = mn_base + (Tile::kKContiguous ? row : element);
  const int k = k_base + (Tile::kKContiguous ? element : row);
  const VectorSource<T> source = loader.vector(mn, k, Tile::kChunkElements);
  char* destination = tile + Tile::Layout::chunk_offset(row, chunk);
  const int valid_bytes = source.valid * static_cast<int>(sizeof(T));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kAllAsync) {
    copy_chunk_async(destination, source.pointer, valid_bytes);
    return;
  }
#endif
  copy_chunk(destination, source.pointer, valid_bytes);
}

/// Copies one operand tile (kMN × kBlockK at (mn_base, k_base)) into a swizzled stage, 16 bytes
/// per copy; consecutive threads take consecutive chunks of a row, i.e. consecutive addresses.
template <typename Tile, int kThreads, typename Loader>
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_tile(char* tile, const Loader& loader, int mn_base, int k_base) {
  constexpr int kChunks = Tile::kRows * Tile::Layout::kChunks;
  HIPGRAD_UNROLL
  for (int it = 0; it < ceil_div(kChunks, kThreads); ++it) {
    const int c = static_cast<int>(threadIdx.x) + it * kThreads;
    if (kChunks % kThreads != 0 && c >= kChunks) break;
    copy_tile_chunk<Tile, false>(tile, loader, mn_base, k_base, c);
  }
}

/// copy_tile by kThreads threads of which the caller is `thread`, every chunk by cp.async, in a
/// loop that is not unrolled: for a producer warpgroup with few registers, whose copies are
/// asynchronous anyway.
template <typename Tile, int kThreads, typename Loader>
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_tile_async(char* tile, const Loader& loader, int mn_base, int k_base,
                                                   int thread) {
  constexpr int kChunks = Tile::kRows * Tile::Layout::kChunks;
#pragma unroll 1
  for (int c = thread; c < kChunks; c += kThreads) copy_tile_chunk<Tile, true>(tile, loader, mn_base, k_base, c);
}

}  // namespace detail
}  // namespace hipgrad::gemm
