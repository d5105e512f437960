/// @file smem_layout.hpp
/// @brief Shared-memory operand tiles of the tile GEMM: rows of 16-byte chunks, XOR-swizzled so
///        that neither the 16-byte copies into a tile nor the fragment reads out of it (ldmatrix
///        on NVIDIA, element reads elsewhere) meet a bank conflict.
///
/// A tile keeps the orientation of its operand in global memory: the dimension that is
/// contiguous there (K for a row-major A, N for a row-major B, ...) is contiguous along a tile
/// row, so that a row is filled by 16-byte copies. Shared memory has 32 banks of 4 bytes, i.e.
/// eight 16-byte chunk positions per 128-byte line. Eight lanes of an ldmatrix (or eight rows of
/// a fragment) read the same logical chunk of eight consecutive rows; storing chunk c of row r at
/// chunk position c ^ f(r) spreads those eight reads over the eight positions of a line.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"

namespace hipgrad::gemm {

/// A kRows × kRowBytes tile (kRowBytes 16, 32, 64 or a multiple of 128). These are the
/// canonical swizzled layouts of sm_90's wgmma (wgmma_atom.hpp reads them through descriptors):
/// rows of up to 128 bytes follow each other, chunk c of row r at c ⊕ ((r / rows-per-line) mod
/// chunks) — the 32-, 64- and 128-byte swizzles, which XOR byte-offset bits 4.. with bits 7..;
/// longer rows are cut into 128-byte panels, each panel a kRows × 128-byte tile of its own
/// (the 128-byte swizzle repeated along the row at a stride of kRows·128 bytes).
template <int kRows_, int kRowBytes_>
struct SwizzledTile {
  static constexpr int kRows = kRows_;
  static constexpr int kRowBytes = kRowBytes_;
  static constexpr int kBytes = kRows * kRowBytes;
  static constexpr int kChunks = kRowBytes / 16;  ///< 16-byte chunks per row
  static_assert((kRowBytes >= 16 && kRowBytes <= 128 && (kRowBytes & (kRowBytes - 1)) == 0) || kRowBytes % 128 == 0,
                "SwizzledTile: a row must be 16, 32, 64 or a multiple of 128 bytes");
  /// Bytes of a row inside one panel (the swizzle width), and the bytes of a panel.
  static constexpr int kPanelRowBytes = kRowBytes < 128 ? kRowBytes : 128;
  static constexpr int kPanelBytes = kRows * kPanelRowBytes;
  static constexpr int kPanelChunks = kPanelRowBytes / 16;
  /// Rows that share one 128-byte line (rows shorter than a line), and the chunk bits permuted.
  static constexpr int kRowsPerLine = 8 / kPanelChunks;
  static constexpr int kSwizzleMask = kPanelChunks - 1;
  static_assert(kRowBytes <= 128 || kRows % 8 == 0, "SwizzledTile: panels need whole 8-row swizzle atoms");

