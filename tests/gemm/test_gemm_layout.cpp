/// @file test_gemm_layout.cpp
/// @brief CPU checks of the tile GEMM's index math, which the GPU cannot show directly: the
///        swizzled tiles are bijections without bank conflicts for the copies and the ldmatrix
///        reads, an emulated ldmatrix.x4 on a swizzled tile hands every lane the elements that
///        the PTX fragment layouts of mma.m16n8k16 / m16n8k8.tf32 prescribe, the wgmma
///        descriptors address each element where the tile stores it (the PTX canonical layouts),
///        the accumulator maps cover their atoms once, and the grouped block order visits every
///        tile once.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "hipgrad/primitives/gemm/mma_atom.hpp"
#include "hipgrad/primitives/gemm/smem_layout.hpp"
#include "hipgrad/primitives/gemm/tile_gemm.hpp"
#include "hipgrad/primitives/gemm/wgmma_atom.hpp"

namespace {

namespace hg = hipgrad::gemm;

/// A tile whose element (mn, k) holds a code naming it: mn·64 + k in 16 bits, mn·65536 + k in 32.
template <typename Tile>
std::vector<unsigned char> coded_tile() {
  std::vector<unsigned char> bytes(Tile::kBytes, 0);
  for (int mn = 0; mn < Tile::kMN; ++mn) {
    for (int k = 0; k < Tile::kK; ++k) {
      const std::uint32_t code = Tile::kElementBytes == 2 ? static_cast<std::uint32_t>(mn * 64 + k)
                                                          : static_cast<std::uint32_t>(mn * 65536 + k);
      std::memcpy(bytes.data() + Tile::offset(mn, k), &code, Tile::kElementBytes);
    }
  }
  return bytes;
}

std::uint32_t code16(int mn, int k) { return static_cast<std::uint32_t>(mn * 64 + k); }
std::uint32_t word16(int mn, int k) { return code16(mn, k) | (code16(mn, k + 1) << 16); }
std::uint32_t code32(int mn, int k) { return static_cast<std::uint32_t>(mn * 65536 + k); }

std::uint32_t read32(const std::vector<unsigned char>& t, int offset) {
  std::uint32_t v;
  std::memcpy(&v, t.data() + offset, 4);
  return v;
}
std::uint32_t read16(const std::vector<unsigned char>& t, int offset) {
  std::uint16_t v;
  std::memcpy(&v, t.data() + offset, 2);
  return v;
}

/// ldmatrix.x4 as the PTX ISA defines it: lane 8j + r gives the address of row r of matrix j;
/// without .trans lane l receives in register j row l / 4, 16-bit columns 2·(l % 4) and +1 of
/// matrix j; with .trans it receives rows 2·(l % 4) and +1 of column l / 4.
void emulate_ldmatrix_x4(const std::vector<unsigned char>& tile, const int (&rows)[32], bool trans,
                         std::uint32_t (&regs)[32][4]) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int j = 0; j < 4; ++j) {
      if (!trans) {
        regs[lane][j] = read32(tile, rows[8 * j + lane / 4] + 4 * (lane % 4));
      } else {
        const int col = 2 * (lane / 4);
        regs[lane][j] = read16(tile, rows[8 * j + 2 * (lane % 4)] + col) |
                        (read16(tile, rows[8 * j + 2 * (lane % 4) + 1] + col) << 16);
      }
    }
  }
}

template <typename Tile>
void check_tile_is_bijection() {
  std::set<int> offsets;
  for (int mn = 0; mn < Tile::kMN; ++mn)
    for (int k = 0; k < Tile::kK; ++k) {
      const int o = Tile::offset(mn, k);
      ASSERT_GE(o, 0);
      ASSERT_LE(o + Tile::kElementBytes, Tile::kBytes);
      ASSERT_EQ(o % Tile::kElementBytes, 0);
      ASSERT_TRUE(offsets.insert(o).second) << "two elements at byte " << o;
      // The copy writes chunk (row, element / chunk) where the element is read back.
      const int row = Tile::kKContiguous ? mn : k, element = Tile::kKContiguous ? k : mn;
      ASSERT_EQ(o, Tile::chunk_offset(row, element) + (element % Tile::kChunkElements) * Tile::kElementBytes);
    }
  // Eight consecutive chunk copies of a warp quarter (128 bytes) never share a bank group.
  for (int row = 0; row < Tile::kRows; ++row) {
    for (int c0 = 0; c0 + 8 <= Tile::Layout::kChunks; c0 += 8) {
      std::set<int> groups;
      for (int c = c0; c < c0 + 8; ++c) groups.insert((Tile::Layout::chunk_offset(row, c) % 128) / 16);
      EXPECT_EQ(groups.size(), 8u);
    }
  }
}

