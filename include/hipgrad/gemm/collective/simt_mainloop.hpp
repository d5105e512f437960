/// @file simt_mainloop.hpp
/// @brief The SIMT mainloop of one block, for exact fp32 and targets without matrix atoms:
///        128 × 128 × 8 tiles (SimtConfig), a register-staged double buffer and 8 × 8 FMA outer
///        products per thread.
#pragma once

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::gemm {

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
}  // namespace hipgrad::gemm
