/// @file test_gemm_layout.cpp
/// @brief CPU checks of the tile GEMM's index math, which the GPU cannot show directly: the
///        swizzled tiles are bijections without bank conflicts for the copies and the ldmatrix
///        reads, an emulated ldmatrix.x4 on a swizzled tile hands every lane the elements that
///        the PTX fragment layouts of mma.m16n8k16 / m16n8k8.tf32 prescribe, the wgmma
///        descriptors address each element where the tile stores it (the PTX canonical layouts),
///        the accumulator maps cover their atoms once and put documented (lane, register) pairs
///        where the hardware does (PTX mma.m16n8k16/k8 and wgmma, AMD's matrix instruction
///        calculator for the MFMA 32x32 instructions), the grouped block order visits every
///        tile once, the gather producer's threads copy every chunk of a tile once, the box
///        producer's in-place transpose turns an MN-major fp32 tile into the K-major one, and the
///        operand loaders' split states (mn_state, k_state, advance_k) address what vector(mn, k)
///        does, with 64-bit offsets.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/arch/panel_transpose.hpp"
#include "hipgrad/gemm/arch/smem_layout.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/collective/gather_producer.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/config.hpp"
#include "hipgrad/gemm/kernel/tile_scheduler.hpp"

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
          ASSERT_EQ(regs[lane][q], expected)
              << "lane " << lane << " register " << q << " of block (" << mn0 << ", " << k0 << ")";
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
  check_tile<hg::OperandTile<hipgrad::half, 128, 32, true>>();  // A row-major / B col-major, 64-byte rows
  check_tile<hg::OperandTile<hipgrad::half, 256, 32, true>>();
  check_tile<hg::OperandTile<hipgrad::half, 128, 64, true>>();   // 128-byte rows
  check_tile<hg::OperandTile<hipgrad::half, 128, 32, false>>();  // A col-major / B row-major, 256-byte rows
  check_tile<hg::OperandTile<hipgrad::half, 256, 32, false>>();
  check_tile<hg::OperandTile<hipgrad::bfloat16, 64, 16, false>>();
  check_tile<hg::OperandTile<hipgrad::half, 256, 64, false>>();  // B row-major of the default: 512-byte rows in panels
  check_tile<hg::OperandTile<hipgrad::half, 128, 128, true>>();  // 256-byte K rows in two panels
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
  const int unswizzled =
      k_major ? static_cast<int>(b.start) + (i / 8) * static_cast<int>(b.stride) + (i % 8) * width + j * element_bytes
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
      ASSERT_EQ(hg::wgmma_descriptor(b.start, b.leading, b.stride, b.swizzle_bytes) >> 62, b.swizzle_bytes == 128 ? 1u
                                                                                           : b.swizzle_bytes == 64
                                                                                               ? 2u
                                                                                               : 3u);
      for (int i = 0; i < kMN; ++i)
        for (int j = 0; j < k_step; ++j)
          ASSERT_EQ(wgmma_reads(b, Tile::kKContiguous, Tile::kElementBytes, i, j), Tile::offset(mn0 + i, k0 + j))
              << "element (" << mn0 + i << ", " << k0 + j << ")";
    }
  }
}