/// Every ldmatrix.x4 of every 16 × 16 block of the tile: conflict-free rows, and the registers
/// hold the fragments of mma.m16n8k16 (16-bit) or m16n8k8.tf32 (32-bit, K-contiguous only).
template <typename Tile, bool kAOrder>
void check_ldmatrix_fragments() {
  const std::vector<unsigned char> tile = coded_tile<Tile>();
  constexpr bool k32 = Tile::kElementBytes == 4;
  const int k_step = k32 ? 8 : 16;
  for (int mn0 = 0; mn0 < Tile::kMN; mn0 += 16) {
    for (int k0 = 0; k0 < Tile::kK; k0 += k_step) {
      int rows[32];
      for (int lane = 0; lane < 32; ++lane) rows[lane] = hg::ldmatrix_x4_row_offset<Tile, kAOrder>(mn0, k0, lane);
      for (int j = 0; j < 4; ++j) {
        std::set<int> groups;
        for (int r = 0; r < 8; ++r) {
          ASSERT_EQ(rows[8 * j + r] % 16, 0);
          groups.insert((rows[8 * j + r] % 128) / 16);
        }
        EXPECT_EQ(groups.size(), 8u) << "bank conflict in matrix " << j << " of block (" << mn0 << ", " << k0 << ")";
      }
      std::uint32_t regs[32][4];
      emulate_ldmatrix_x4(tile, rows, !Tile::kKContiguous, regs);
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int q = 0; q < 4; ++q) {
          // A order: (mn + 8 for odd q, k + half for q >= 2); B order: the two swapped.
          const int mn = mn0 + g + 8 * (kAOrder ? q % 2 : q / 2);
          const int k_half = kAOrder ? q / 2 : q % 2;
          const std::uint32_t expected = k32 ? code32(mn, k0 + t + 4 * k_half) : word16(mn, k0 + 2 * t + 8 * k_half);
          ASSERT_EQ(regs[lane][q], expected) << "lane " << lane << " register " << q << " of block (" << mn0 << ", "
                                             << k0 << ")";
        }
      }
    }
  }
}

template <typename Tile>
void check_tile() {
  check_tile_is_bijection<Tile>();
  check_ldmatrix_fragments<Tile, true>();
  check_ldmatrix_fragments<Tile, false>();
}

TEST(GemmLayout, SwizzledTilesAndLdmatrixFragments16Bit) {
  check_tile<hg::OperandTile<hipgrad::half, 128, 32, true>>();    // A row-major / B col-major, 64-byte rows
  check_tile<hg::OperandTile<hipgrad::half, 256, 32, true>>();
  check_tile<hg::OperandTile<hipgrad::half, 128, 64, true>>();    // 128-byte rows
  check_tile<hg::OperandTile<hipgrad::half, 128, 32, false>>();   // A col-major / B row-major, 256-byte rows
  check_tile<hg::OperandTile<hipgrad::half, 256, 32, false>>();
  check_tile<hg::OperandTile<hipgrad::bfloat16, 64, 16, false>>();
  check_tile<hg::OperandTile<hipgrad::half, 256, 64, false>>();   // B row-major of the default: 512-byte rows in panels
  check_tile<hg::OperandTile<hipgrad::half, 128, 128, true>>();   // 256-byte K rows in two panels
}

TEST(GemmLayout, SwizzledTilesAndLdmatrixFragmentsTf32) {
  check_tile<hg::OperandTile<float, 128, 16, true>>();
  check_tile<hg::OperandTile<float, 256, 16, true>>();
  check_tile<hg::OperandTile<float, 128, 32, true>>();
  check_tile_is_bijection<hg::OperandTile<float, 128, 16, false>>();  // read element by element
  check_tile_is_bijection<hg::OperandTile<float, 256, 32, false>>();  // 1024-byte rows in panels
}

/// The byte a wgmma reads for element (i, j) of the block it is given (i along MN, j along K),
/// from the descriptor fields as the PTX ISA's canonical layouts define them: K-major,
/// (i / 8)·stride + (i % 8)·width + j·size; MN-major, (i / P)·leading + (j / 8)·stride +
/// (j % 8)·width + (i % P)·size with P elements per width; then the swizzle of the width XORs
/// address bits 4.. with bits 7.. of the (1024-byte aligned) tile offset.
int wgmma_reads(const hg::WgmmaBlock& b, bool k_major, int element_bytes, int i, int j) {
  const int width = b.swizzle_bytes, per_width = width / element_bytes;
  const int unswizzled = k_major ? static_cast<int>(b.start) + (i / 8) * static_cast<int>(b.stride) + (i % 8) * width +
                                       j * element_bytes
                                 : static_cast<int>(b.start) + (i / per_width) * static_cast<int>(b.leading) +
                                       (j / 8) * static_cast<int>(b.stride) + (j % 8) * width + (i % per_width) * element_bytes;
  const int mask = width / 16 - 1;
  return unswizzled ^ (((unswizzled >> 7) & mask) << 4);
}

