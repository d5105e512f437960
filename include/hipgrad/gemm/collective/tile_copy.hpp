/// @file tile_copy.hpp
/// @brief The copy of one operand tile from global memory into a swizzled shared-memory stage,
///        16 bytes a copy, shared by the matrix mainloops and the gather producer.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/collective/pipeline.hpp"
#include "hipgrad/primitives/async_copy.hpp"

namespace hipgrad::gemm {

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
#if defined(HIPGRAD_CP_ASYNC)
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
