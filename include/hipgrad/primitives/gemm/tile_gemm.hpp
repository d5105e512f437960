/// @file tile_gemm.hpp
/// @brief The block-level tile GEMM, C[M, N] (+)= A[M, K]·B[K, N] with fp32 accumulation: the
///        matrix mainloop (multistage shared-memory pipeline, swizzled tiles, one matrix atom per
///        target) with its Config, and the SIMT mainloop (register-staged double buffer, 8 × 8
///        FMA outer products per thread) for exact fp32 and targets without matrix atoms.
///
/// Both kernels take two operand loaders (operand_loader.hpp) and an epilogue (epilogue.hpp),
/// tile any M, N, K (the edges are zero-filled on load and skipped on store) and split K over
/// gridDim.z: split z covers K tiles [z·k_tiles_per_split, (z + 1)·k_tiles_per_split).
/// Blocks are numbered along M in groups of kGroupM tile rows, so that consecutive blocks share
/// their B tiles and a few A tiles in the L2.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/primitives/gemm/epilogue.hpp"
#include "hipgrad/primitives/gemm/grouped_tiles.hpp"
#include "hipgrad/primitives/gemm/mma_atom.hpp"
#include "hipgrad/primitives/gemm/operand_loader.hpp"
#include "hipgrad/primitives/gemm/pipeline.hpp"
#include "hipgrad/primitives/gemm/smem_layout.hpp"
#include "hipgrad/primitives/gemm/tile_copy.hpp"
#include "hipgrad/primitives/gemm/wgmma_mainloop.hpp"

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

/// Defaults per type and backend, the fastest of the candidates bench_gemm tries. NVIDIA: two
/// warpgroups (8 warps) of 64-row bands, K tiles of 128 bytes, 4 stages (192 KB): fp16/bf16
/// 128 × 256 blocks (one 64 × 256 wgmma per band), TF32 256 × 128 (row-major B: the swapped
/// product, two 64 × 256 wgmmas per band). On sm_90a the GEMM op runs them in the TMA kernel
/// (tma_mainloop.hpp, with a producer warpgroup beside the 8 warps); without sm_90a the same
/// 8-warp blocks run mma.sync (64 × 64 warp tiles). AMD (MFMA 32 × 32, wavefront 64): 128 × 128,
/// 4 waves, 64-byte K tiles, 2 stages.
template <typename T>
struct DefaultConfig {
#if defined(HIPGRAD_BACKEND_CUDA)
  using type = std::conditional_t<sizeof(T) == 2, Config<128, 256, 64, 2, 4, 4>, Config<256, 128, 32, 4, 2, 4>>;
#else
  using type = Config<128, 128, 64 / static_cast<int>(sizeof(T)), 2, 2, 2>;
#endif
};
/// The cp.async wgmma mainloop's configuration on sm_90a, for operand loaders TMA cannot serve
/// (e.g. implicit im2col): three warpgroups, 192 × 256 × 32 in 7 stages (fp16/bf16) or
/// 256 × 192 × 16 in 8 stages (TF32). Every thread copies there, so the blocks are as large as
/// 168 registers allow, to need fewer operand bytes per FLOP.
/// AMD has no wgmma: there it is the default configuration, which fits the 64 KB of LDS.
template <typename T>
struct CpAsyncWgmmaConfig {
#if defined(HIPGRAD_BACKEND_CUDA)
  using type = std::conditional_t<sizeof(T) == 2, Config<192, 256, 32, 3, 4, 7>, Config<256, 192, 16, 4, 3, 8>>;
#else
  using type = typename DefaultConfig<T>::type;
#endif
};
template <typename T>
using CpAsyncWgmmaConfigFor = typename CpAsyncWgmmaConfig<T>::type;
/// For products of at most 128 columns (a convolution's channels per group): blocks 128 wide,
/// so that no half of a 256-wide block computes columns past N. NVIDIA fp16/bf16: 256 × 128 × 64,
/// two warpgroups of 128-row bands, 4 stages (192 KB); elsewhere the default, already 128 wide.
template <typename T>
struct NarrowConfig {
#if defined(HIPGRAD_BACKEND_CUDA)
  using type = std::conditional_t<sizeof(T) == 2, Config<256, 128, 64, 4, 2, 4>, typename DefaultConfig<T>::type>;
#else
  using type = typename DefaultConfig<T>::type;
#endif
};
template <typename T>
using NarrowConfigFor = typename NarrowConfig<T>::type;
/// For products of at most 64 columns: blocks 64 wide. NVIDIA fp16/bf16: 256 × 64 × 64, two
/// warpgroups of 128-row bands, 5 stages (200 KB); elsewhere the narrow configuration.
template <typename T>
struct ThinConfig {
#if defined(HIPGRAD_BACKEND_CUDA)
  using type = std::conditional_t<sizeof(T) == 2, Config<256, 64, 64, 8, 1, 5>, typename NarrowConfig<T>::type>;
#else
  using type = typename NarrowConfig<T>::type;
#endif
};
template <typename T>
using ThinConfigFor = typename ThinConfig<T>::type;
template <typename T>
using DefaultConfigFor = typename DefaultConfig<T>::type;

