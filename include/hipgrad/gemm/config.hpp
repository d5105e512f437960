/// @file config.hpp
/// @brief The tile GEMM's settings: Config (block tile, warps, stages) and SimtConfig, the tile
///        configurations the library selects, named by their shape, and the one place that picks
///        a configuration per element type and backend.
///
/// A name spells Config's parameters: Tile<BM>x<BN>x<BK>_W<warps M>x<warps N>_S<stages>.
/// The backend comes from core's kBackendIsCuda: this header tests no platform macro.
#pragma once

#include <string>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/numeric_types.hpp"

namespace hipgrad::gemm {

/// Settings of the matrix mainloop: block tile, warps along M and N (each warp computes a
/// (kBlockM / kWarpsM) × (kBlockN / kWarpsN) tile) and pipeline depth.
template <int kBlockM_, int kBlockN_, int kBlockK_, int kWarpsM_, int kWarpsN_, int kStages_>
struct Config {
  static constexpr int kBlockM = kBlockM_, kBlockN = kBlockN_, kBlockK = kBlockK_;
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_, kWarps = kWarpsM * kWarpsN;
  static constexpr int kWarpM = kBlockM / kWarpsM, kWarpN = kBlockN / kWarpsN;
  static constexpr int kStages = kStages_;
  static_assert(kBlockM % kWarpsM == 0 && kBlockN % kWarpsN == 0, "Config: warps must divide the block tile");

