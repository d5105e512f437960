/// @file tile_copy.hpp
/// @brief What the matrix mainloops share: the grouped block order over output tiles and the
///        copy of one operand tile from global memory into a swizzled shared-memory stage.
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

namespace detail {

/// Copies one operand tile (kMN × kBlockK at (mn_base, k_base)) into a swizzled stage, 16 bytes
/// per copy; consecutive threads take consecutive chunks of a row, i.e. consecutive addresses.
template <typename Tile, int kThreads, typename Loader>
HIPGRAD_DEVICE HIPGRAD_INLINE void copy_tile(char* tile, const Loader& loader, int mn_base, int k_base) {
  using T = typename Loader::Element;
  constexpr int kChunksPerRow = Tile::Layout::kChunks;
  constexpr int kChunks = Tile::kRows * kChunksPerRow;
  HIPGRAD_UNROLL
  for (int it = 0; it < ceil_div(kChunks, kThreads); ++it) {
    const int c = static_cast<int>(threadIdx.x) + it * kThreads;
    if (kChunks % kThreads != 0 && c >= kChunks) break;
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    const int element = chunk * Tile::kChunkElements;
    const int mn = mn_base + (Tile::kKContiguous ? row : element);
    const int k = k_base + (Tile::kKContiguous ? element : row);
    const VectorSource<T> source = loader.vector(mn, k, Tile::kChunkElements);
    copy_chunk(tile + Tile::Layout::chunk_offset(row, chunk), source.pointer,
               source.valid * static_cast<int>(sizeof(T)));
  }
}

}  // namespace detail
}  // namespace hipgrad::gemm
