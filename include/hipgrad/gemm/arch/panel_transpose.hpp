/// @file panel_transpose.hpp
/// @brief Turns a landed 128-byte panel of 32-bit elements from MN-major to K-major in place, so
///        that TF32 wgmma (which reads K-major tiles only) can read an operand whose copies
///        bring it MN-major.
///
/// An MN-major tile of 32-bit elements with BK = 32 is, per 32 MN, one 32 × 128-byte panel
/// (row k, element mn at chunk (mn / 4) ⊕ (k mod 8)); the K-major tile of the same 32 MN holds
/// the same 4 KB as 32 rows mn of 32 k at chunk (k / 4) ⊕ (mn mod 8). Both are one swizzle
/// function L(r, c) with the roles of row and column exchanged, so the panel turns K-major by
/// swapping L(r, c) with L(c, r): a task takes the 4 × 4 blocks (R, C) and (C, R), R ≤ C, reads
/// each as four 16-byte chunks and writes each transposed into the other's place (a diagonal
/// block into its own). The panel's 36 tasks touch disjoint elements, so threads need no
/// ordering among themselves.
#pragma once

#include <cstdint>
#include <cstring>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"  // uint4
#include "hipgrad/gemm/arch/smem_layout.hpp"

namespace hipgrad::gemm {

/// A panel: 32 rows of 128 bytes (32 elements of 4 bytes), 128-byte swizzled.
using TransposedPanel = SwizzledTile<32, 128>;
inline constexpr int kPanelTransposeTasks = 36;  ///< block pairs (R ≤ C) of an 8 × 8 grid of 4 × 4 blocks

/// The block pair of task `task` (0–35): row R and column C ≥ R of the 8 × 8 block grid.
struct PanelBlockPair {
  int row;
  int column;
};
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE PanelBlockPair panel_block_pair(int task) {
  int row = 0;
  while (task >= 8 - row) task -= 8 - row, ++row;
  return {row, row + task};
}

namespace detail {

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void load_chunk(const char* p, std::uint32_t (&v)[4]) {
#if defined(HIPGRAD_DEVICE_PASS)
  const uint4 c = *reinterpret_cast<const uint4*>(p);
  v[0] = c.x, v[1] = c.y, v[2] = c.z, v[3] = c.w;
#else
  std::memcpy(v, p, 16);
#endif
}

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store_chunk(char* p, const std::uint32_t (&v)[4]) {
#if defined(HIPGRAD_DEVICE_PASS)
  *reinterpret_cast<uint4*>(p) = make_uint4(v[0], v[1], v[2], v[3]);
#else
  std::memcpy(p, v, 16);
#endif
}

/// Block (R, C) of a panel: rows 4R..4R+3, the chunk of columns 4C..4C+3 of each.
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void load_block(const char* panel, int r, int c, std::uint32_t (&v)[4][4]) {
  HIPGRAD_UNROLL
  for (int i = 0; i < 4; ++i) load_chunk(panel + TransposedPanel::chunk_offset(4 * r + i, c), v[i]);
}

/// Writes v transposed as block (R, C), each word through `convert`.
template <typename Convert>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store_block_transposed(char* panel, int r, int c,
                                                               const std::uint32_t (&v)[4][4], Convert& convert) {
  HIPGRAD_UNROLL
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t row[4] = {convert(v[0][i]), convert(v[1][i]), convert(v[2][i]), convert(v[3][i])};
    store_chunk(panel + TransposedPanel::chunk_offset(4 * r + i, c), row);
  }
}

}  // namespace detail

/// Task `task` of the in-place transpose of `panel`, each element's bits through `convert` (e.g.
/// rounding to TF32) on their way.
template <typename Convert>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void transpose_panel_task(char* panel, int task, Convert convert) {
  const PanelBlockPair b = panel_block_pair(task);
  std::uint32_t upper[4][4], lower[4][4];
  detail::load_block(panel, b.row, b.column, upper);
  if (b.row == b.column) return detail::store_block_transposed(panel, b.row, b.row, upper, convert);
  detail::load_block(panel, b.column, b.row, lower);
  detail::store_block_transposed(panel, b.column, b.row, upper, convert);
  detail::store_block_transposed(panel, b.row, b.column, lower, convert);
}

}  // namespace hipgrad::gemm