/// Whether Config Cfg's pipeline for elements of T fits the shared memory of every target of
/// this build (kSharedBytesOfBuildTargets).
template <typename Cfg, typename T>
constexpr bool fits_build_targets() {
  return Cfg::template shared_bytes<T>() <= kSharedBytesOfBuildTargets;
}
static_assert(fits_build_targets<DefaultConfigFor<hipgrad::half>, hipgrad::half>() &&
                  fits_build_targets<DefaultConfigFor<float>, float>() &&
                  fits_build_targets<CpAsyncWgmmaConfigFor<hipgrad::half>, hipgrad::half>() &&
                  fits_build_targets<CpAsyncWgmmaConfigFor<float>, float>() &&
                  fits_build_targets<NarrowConfigFor<hipgrad::half>, hipgrad::half>() &&
                  fits_build_targets<ThinConfigFor<hipgrad::half>, hipgrad::half>(),
              "the configurations the library selects fit every target of the build");

/// Settings of the SIMT mainloop (fixed): 128 × 128 × 8 tiles, 256 threads of 8 × 8 results.
struct SimtConfig {
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8, kThreads = 256, kThreadM = 8, kThreadN = 8;
  static std::string name() { return "128x128x8_t256"; }
};

namespace detail {

/// The matrix mainloop of one block with atom `Atom` (see mma_tile_gemm).
template <typename Cfg, typename Atom, typename LoaderA, typename LoaderB, typename Epilogue>
struct MatrixMainloop {
  using T = typename LoaderA::Element;
  using TileA = OperandTile<T, Cfg::kBlockM, Cfg::kBlockK, LoaderA::kKContiguous>;
  using TileB = OperandTile<T, Cfg::kBlockN, Cfg::kBlockK, LoaderB::kKContiguous>;
  static constexpr int kThreads = Cfg::kWarps * Atom::kLanes;
  static constexpr int kAtomsM = Cfg::kWarpM / Atom::kM, kAtomsN = Cfg::kWarpN / Atom::kN;
  static_assert(Cfg::kWarpM % Atom::kM == 0 && Cfg::kWarpN % Atom::kN == 0 && Cfg::kBlockK % Atom::kK == 0,
                "Config: the warp tile and kBlockK must be multiples of the matrix atom");
  using Ring = StageRing<Cfg::kStages, TileA::kBytes + TileB::kBytes>;
  using Accumulators = float[kAtomsM][kAtomsN][Atom::kAccumulators];

  HIPGRAD_DEVICE static void load_stage(char* stage, const LoaderA& a, const LoaderB& b, int m_base, int n_base,
                                        int kt) {
    copy_tile<TileA, kThreads>(stage, a, m_base, kt * Cfg::kBlockK);
    copy_tile<TileB, kThreads>(stage + TileA::kBytes, b, n_base, kt * Cfg::kBlockK);
  }

  HIPGRAD_DEVICE static void compute_stage(Accumulators& acc, const char* stage, int warp_m0, int warp_n0, int lane) {
    const char* tile_a = stage;
    const char* tile_b = stage + TileA::kBytes;
    HIPGRAD_UNROLL
    for (int kk = 0; kk < Cfg::kBlockK; kk += Atom::kK) {
      typename Atom::A fa[kAtomsM];
      typename Atom::B fb[kAtomsN];
      HIPGRAD_UNROLL
      for (int i = 0; i < kAtomsM; ++i) Atom::template load_a<TileA>(fa[i], tile_a, warp_m0 + i * Atom::kM, kk, lane);
      HIPGRAD_UNROLL
      for (int j = 0; j < kAtomsN; ++j) Atom::template load_b<TileB>(fb[j], tile_b, warp_n0 + j * Atom::kN, kk, lane);
      HIPGRAD_UNROLL
      for (int i = 0; i < kAtomsM; ++i) {
        HIPGRAD_UNROLL
        for (int j = 0; j < kAtomsN; ++j) Atom::mma(acc[i][j], fa[i], fb[j]);
      }
    }
  }