/// Every wgmma block of a tile (MN blocks of kMN rows, K steps of 32 bytes) reads, per the
/// descriptor wgmma_block gives, exactly the bytes where Tile::offset put the elements.
template <typename Tile, int kMN>
void check_wgmma_blocks() {
  static_assert(hg::wgmma_readable<Tile, kMN>(), "the tile should be wgmma-readable");
  const int k_step = 32 / Tile::kElementBytes;
  for (int mn0 = 0; mn0 < Tile::kMN; mn0 += kMN) {
    for (int k0 = 0; k0 < Tile::kK; k0 += k_step) {
      const hg::WgmmaBlock b = hg::wgmma_block<Tile>(mn0, k0);
      ASSERT_EQ(b.start % 16, 0u);
      ASSERT_EQ(hg::wgmma_descriptor(b.start, b.leading, b.stride, b.swizzle_bytes) >> 62,
                b.swizzle_bytes == 128 ? 1u : b.swizzle_bytes == 64 ? 2u : 3u);
      for (int i = 0; i < kMN; ++i)
        for (int j = 0; j < k_step; ++j)
          ASSERT_EQ(wgmma_reads(b, Tile::kKContiguous, Tile::kElementBytes, i, j), Tile::offset(mn0 + i, k0 + j))
              << "element (" << mn0 + i << ", " << k0 + j << ")";
    }
  }
}

TEST(GemmLayout, WgmmaDescriptorsAddressTheSwizzledTiles) {
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 64, true>, 64>();    // K-major, 128-byte swizzle
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 256, 64, true>, 256>();
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 32, true>, 64>();    // 64-byte swizzle
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 16, true>, 128>();   // 32-byte swizzle
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 128, true>, 64>();   // K over two panels
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 64, false>, 64>();   // M-major A, panels of 64
  check_wgmma_blocks<hg::OperandTile<hipgrad::bfloat16, 256, 64, false>, 256>();  // N-major B, 4 panels
  check_wgmma_blocks<hg::OperandTile<float, 128, 32, true>, 128>();          // TF32: K-major only
  check_wgmma_blocks<hg::OperandTile<float, 256, 32, true>, 64>();
  static_assert(!hg::wgmma_readable<hg::OperandTile<float, 128, 32, false>, 64>(), "TF32 must be K-major");
}

TEST(GemmLayout, AccumulatorMapsCoverTheirAtomOnce) {
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      const hg::AccumulatorCoord c = hg::mma_sync_accumulator(lane, i);
      ASSERT_TRUE(c.m >= 0 && c.m < 16 && c.n >= 0 && c.n < 16);
      ASSERT_TRUE(seen.insert({c.m, c.n}).second);
    }
  EXPECT_EQ(seen.size(), 256u);
  // PTX: c0, c1 of lane l at row l / 4, columns 2·(l % 4) and +1; c2, c3 eight rows lower.
  EXPECT_EQ(hg::mma_sync_accumulator(5, 0).m, 1);
  EXPECT_EQ(hg::mma_sync_accumulator(5, 1).n, 3);
  EXPECT_EQ(hg::mma_sync_accumulator(5, 2).m, 9);
  EXPECT_EQ(hg::mma_sync_accumulator(5, 4).n, 10);
  seen.clear();
  for (int lane = 0; lane < 64; ++lane)
    for (int i = 0; i < 16; ++i) {
      const hg::AccumulatorCoord c = hg::mfma32_accumulator(lane, i);
      ASSERT_TRUE(c.m >= 0 && c.m < 32 && c.n >= 0 && c.n < 32);
      ASSERT_TRUE(seen.insert({c.m, c.n}).second);
    }
  EXPECT_EQ(seen.size(), 1024u);
}

TEST(GemmLayout, GroupedTileOrderVisitsEveryTileOnce) {
  for (int tiles_m : {1, 3, 8, 9, 17}) {
    for (int tiles_n : {1, 2, 5, 16}) {
      std::set<std::pair<int, int>> seen;
      for (int block = 0; block < tiles_m * tiles_n; ++block) {
        const hg::TileCoord t = hg::grouped_tile(block, tiles_m, tiles_n);
        ASSERT_TRUE(t.m >= 0 && t.m < tiles_m && t.n >= 0 && t.n < tiles_n);
        ASSERT_TRUE(seen.insert({t.m, t.n}).second);
      }
    }
  }
}

}  // namespace