  /// Shared memory of the pipeline for elements of T, with room to start it on a 1024-byte
  /// boundary (the alignment of wgmma's swizzle patterns).
  template <typename T>
  static constexpr int shared_bytes() {
    return kStages * (kBlockM + kBlockN) * kBlockK * static_cast<int>(sizeof(T)) + kSharedAlignment;
  }
  static constexpr int kSharedAlignment = 1024;
  static std::string name() {
    return std::to_string(kBlockM) + "x" + std::to_string(kBlockN) + "x" + std::to_string(kBlockK) + "_w" +
           std::to_string(kWarpsM) + "x" + std::to_string(kWarpsN) + "_s" + std::to_string(kStages);
  }
};

/// Whether Config Cfg's pipeline for elements of T fits the shared memory of every target of
/// this build (kSharedBytesOfBuildTargets).
template <typename Cfg, typename T>
constexpr bool fits_build_targets() {
  return Cfg::template shared_bytes<T>() <= kSharedBytesOfBuildTargets;
}

/// NVIDIA, two warpgroups of 64-row bands, K tiles of 128 bytes, 4 stages: fp16/bf16 (one
/// 64 × 256 wgmma per band) and TF32 (row-major B: the swapped product, two 64 × 256 wgmmas per
/// band). On sm_90a they run in the TMA kernel, elsewhere as 8-warp mma.sync blocks.
using Tile128x256x64_W2x4_S4 = Config<128, 256, 64, 2, 4, 4>;
using Tile256x128x32_W4x2_S4 = Config<256, 128, 32, 4, 2, 4>;
/// NVIDIA fp16/bf16 for products of at most 128 columns (two warpgroups of 128-row bands), and
/// of at most 64 columns (5 stages): no half of a wider block computes columns past N.
using Tile256x128x64_W4x2_S4 = Config<256, 128, 64, 4, 2, 4>;
using Tile256x64x64_W8x1_S5 = Config<256, 64, 64, 8, 1, 5>;
/// The cp.async wgmma mainloop on sm_90a, for loaders TMA cannot serve: every thread copies
/// there, so the blocks are as large as 168 registers allow, to need fewer operand bytes per FLOP.
using Tile192x256x32_W3x4_S7 = Config<192, 256, 32, 3, 4, 7>;
using Tile256x192x16_W4x3_S8 = Config<256, 192, 16, 4, 3, 8>;
/// AMD (MFMA 32 × 32, wavefront 64): 4 waves, 64-byte K tiles, 2 stages, within 64 KB of LDS.
using Tile128x128x32_W2x2_S2 = Config<128, 128, 32, 2, 2, 2>;
using Tile128x128x16_W2x2_S2 = Config<128, 128, 16, 2, 2, 2>;

/// Cfg's blocks half as tall and twice as wide, warps moved from M to N: for products whose M
/// fits half of Cfg's block, so that fewer of each block's rows are idle.
template <typename Cfg>
using HalfTallTile = Config<Cfg::kBlockM / 2, Cfg::kBlockN * 2, Cfg::kBlockK, (Cfg::kWarpsM > 1 ? Cfg::kWarpsM / 2 : 1),
                            Cfg::kWarpsN * 2, Cfg::kStages>;
/// Cfg's blocks three-quarters as wide with a stage more: for N that Cfg's width pads by much
/// more than three-quarters of it does.
template <typename Cfg>
using ThreeQuarterWideTile =
    Config<Cfg::kBlockM, Cfg::kBlockN * 3 / 4, Cfg::kBlockK, Cfg::kWarpsM, Cfg::kWarpsN, Cfg::kStages + 1>;
/// What they make of the NVIDIA defaults (conv backward-weight's box path: TF32 and fp16/bf16).
using Tile128x256x32_W2x4_S4 = HalfTallTile<Tile256x128x32_W4x2_S4>;
using Tile128x192x64_W2x4_S5 = ThreeQuarterWideTile<Tile128x256x64_W2x4_S4>;
static_assert(std::is_same_v<Tile128x256x32_W2x4_S4, Config<128, 256, 32, 2, 4, 4>> &&
                  std::is_same_v<Tile128x192x64_W2x4_S5, Config<128, 192, 64, 2, 4, 5>>,
              "a derived tile's name spells its shape");

namespace detail {

/// The configurations per element type T and backend, the fastest of the candidates bench_gemm
/// tries: Wide (any N), Narrow (N ≤ 128), Thin (N ≤ 64) and CpAsyncWgmma (the cp.async wgmma
/// mainloop's). AMD has no wgmma and its default is already 128 wide: one configuration serves.
template <typename T, bool kCuda = kBackendIsCuda>
struct TileChoice {
  static constexpr bool k16Bit = sizeof(T) == 2;
  using Wide = std::conditional_t<k16Bit, Tile128x256x64_W2x4_S4, Tile256x128x32_W4x2_S4>;
  using Narrow = std::conditional_t<k16Bit, Tile256x128x64_W4x2_S4, Wide>;
  using Thin = std::conditional_t<k16Bit, Tile256x64x64_W8x1_S5, Narrow>;
  using CpAsyncWgmma = std::conditional_t<k16Bit, Tile192x256x32_W3x4_S7, Tile256x192x16_W4x3_S8>;
};
template <typename T>
struct TileChoice<T, false> {
  using Wide = std::conditional_t<sizeof(T) == 2, Tile128x128x32_W2x2_S2, Tile128x128x16_W2x2_S2>;
  using Narrow = Wide;
  using Thin = Wide;
  using CpAsyncWgmma = Wide;
};

}  // namespace detail

/// The configuration for products of elements T with at most kMaxColumns columns (N): blocks
/// no wider than needed.
template <typename T, int kMaxColumns = 256>
using TileConfigFor =
    std::conditional_t<(kMaxColumns <= 64), typename detail::TileChoice<T>::Thin,
                       std::conditional_t<(kMaxColumns <= 128), typename detail::TileChoice<T>::Narrow,
                                          typename detail::TileChoice<T>::Wide>>;
/// The cp.async wgmma mainloop's configuration (on AMD the default).
template <typename T>
using CpAsyncWgmmaConfigFor = typename detail::TileChoice<T>::CpAsyncWgmma;
/// The names the ops use: TileConfigFor of any N, of N ≤ 128 and of N ≤ 64.
template <typename T>
using DefaultConfigFor = TileConfigFor<T>;
template <typename T>
using NarrowConfigFor = TileConfigFor<T, 128>;
template <typename T>
using ThinConfigFor = TileConfigFor<T, 64>;

static_assert(fits_build_targets<DefaultConfigFor<half>, half>() &&
                  fits_build_targets<DefaultConfigFor<float>, float>() &&
                  fits_build_targets<CpAsyncWgmmaConfigFor<half>, half>() &&
                  fits_build_targets<CpAsyncWgmmaConfigFor<float>, float>() &&
                  fits_build_targets<NarrowConfigFor<half>, half>() && fits_build_targets<ThinConfigFor<half>, half>(),
              "the configurations the library selects fit every target of the build");

/// Settings of the SIMT mainloop (fixed): 128 × 128 × 8 tiles, 256 threads of 8 × 8 results.
struct SimtConfig {
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8, kThreads = 256, kThreadM = 8, kThreadN = 8;
  static std::string name() { return "128x128x8_t256"; }
};

}  // namespace hipgrad::gemm