  /// Byte offset of logical chunk `chunk` of row `row`. Within one 128-byte line the eight
  /// (row, chunk) pairs of eight consecutive rows at one logical chunk land on distinct chunk
  /// positions: rows sharing a line differ in the line half, rows of different lines in the XOR.
  HIPGRAD_HOST_DEVICE static constexpr int chunk_offset(int row, int chunk) {
    const int panel = chunk / kPanelChunks, in_panel = chunk % kPanelChunks;
    return panel * kPanelBytes + row * kPanelRowBytes + ((in_panel ^ ((row / kRowsPerLine) & kSwizzleMask)) << 4);
  }
  /// Byte offset of the element at byte `byte` of row `row` (an element never straddles chunks).
  HIPGRAD_HOST_DEVICE static constexpr int byte_offset(int row, int byte) {
    return chunk_offset(row, byte >> 4) + (byte & 15);
  }
};

/// Which 8×8 (16-bit) matrix lane `lane` addresses in an ldmatrix.x4 that loads a 16 (MN) × 16
/// (K) block, as offsets (mn, k) in elements of 16 bits from the block's corner. Lanes 8j..8j+7
/// give the eight rows of matrix j, and matrix j ends up in register j.
///  * kAOrder: registers (mn 0-7, k 0-7), (mn 8-15, k 0-7), (mn 0-7, k 8-15), (mn 8-15, k 8-15):
///    the A fragment of mma.m16n8k16 (and, read as 32-bit words, of m16n8k8.tf32).
///  * B order: (mn 0-7, k 0-7), (mn 0-7, k 8-15), (mn 8-15, k 0-7), (mn 8-15, k 8-15): the B
///    fragments of two neighbouring n8 blocks.
/// For a K-contiguous tile the lane's row is mn + (lane % 8) at column k; for an MN-contiguous
/// tile (read with .trans) it is row k + (lane % 8) at column mn.
struct LdmatrixLane {
  int mn;
  int k;
};
template <bool kAOrder>
HIPGRAD_HOST_DEVICE constexpr LdmatrixLane ldmatrix_x4_matrix_corner(int lane) {
  const int j = lane >> 3;
  const int first = (j & 1) * 8, second = (j >> 1) * 8;
  return kAOrder ? LdmatrixLane{first, second} : LdmatrixLane{second, first};
}

}  // namespace hipgrad::gemm

namespace hipgrad::gemm {

/// One pipeline stage of an operand in shared memory: kMN × kK elements of T, stored with the
/// dimension that is contiguous in global memory along the tile rows (K-contiguous: kMN rows of
/// kK elements; else kK rows of kMN elements). "MN" is M for A and N for B.
template <typename T, int kMN_, int kK_, bool kKContiguous_>
struct OperandTile {
  static constexpr int kMN = kMN_;
  static constexpr int kK = kK_;
  static constexpr bool kKContiguous = kKContiguous_;
  static constexpr int kElementBytes = static_cast<int>(sizeof(T));
  static constexpr int kRows = kKContiguous ? kMN : kK;
  static constexpr int kRowElements = kKContiguous ? kK : kMN;
  static constexpr int kChunkElements = 16 / kElementBytes;
  using Layout = SwizzledTile<kRows, kRowElements * kElementBytes>;
  static constexpr int kBytes = Layout::kBytes;
  static_assert(kRowElements % kChunkElements == 0, "OperandTile: a row must be whole 16-byte chunks");

  /// Byte offset of element (mn, k).
  HIPGRAD_HOST_DEVICE static constexpr int offset(int mn, int k) {
    return kKContiguous ? Layout::byte_offset(mn, k * kElementBytes) : Layout::byte_offset(k, mn * kElementBytes);
  }
  /// Byte offset of the 16-byte chunk that starts at row `row`, element `element` of the row.
  HIPGRAD_HOST_DEVICE static constexpr int chunk_offset(int row, int element) {
    return Layout::chunk_offset(row, element / kChunkElements);
  }
};

/// Byte offset, in a tile, of the row that lane `lane` hands to an ldmatrix.x4 loading the
/// 16 (MN) × 16 (K, in 16-bit units) block at (mn0, k0) (see ldmatrix_x4_matrix_corner). A
/// K-contiguous tile of 32-bit elements is read as pairs of 16-bit ones, so its k offsets are
/// halved; an MN-contiguous tile is read with .trans (16-bit elements only).
template <typename Tile, bool kAOrder>
HIPGRAD_HOST_DEVICE constexpr int ldmatrix_x4_row_offset(int mn0, int k0, int lane) {
  const LdmatrixLane corner = ldmatrix_x4_matrix_corner<kAOrder>(lane);
  if (Tile::kKContiguous) return Tile::offset(mn0 + corner.mn + (lane & 7), k0 + corner.k * 2 / Tile::kElementBytes);
  return Tile::offset(mn0 + corner.mn, k0 + corner.k + (lane & 7));
}

}  // namespace hipgrad::gemm