  HIPGRAD_DEVICE static void run(char* shared, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                 const TileWork& w) {
    const int m_base = w.tile.m * Cfg::kBlockM, n_base = w.tile.n * Cfg::kBlockN;
    const int kt_begin = w.kt_begin, kt_count = w.kt_count;
    const int warp = static_cast<int>(threadIdx.x) / Atom::kLanes, lane = static_cast<int>(threadIdx.x) % Atom::kLanes;
    const int warp_m0 = (warp / Cfg::kWarpsN) * Cfg::kWarpM, warp_n0 = (warp % Cfg::kWarpsN) * Cfg::kWarpN;

    Accumulators acc;
    HIPGRAD_UNROLL
    for (int i = 0; i < kAtomsM; ++i) HIPGRAD_UNROLL
    for (int j = 0; j < kAtomsN; ++j) HIPGRAD_UNROLL
    for (int e = 0; e < Atom::kAccumulators; ++e) acc[i][j][e] = 0.0f;

    const Ring ring{shared};
    HIPGRAD_UNROLL
    for (int s = 0; s < Cfg::kStages - 1; ++s) {
      if (s < kt_count) load_stage(ring.stage(s), a, b, m_base, n_base, kt_begin + s);
      commit_copies();  // empty groups too: the wait below counts groups
    }
    for (int t = 0; t < kt_count; ++t) {
      // Tile t has landed (at most kStages − 2 younger groups pending); the barrier publishes it
      // and tells every warp that the stage computed in iteration t − 1 may be overwritten.
      wait_copies<Cfg::kStages - 2>();
      block_sync();
      const int next = t + Cfg::kStages - 1;
      if (next < kt_count) load_stage(ring.stage(next), a, b, m_base, n_base, kt_begin + next);
      commit_copies();
      compute_stage(acc, ring.stage(t), warp_m0, warp_n0, lane);
    }
    wait_copies<0>();

    HIPGRAD_UNROLL
    for (int i = 0; i < kAtomsM; ++i) HIPGRAD_UNROLL
    for (int j = 0; j < kAtomsN; ++j) HIPGRAD_UNROLL
    for (int e = 0; e < Atom::kAccumulators; ++e) {
      const AccumulatorCoord c = Atom::accumulator(lane, e);
      epilogue.store(m_base + warp_m0 + i * Atom::kM + c.m, n_base + warp_n0 + j * Atom::kN + c.n, acc[i][j][e],
                     w.split);
    }
  }
};

}  // namespace detail

/// Threads of a matrix-kernel block for Config Cfg on this backend.
template <typename Cfg>
constexpr int matrix_kernel_threads() {
  return Cfg::kWarps * kMatrixAtomLanes;
}

namespace detail {

/// One block of the matrix tile GEMM: `w` of the product of a and b, on the wgmma mainloop where
/// it runs the loaders (sm_90a), else on the matrix atoms; traps where there are none.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
HIPGRAD_DEVICE HIPGRAD_INLINE void matrix_block(const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                                const TileWork& w) {
  using Atom = typename MatrixAtomFor<typename LoaderA::Element>::type;
  static_assert(std::is_same_v<typename LoaderA::Element, typename LoaderB::Element>, "A and B must share a type");
  if constexpr (Atom::kAvailable) {
    static_assert(Atom::kLanes == kMatrixAtomLanes, "the atom's lanes differ from the backend's");
    extern __shared__ uint4 gemm_shared[];  // uint4: 16-byte alignment for the chunk copies
    char* shared = reinterpret_cast<char*>(gemm_shared);
    shared += (Cfg::kSharedAlignment - reinterpret_cast<std::uintptr_t>(shared) % Cfg::kSharedAlignment) %
              Cfg::kSharedAlignment;
#if defined(HIPGRAD_GEMM_WGMMA)
    if constexpr (WgmmaPlan<Cfg, LoaderA, LoaderB>::kSupported) {
      WgmmaMainloop<Cfg, LoaderA, LoaderB, Epilogue>::run(shared, a, b, epilogue, w);
      return;
    }
#endif
    MatrixMainloop<Cfg, Atom, LoaderA, LoaderB, Epilogue>::run(shared, a, b, epilogue, w);
  } else {
    __builtin_trap();
  }
}

}  // namespace detail