TEST(GemmLayout, WgmmaDescriptorsAddressTheSwizzledTiles) {
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 64, true>, 64>();  // K-major, 128-byte swizzle
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 256, 64, true>, 256>();
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 32, true>, 64>();        // 64-byte swizzle
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 16, true>, 128>();       // 32-byte swizzle
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 128, true>, 64>();       // K over two panels
  check_wgmma_blocks<hg::OperandTile<hipgrad::half, 128, 64, false>, 64>();       // M-major A, panels of 64
  check_wgmma_blocks<hg::OperandTile<hipgrad::bfloat16, 256, 64, false>, 256>();  // N-major B, 4 panels
  check_wgmma_blocks<hg::OperandTile<float, 128, 32, true>, 128>();               // TF32: K-major only
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

/// Accumulator `reg` of lane `lane` holds element (m, n) of the atom's output: the value the
/// vendor's documentation gives, written out, not computed.
struct Placement {
  int lane, reg, m, n;
};

template <typename Map>
void expect_placements(const char* instruction, Map map, std::initializer_list<Placement> placements) {
  for (const Placement& p : placements) {
    const hg::AccumulatorCoord c = map(p.lane, p.reg);
    EXPECT_TRUE(c.m == p.m && c.n == p.n)
        << instruction << ": lane " << p.lane << ", accumulator " << p.reg << " mapped to (" << c.m << ", " << c.n
        << "), the hardware holds (" << p.m << ", " << p.n << ") there";
  }
}

TEST(GemmLayout, AccumulatorMapsPutElementsWhereTheHardwareDoes) {
  // PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" and "... for
  // mma.m16n8k8" (.tf32), accumulators C/D: groupID = lane >> 2, threadID_in_group = lane % 4;
  // c0, c1 at row groupID, c2, c3 at row groupID + 8; column threadID_in_group·2 + (i & 1).
  // The 16 × 16 atom is two n8 instructions: accumulator 4h + i is c_i of the one for columns
  // 8h..8h+7.
  expect_placements("mma.sync m16n8k16 / m16n8k8", hg::mma_sync_accumulator,
                    {{0, 0, 0, 0},  // first lane, c0
                     {0, 3, 8, 1},  // c3: eight rows down, odd column
                     {1, 0, 0, 2},  // next lane of the group: two columns on
                     {4, 0, 1, 0},  // next group: one row down
                     {5, 1, 1, 3},
                     {5, 2, 9, 2},
                     {5, 4, 1, 10},
                     {5, 7, 9, 11},  // second n8 half
                     {18, 2, 12, 4},
                     {18, 5, 4, 13},
                     {31, 3, 15, 7},
                     {31, 4, 7, 14},
                     {31, 7, 15, 15}});  // last lane
  // PTX ISA, wgmma register fragment layouts for accumulator D (.m64nNk16 and .m64nNk8, the
  // figures "WGMMA .m64nNk16/.m64nNk8 register fragment layout for accumulator matrix D"): warp w
  // of the warpgroup holds rows 16w..16w+15 (the mainloop adds 16w); within them d[4j..4j+3] lie
  // in columns 8j..8j+7 as c0..c3 of mma.m16n8 above, j up to N/8 − 1 (N = 256: d0..d127).
  expect_placements("wgmma m64nNk16 / m64nNk8", hg::mma_sync_accumulator,
                    {{0, 8, 0, 16},        // d8: third 8-column block
                     {0, 127, 8, 249},     // d127 of N = 256: last block, row + 8, odd column
                     {13, 62, 11, 122},    // groupID 3, threadID_in_group 1, d62 = c2 of block 15
                     {30, 96, 7, 196},     // groupID 7, threadID_in_group 2, d96 = c0 of block 24
                     {31, 125, 7, 255}});  // last lane, d125 = c1 of the last block
  // AMD Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator), D matrix of
  // v_mfma_f32_32x32x2f32, v_mfma_f32_32x32x8f16, v_mfma_f32_32x32x8bf16_1k (CDNA2, gfx90a) and
  // v_mfma_f32_32x32x2_f32, _32x32x8_f16, _32x32x8_bf16 (CDNA3, gfx94x), all alike: D[i][j] in
  // GPR 4·floor(i / 8) + i % 4 of lane 32·floor(i / 4) % 64 + j, i.e. lane l holds column l % 32
  // and GPR g row 8·floor(g / 4) + 4·floor(l / 32) + g % 4. Each entry is the tool's
  // --matrix-entry answer "v<reg>{<lane>} = D[m][n]".
  expect_placements("MFMA 32x32 (gfx90a, gfx94x)", hg::mfma32_accumulator,
                    {{0, 0, 0, 0},        // v0{0}
                     {0, 3, 3, 0},        // v3{0}: registers 0..3 are consecutive rows
                     {0, 4, 8, 0},        // v4{0}: the next block of four registers, eight rows down
                     {0, 15, 27, 0},      // v15{0}
                     {31, 0, 0, 31},      // v0{31}: lanes run along the columns
                     {31, 5, 9, 31},      // v5{31}
                     {32, 0, 4, 0},       // v0{32}: the upper 32 lanes, four rows down
                     {37, 6, 14, 5},      // v6{37}
                     {37, 9, 21, 5},      // v9{37}
                     {45, 2, 6, 13},      // v2{45}
                     {50, 12, 28, 18},    // v12{50}
                     {63, 11, 23, 31},    // v11{63}
                     {63, 15, 31, 31}});  // v15{63}: last lane, last register
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

/// The gather producer's 128 threads (thread t: chunk t mod P of rows t / P + i·128 / P) copy
/// every chunk of a tile exactly once, for the tiles of the default configurations.
template <typename Tile>
void expect_gather_split_covers_tile() {
  using Split = hg::detail::GatherSplit<Tile>;
  ASSERT_TRUE(Split::kSupported);
  std::vector<int> copies(Tile::kRows * Split::kChunksPerRow, 0);
  for (int thread = 0; thread < 128; ++thread) {
    for (int i = 0; i < Split::kChunksPerThread; ++i) {
      const int row = thread / Split::kChunksPerRow + i * Split::kRowStep, chunk = thread % Split::kChunksPerRow;
      ASSERT_LT(row, Tile::kRows);
      ++copies[row * Split::kChunksPerRow + chunk];
    }
  }
  for (std::size_t c = 0; c < copies.size(); ++c) EXPECT_EQ(copies[c], 1) << "chunk " << c;
}

template <typename T>
void expect_gather_splits_of_default_config() {
  using Cfg = hg::DefaultConfigFor<T>;
  expect_gather_split_covers_tile<hg::OperandTile<T, Cfg::kBlockM, Cfg::kBlockK, true>>();
  expect_gather_split_covers_tile<hg::OperandTile<T, Cfg::kBlockM, Cfg::kBlockK, false>>();
  expect_gather_split_covers_tile<hg::OperandTile<T, Cfg::kBlockN, Cfg::kBlockK, true>>();
  expect_gather_split_covers_tile<hg::OperandTile<T, Cfg::kBlockN, Cfg::kBlockK, false>>();
}

TEST(GemmLayout, GatherProducerCopiesEveryChunkOnce) {
  expect_gather_splits_of_default_config<hipgrad::half>();
  expect_gather_splits_of_default_config<float>();
}

/// The box producer's transpose (panel_transpose.hpp): the tasks of every 32-MN panel, in any
/// order, turn the MN-major fp32 tile of BK = 32 into the K-major tile of the same elements;
/// each task writes only its two blocks, and `convert` sees every element once.
TEST(GemmLayout, PanelTransposeTurnsMnMajorTilesKMajor) {
  using Landed = hg::OperandTile<float, 128, 32, false>;
  using Read = hg::OperandTile<float, 128, 32, true>;
  static_assert(Landed::kBytes == Read::kBytes && hg::TransposedPanel::kBytes * 4 == Read::kBytes, "4 panels");
  const std::vector<unsigned char> expected = coded_tile<Read>();
  for (bool reversed : {false, true}) {
    std::vector<unsigned char> tile = coded_tile<Landed>();
    int converted = 0;
    std::set<int> written;
    for (int i = 0; i < 4 * hg::kPanelTransposeTasks; ++i) {
      const int task = reversed ? 4 * hg::kPanelTransposeTasks - 1 - i : i;
      const std::vector<unsigned char> before = tile;
      hg::transpose_panel_task(
          reinterpret_cast<char*>(tile.data()) + task / hg::kPanelTransposeTasks * hg::TransposedPanel::kBytes,
          task % hg::kPanelTransposeTasks, [&](std::uint32_t bits) {
            ++converted;
            return bits;
          });
      for (int b = 0; b < Read::kBytes; b += 4) {
        if (std::memcmp(before.data() + b, tile.data() + b, 4) != 0) EXPECT_TRUE(written.insert(b).second) << b;
      }
    }
    EXPECT_EQ(converted, 128 * 32);
    EXPECT_EQ(tile, expected) << (reversed ? "tasks in reverse" : "tasks in order");
  }
  const hg::PanelBlockPair last = hg::panel_block_pair(hg::kPanelTransposeTasks - 1);
  EXPECT_EQ(last.row, 7);
  EXPECT_EQ(last.column, 7);
}

/// vector(mn_state(mn), k_state(k), length) is vector(mn, k, length) everywhere, edges and
/// outside included, and advance_k reaches the state k_state would make.
template <typename T, bool kKContiguous>
void expect_split_states_match_vector() {
  constexpr int kMn = 5, kK = 11, kStride = 13;
  std::vector<T> storage(kStride * kStride);
  const hg::DenseOperand<T, kKContiguous> op{storage.data(), kStride, kMn, kK};
  for (int length : {1, 4, 8}) {
    for (int mn = 0; mn < kMn + 3; ++mn) {
      auto k_state = op.k_state(0);
      for (int k = 0; k < kK + 3; ++k) {
        const hg::VectorSource<T> direct = op.vector(mn, k, length);
        const hg::VectorSource<T> split = op.vector(op.mn_state(mn), op.k_state(k), length);
        const hg::VectorSource<T> advanced = op.vector(op.mn_state(mn), k_state, length);
        SCOPED_TRACE("mn " + std::to_string(mn) + ", k " + std::to_string(k) + ", length " + std::to_string(length));
        EXPECT_EQ(split.valid, direct.valid);
        EXPECT_EQ(advanced.valid, direct.valid);
        if (direct.valid > 0) {
          EXPECT_EQ(split.pointer, direct.pointer);
          EXPECT_EQ(advanced.pointer, direct.pointer);
        }
        op.advance_k(k_state, 1);
      }
    }
  }
}

TEST(GemmLayout, LoaderSplitStatesAddressWhatVectorDoes) {
  expect_split_states_match_vector<float, true>();
  expect_split_states_match_vector<float, false>();
  expect_split_states_match_vector<hipgrad::half, true>();
  expect_split_states_match_vector<hipgrad::half, false>();
}

/// Offsets beyond 2^31 elements: rows of 2^20 elements, 2^12 + 3 of them (never dereferenced).
TEST(GemmLayout, LoaderOffsetsAre64Bit) {
  const hipgrad::Index stride = hipgrad::Index{1} << 20;
  const int rows = (1 << 12) + 3;
  const auto* base = reinterpret_cast<const hipgrad::half*>(std::uintptr_t{1} << 40);
  const hg::DenseOperand<hipgrad::half, true> k_rows{base, stride, rows, 64};
  const hg::DenseOperand<hipgrad::half, false> k_columns{base, stride, 64, rows};
  const hipgrad::Index expected = static_cast<hipgrad::Index>(rows - 1) * stride + 8;
  EXPECT_EQ(k_rows.vector(rows - 1, 8, 8).pointer - base, expected);
  EXPECT_EQ(k_rows.vector(k_rows.mn_state(rows - 1), k_rows.k_state(8), 8).pointer - base, expected);
  EXPECT_EQ(k_columns.vector(8, rows - 1, 8).pointer - base, expected);
  auto k = k_columns.k_state(rows - 3);
  k_columns.advance_k(k, 2);
  EXPECT_EQ(k_columns.vector(k_columns.mn_state(8), k, 8).pointer - base, expected);
}

}  // namespace