/// The matrix tile GEMM: one block per (block tile, K split); grid (tiles_m·tiles_n, 1, splits),
/// matrix_kernel_threads<Cfg>() threads, Cfg::shared_bytes<T>() of dynamic shared memory. Only
/// for devices where device_has_matrix_atoms(): in other device passes the body traps.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(matrix_kernel_threads<Cfg>())
    mma_tile_gemm(LoaderA a, LoaderB b, Epilogue epilogue, int k_tiles_per_split) {
  detail::matrix_block<Cfg>(a, b, epilogue, block_tile_work<Cfg>(a, b, k_tiles_per_split));
}

/// The matrix tile GEMM over the sub-problems of a grouped launch: one block per work item
/// (grid problems.items), no K split; threads and shared memory as mma_tile_gemm's.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(matrix_kernel_threads<Cfg>())
    grouped_mma_tile_gemm(const GroupedProblems<LoaderA, LoaderB, Epilogue> problems) {
  GroupedSchedule<Cfg, LoaderA, LoaderB, Epilogue>(problems).visit(
      static_cast<int>(blockIdx.x), [](const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                       const TileWork& w) { detail::matrix_block<Cfg>(a, b, epilogue, w); });
}

namespace detail {

/// One thread's share of a SIMT operand tile: 4 elements, along K when the operand is
/// K-contiguous (thread t: mn = t / 2, k = 4·(t % 2)), else along MN (k = t / 32, mn = 4·(t % 32)).
/// Stored transposed where needed so that shared memory always holds [k][mn].
template <typename Loader>
struct SimtFragment {
  using T = typename Loader::Element;
  static constexpr int kPad = 4;  // keeps float4 rows aligned and the transposing stores conflict-free
  using Tile = float[SimtConfig::kBlockK][SimtConfig::kBlockM + kPad];
  float v[4];

  HIPGRAD_DEVICE static int mn_offset(int t) { return Loader::kKContiguous ? t / 2 : 4 * (t % 32); }
  HIPGRAD_DEVICE static int k_offset(int t) { return Loader::kKContiguous ? 4 * (t % 2) : t / 32; }

  HIPGRAD_DEVICE HIPGRAD_INLINE void load(const Loader& loader, int mn_base, int k_base, bool vectors) {
    const int t = static_cast<int>(threadIdx.x);
    if constexpr (LoaderMaxVector<Loader>::value < 4) {
      // Elements one at a time: the next one along the row need not be at the next address.
      HIPGRAD_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int mn = mn_base + mn_offset(t) + (Loader::kKContiguous ? 0 : j);
        const VectorSource<T> e = loader.vector(mn, k_base + k_offset(t) + (Loader::kKContiguous ? j : 0), 1);
        v[j] = e.valid > 0 ? type_convert<float>(*e.pointer) : 0.0f;
      }
      return;
    }
    const VectorSource<T> s = loader.vector(mn_base + mn_offset(t), k_base + k_offset(t), 4);
    if (vectors && s.valid == 4) {
      const Vector<T, 4> x = load_vector<4>(s.pointer);
      HIPGRAD_UNROLL
      for (int j = 0; j < 4; ++j) v[j] = type_convert<float>(x[j]);
    } else {
      HIPGRAD_UNROLL
      for (int j = 0; j < 4; ++j) v[j] = j < s.valid ? type_convert<float>(s.pointer[j]) : 0.0f;
    }
  }
  HIPGRAD_DEVICE HIPGRAD_INLINE void store(Tile& tile) const {
    const int t = static_cast<int>(threadIdx.x);
    const int mn = mn_offset(t), k = k_offset(t);
    HIPGRAD_UNROLL
    for (int j = 0; j < 4; ++j) {
      if (Loader::kKContiguous)
        tile[k + j][mn] = v[j];
      else
        tile[k][mn + j] = v[j];
    }
  }
};

/// One block of the SIMT tile GEMM: `w` of the product of a and b.
template <typename LoaderA, typename LoaderB, typename Epilogue>
HIPGRAD_DEVICE HIPGRAD_INLINE void simt_block(const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                              const TileWork& w, bool vectors) {
  using C = SimtConfig;
  using FragA = detail::SimtFragment<LoaderA>;
  using FragB = detail::SimtFragment<LoaderB>;
  static_assert(C::kBlockM == C::kBlockN && C::kThreads == 2 * C::kBlockM && C::kBlockK == 8,
                "SimtFragment assumes 128 × 128 × 8 tiles and 256 threads");
  __shared__ float4 tile_a_storage[2 * sizeof(typename FragA::Tile) / sizeof(float4)];  // float4: 16-byte rows
  __shared__ float4 tile_b_storage[2 * sizeof(typename FragB::Tile) / sizeof(float4)];
  auto* tile_a = reinterpret_cast<typename FragA::Tile*>(tile_a_storage);
  auto* tile_b = reinterpret_cast<typename FragB::Tile*>(tile_b_storage);

  const int m_base = w.tile.m * C::kBlockM, n_base = w.tile.n * C::kBlockN;
  const int kt_begin = w.kt_begin, kt_count = w.kt_count;
  const int ty = static_cast<int>(threadIdx.x) / 16, tx = static_cast<int>(threadIdx.x) % 16;

  float acc[C::kThreadM][C::kThreadN];
  HIPGRAD_UNROLL
  for (int i = 0; i < C::kThreadM; ++i) HIPGRAD_UNROLL
  for (int j = 0; j < C::kThreadN; ++j) acc[i][j] = 0.0f;

  FragA fa;
  FragB fb;
  if (kt_count > 0) {
    fa.load(a, m_base, kt_begin * C::kBlockK, vectors);
    fb.load(b, n_base, kt_begin * C::kBlockK, vectors);
    fa.store(tile_a[0]);
    fb.store(tile_b[0]);
  }
  block_sync();
  for (int t = 0; t < kt_count; ++t) {
    const bool more = t + 1 < kt_count;
    if (more) {
      fa.load(a, m_base, (kt_begin + t + 1) * C::kBlockK, vectors);
      fb.load(b, n_base, (kt_begin + t + 1) * C::kBlockK, vectors);
    }
    const int buffer = t & 1;
    HIPGRAD_UNROLL
    for (int k = 0; k < C::kBlockK; ++k) {
      float ra[C::kThreadM], rb[C::kThreadN];
      HIPGRAD_UNROLL
      for (int h = 0; h < 2; ++h) {
        const float4 x = *reinterpret_cast<const float4*>(&tile_a[buffer][k][64 * h + 4 * ty]);
        const float4 y = *reinterpret_cast<const float4*>(&tile_b[buffer][k][64 * h + 4 * tx]);
        ra[4 * h] = x.x, ra[4 * h + 1] = x.y, ra[4 * h + 2] = x.z, ra[4 * h + 3] = x.w;
        rb[4 * h] = y.x, rb[4 * h + 1] = y.y, rb[4 * h + 2] = y.z, rb[4 * h + 3] = y.w;
      }
      FmaOuterProduct<C::kThreadM, C::kThreadN>::mma(acc, ra, rb);
    }
    if (more) {  // the other buffer was last read in iteration t − 1, before its closing barrier
      fa.store(tile_a[buffer ^ 1]);
      fb.store(tile_b[buffer ^ 1]);
    }
    block_sync();
  }

  HIPGRAD_UNROLL
  for (int i = 0; i < C::kThreadM; ++i) HIPGRAD_UNROLL
  for (int j = 0; j < C::kThreadN; ++j)
    epilogue.store(m_base + 64 * (i / 4) + 4 * ty + i % 4, n_base + 64 * (j / 4) + 4 * tx + j % 4, acc[i][j], w.split);
}

}  // namespace detail

/// The SIMT tile GEMM: 128 × 128 block tiles, 256 threads each computing two 4 × 4 blocks in
/// each dimension (rows 4·ty.. and 64 + 4·ty..: float4 shared reads, broadcast across the warp).
/// Global loads of tile t + 1 go to registers while tile t is computed from shared memory, then
/// to the other shared buffer: one barrier per tile. `vectors`: every 4-element vector of A and
/// B is aligned (loaders' vectors_aligned(4)).
template <typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(SimtConfig::kThreads)
    simt_tile_gemm(LoaderA a, LoaderB b, Epilogue epilogue, int k_tiles_per_split, bool vectors) {
  detail::simt_block(a, b, epilogue, block_tile_work<SimtConfig>(a, b, k_tiles_per_split), vectors);
}

/// The SIMT tile GEMM over the sub-problems of a grouped launch: one block per work item (grid
/// problems.items), no K split.
template <typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(SimtConfig::kThreads)
    grouped_simt_tile_gemm(const GroupedProblems<LoaderA, LoaderB, Epilogue> problems, bool vectors) {
  GroupedSchedule<SimtConfig, LoaderA, LoaderB, Epilogue>(problems).visit(
      static_cast<int>(blockIdx.x), [&](const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                        const TileWork& w) { detail::simt_block(a, b, epilogue, w, vectors); });
}

}  // namespace hipgrad::gemm
