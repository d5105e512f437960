/// @file backward_kernels.hpp
/// @brief GroupNorm backward: per-(n, c, tile) sums Σdz and Σdz·(x − μ), per-group coefficients
///        of dx, dγ/dβ by a fixed-order sum over n, and dx = p·dz + q·(x − μ) + r.
///
/// With x̂ = (x − μ)·rstd and dz the gradient before the activation (dy itself, or
/// dy·swish'(z) with z = γ·x̂ + β recomputed from the saved statistics):
///   dβ_c = Σ dz,  dγ_c = Σ dz·x̂ = Σ_n rstd·S2[n, c],  with S1 = Σ_s dz and S2 = Σ_s dz·(x − μ);
///   dx = rstd·γ_c·dz − rstd·A/M − rstd³·B/M·(x − μ),  A = Σ_{c∈g} γ_c·S1, B = Σ_{c∈g} γ_c·S2,
/// M = C/G · spatial. Summing dz·(x − μ) rather than dz·x avoids cancelling against μ·Σdz.
#pragma once

#include <atomic>
#include <chrono>
#include <random>

#include "hipgrad/core/array.hpp"
#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/groupnorm/activation.hpp"
#include "hipgrad/ops/groupnorm/detail/fast_swish.hpp"
#include "hipgrad/ops/groupnorm/detail/affine.hpp"
#include "hipgrad/ops/groupnorm/detail/channel_tiles_reduce.hpp"
#include "hipgrad/ops/groupnorm/detail/tiles.hpp"
#include "hipgrad/primitives/block_reduce.hpp"

namespace hipgrad::groupnorm::detail {

using GradientSums = Array<float, 2>;  ///< (Σdz, Σdz·(x − μ))

/// Everything a thread needs to know of one (n, c) to turn (x, dy) into dz and dx.
struct ChannelState {
  float mean, rstd, gamma;
  /// The forward's pre-activation, folded for every data type (folded_affine, affine.hpp).
  Affine z;
};

HIPGRAD_DEVICE HIPGRAD_INLINE ChannelState make_channel_state(float mean, float rstd, float gamma, float beta) {
  return ChannelState{mean, rstd, gamma, folded_affine(gamma * rstd, mean, beta)};
}

/// β matters only to a fused activation, and may be null without one (then read as 0).
template <typename TParam>
HIPGRAD_DEVICE HIPGRAD_INLINE float beta_or_zero(const TParam* beta, Index c) {
  return beta != nullptr ? type_convert<float>(beta[c]) : 0.0f;
}

template <typename TParam>
HIPGRAD_DEVICE HIPGRAD_INLINE ChannelState channel_state(const Geometry& g, Index n, Index c, const float* mean,
                                                         const float* rstd, const TParam* gamma, const TParam* beta) {
  const Index group = n * g.groups + c / g.group_channels;
  return make_channel_state(mean[group], rstd[group], type_convert<float>(gamma[c]), beta_or_zero(beta, c));
}

template <Activation kActivation>
HIPGRAD_DEVICE HIPGRAD_INLINE float activation_gradient(float dy, float x, const ChannelState& s, float swish_beta) {
  if constexpr (kActivation == Activation::kSwish) {
    const float z = folded_z(s.z, x);
    const float sig = fast_sigmoid(z, swish_beta);  // fast, as in activate()
    return dy * (sig + swish_beta * z * sig * (1.0f - sig));
  } else {
    return dy;
  }
}

template <Activation kActivation>
HIPGRAD_DEVICE HIPGRAD_INLINE void accumulate(GradientSums& sums, float dy, float x, const ChannelState& s,
                                              float swish_beta) {
  const float dz = activation_gradient<kActivation>(dy, x, s, swish_beta);
  sums[0] += dz;
  sums[1] += dz * (x - s.mean);
}

// ---- sums ----------------------------------------------------------------------------------------

template <typename T, typename TParam, int kThreads, int V, bool kPacked, int kPlaneThreads, Activation kActivation>
__global__ void __launch_bounds__(kThreads)
    backward_sums_planes(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs,
                         Geometry g, Index total_tiles, const float* __restrict__ mean, const float* __restrict__ rstd,
                         const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                         GradientSums* __restrict__ partials) {
  allow_dependent_grids();
  using Walker = PlaneWalker<kThreads, kPlaneThreads>;
  using Reduce = TileReduce<GradientSums, kThreads, kPlaneThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Walker w(total_tiles, /*reverse=*/false);
  if (!w.valid) return;  // whole warps only: never a block barrier (see PlaneWalker)
  const PlaneTile t = PlaneTile::at(g, w.tile);
  const ChannelState s = channel_state(g, t.n, t.c, mean, rstd, gamma, beta);
  GradientSums sums{{0.0f, 0.0f}};
  if constexpr (kPacked) {
    const T* xp = x + t.n * xs.n + t.c * xs.c;
    const T* dyp = dy + t.n * dys.n + t.c * dys.c;
    const Index vector_end = t.begin + (t.end - t.begin) / V * V;
    for (Index i = t.begin + w.thread * V; i < vector_end; i += kPlaneThreads * V) {
      const Vector<T, V> xv = load_vector<V>(xp + i), dv = load_vector<V>(dyp + i);
      HIPGRAD_UNROLL
      for (int j = 0; j < V; ++j)
        accumulate<kActivation>(sums, type_convert<float>(dv[j]), type_convert<float>(xv[j]), s, swish_beta);
    }
    for (Index i = vector_end + w.thread; i < t.end; i += kPlaneThreads)
      accumulate<kActivation>(sums, type_convert<float>(dyp[i]), type_convert<float>(xp[i]), s, swish_beta);
  } else {
    for (Index i = t.begin + w.thread; i < t.end; i += kPlaneThreads)
      accumulate<kActivation>(sums, type_convert<float>(dy[g.offset(dys, t.n, t.c, i)]),
                              type_convert<float>(x[g.offset(xs, t.n, t.c, i)]), s, swish_beta);
  }
  const GradientSums tile = Reduce::reduce(storage, w.walker(), sums, SumOp{});
  if (w.thread == 0) partials[w.tile] = tile;
}

template <typename T, typename TParam, int kThreads, int V, Activation kActivation>
__global__ void __launch_bounds__(kThreads)
    backward_sums_channels_last(const T* __restrict__ dy, const T* __restrict__ x, DeviceStrides xs, Geometry g,
                                const float* __restrict__ mean, const float* __restrict__ rstd,
                                const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                                GradientSums* __restrict__ partials) {
  allow_dependent_grids();
  const ColumnTile<kThreads, V> t(g, blockIdx.x);

  GradientSums sums[V];
  HIPGRAD_UNROLL
  for (int j = 0; j < V; ++j) sums[j] = GradientSums{{0.0f, 0.0f}};
  if (t.active) {
    ChannelState s[V];
    HIPGRAD_UNROLL
    for (int j = 0; j < V; ++j) s[j] = channel_state(g, t.n, t.column * V + j, mean, rstd, gamma, beta);
    const Index offset = t.n * xs.n + t.column * V;
    for (Index r = t.begin + t.lane; r < t.end; r += t.map.row_lanes) {
      const Vector<T, V> xv = load_vector<V>(x + offset + r * g.c), dv = load_vector<V>(dy + offset + r * g.c);
      HIPGRAD_UNROLL
      for (int j = 0; j < V; ++j)
        accumulate<kActivation>(sums[j], type_convert<float>(dv[j]), type_convert<float>(xv[j]), s[j], swish_beta);
    }
  }
  __shared__ GradientSums lanes[kThreads * V];
  if (t.active) {
    HIPGRAD_UNROLL
    for (int j = 0; j < V; ++j) lanes[t.lane_slot(t.lane, j)] = sums[j];
  }
  block_sync();
  const Index first_channel = (t.column - t.column_in_block) * V;
  sum_lanes(t, lanes, [&](int column_in_block, int j, const GradientSums& total) {
    partials[(t.n * g.c + first_channel + column_in_block * V + j) * g.tiles_per_sample_channel + t.k] = total;
  });
}

// ---- per-group coefficients and dγ/dβ --------------------------------------------------------------

/// dx = p·dz + q·(x − μ) + r for one (n, c).
struct DataGradient {
  float p, q, r;
};

/// One block per (n, group): totals per channel (kept for dγ/dβ) and, when `coefficients` is
/// given, the channel's DataGradient.
template <typename TParam, int kThreads>
__global__ void __launch_bounds__(kThreads)
    backward_group_coefficients(const GradientSums* __restrict__ partials, Geometry g, const float* __restrict__ rstd,
                                const TParam* __restrict__ gamma, GradientSums* __restrict__ totals,
                                DataGradient* __restrict__ coefficients) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  allow_dependent_grids();
  const Index n = blockIdx.x / g.groups, group = blockIdx.x % g.groups;
  const Index c0 = group * g.group_channels;
  __shared__ GradientSums scratch[kThreads];
  GradientSums weighted{{0.0f, 0.0f}};  // Σ γ_c·(S1, S2) over the channels this thread visits
  reduce_channel_tiles<kThreads>(partials + (n * g.c + c0) * g.tiles_per_sample_channel, g.group_channels,
                                 g.tiles_per_sample_channel, GradientSums{{0.0f, 0.0f}}, SumOp{}, scratch,
                                 [&](Index i, const GradientSums& total) {
                                   totals[n * g.c + c0 + i] = total;
                                   const float gm = type_convert<float>(gamma[c0 + i]);
                                   weighted = weighted + GradientSums{{gm * total[0], gm * total[1]}};
                                 });
  if (coefficients == nullptr) return;  // uniform across the block: no thread reaches the barrier
  __shared__ typename BlockReduce<GradientSums, kThreads>::TempStorage storage;
  const GradientSums ab = BlockReduce<GradientSums, kThreads>(storage).all_sum(weighted);
  const float rs = rstd[blockIdx.x];
  const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
  const float q = -rs * rs * rs * ab[1] * inverse_count;
  const float r = -rs * ab[0] * inverse_count;
  for (Index i = threadIdx.x; i < g.group_channels; i += kThreads)
    coefficients[n * g.c + c0 + i] = DataGradient{rs * type_convert<float>(gamma[c0 + i]), q, r};
}

/// How a backward grid folds dγ/dβ itself (the staged and one-read backward kernels): its blocks
/// past the data blocks run the fold (fold_in_grid). Each data block that keeps totals (blocks
/// are (unit, rank), units (n, band) of `band_channels` channels; with `parts` rows of totals per
/// sample, one per rank, else one per unit) releases its flag = `generation` once they are
/// written, and a fold block takes row (n, part) of band b once flags[(n·bands + b)·parts + part]
/// holds it, so that the fold's loads and sums run while the grid's last blocks still write
/// dx, and no second kernel waits for the grid to end. The flags live in the caller's workspace,
/// never zeroed: `generation` is new for every call (next_totals_generation), so what an earlier
/// call (or the memory's last owner) left there never reads as this call's. With `flags` null
/// the grid has no fold blocks.
struct TotalsFlags {
  unsigned long long* flags = nullptr;
  unsigned long long generation = 0;
  Index band_channels = 0;
  Index data_blocks = 0;  ///< blocks [0, data_blocks) are the kernel's own, the rest fold
};

/// A tag no earlier call of this process used: odd (never a zeroed word), from a random start
/// per process, so that a tag another process left in reused memory matches with a chance of the
/// order of its calls / 2^63.
inline unsigned long long next_totals_generation() {
  static std::atomic<unsigned long long> next{[] {
    std::random_device device;
    const auto now = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
    return (static_cast<unsigned long long>(device()) << 32 ^ device() ^ now * 0x9e3779b97f4a7c15ull) >> 1;
  }()};
  return next.fetch_add(1, std::memory_order_relaxed) << 1 | 1;
}

/// dγ_c = Σ_n rstd[n, g]·S2[n, c], dβ_c = Σ_n S1[n, c], from `totals` [N][parts][C]: each sample's
/// sums come in `parts` pieces (1, or the staged backward's blocks per cluster, each of which
/// keeps the totals of its own rows). A fold block takes kGammaBetaChannels adjacent channels at
/// a time (a warp reads two rows of totals, 128 bytes each) with blockDim.x / kGammaBetaChannels
/// rows of threads: row r sums i = r, r + rows, … in order, then the rows are added in order, so
/// the bits depend on the sizes only. One thread per channel walking all N in sequence would be a
/// chain of N round trips. The kernel of its own (backward_gamma_beta) takes up to
/// kGammaBetaMaxRows rows: blocks of 16 channels and up to 64 rows (twice the blocks of 32 × 16, a
/// quarter of the rows per thread) measured faster on the staged backward's N·cluster rows. Row r
/// takes every rows-th row, not a run of consecutive ones: a staged cluster's rows are released
/// together, so runs made the in-grid fold's last threads wait for whole runs at the grid's end.
inline constexpr int kGammaBetaChannels = 16;
inline constexpr int kGammaBetaMaxRows = 64;
inline constexpr int kGammaBetaBatch = 8;

inline unsigned gamma_beta_threads(Index n) {
  return static_cast<unsigned>(kGammaBetaChannels * (n < kGammaBetaMaxRows ? n : kGammaBetaMaxRows));
}

/// Waits until the data blocks of rows i0 + b·rows (b < kGammaBetaBatch, below `count`) of
/// `band` have released their flags: the batch's flags read together (unordered reads, then one
/// fence once all are set: a read that acquires holds the reads after it, so acquiring reads
/// would cost the batch a round trip per flag), then a short sleep while any is not yet set.
HIPGRAD_DEVICE HIPGRAD_INLINE void wait_for_rows(const TotalsFlags& ready, Index i0, int rows, Index count, int parts,
                                                 Index bands, Index band) {
  for (;;) {
    bool all = true;
    HIPGRAD_UNROLL
    for (int b = 0; b < kGammaBetaBatch; ++b) {
      const Index i = i0 + Index{b} * rows;
      // Every read issued (no short circuit), so that they are in flight together.
      if (i < count) all &= read_flag(ready.flags + (i / parts * bands + band) * parts + i % parts) == ready.generation;
    }
    if (all) break;
    sleep_nanoseconds(256);
  }
  acquire_fence();
}

/// The fold of channels [chunk·kGammaBetaChannels, +kGammaBetaChannels) by the calling block
/// (every thread calls it): its rows of threads sum their rows of totals, which, with kFlagged,
/// each thread first waits for (wait_for_rows); `row_sums` holds blockDim.x pairs; the caller
/// orders a later use of them by a barrier.
template <bool kFlagged, typename TParam>
HIPGRAD_DEVICE HIPGRAD_INLINE void fold_gamma_beta(Index chunk, const GradientSums* totals, int parts,
                                                   const Geometry& g, const float* rstd, TParam* dgamma, TParam* dbeta,
                                                   const TotalsFlags& ready, GradientSums* row_sums) {
  const int rows = static_cast<int>(blockDim.x) / kGammaBetaChannels;
  const int lane = static_cast<int>(threadIdx.x) % kGammaBetaChannels,
            row = static_cast<int>(threadIdx.x) / kGammaBetaChannels;
  const Index c = chunk * kGammaBetaChannels + lane;
  GradientSums sums{{0.0f, 0.0f}};  // (Σ S1, Σ rstd·S2) over this row's samples
  if (c < g.c && row < rows) {
    const Index group = c / g.group_channels;
    const Index bands = kFlagged ? g.c / ready.band_channels : 0, band = kFlagged ? c / ready.band_channels : 0;
    // kGammaBetaBatch rows' loads in flight before their sums, which add in row order: a load per
    // add made the fold a chain of round trips over the staged backward's N·cluster rows.
    const Index count = g.n * parts;
    for (Index i0 = row; i0 < count; i0 += Index{kGammaBetaBatch} * rows) {
      GradientSums t[kGammaBetaBatch];
      float scale[kGammaBetaBatch];
      HIPGRAD_UNROLL
      for (int b = 0; b < kGammaBetaBatch; ++b) {
        const Index i = i0 + Index{b} * rows;
        scale[b] = i < count ? rstd[i / parts * g.groups + group] : 0.0f;
      }
      if constexpr (kFlagged) wait_for_rows(ready, i0, rows, count, parts, bands, band);
      HIPGRAD_UNROLL
      for (int b = 0; b < kGammaBetaBatch; ++b) {
        const Index i = i0 + Index{b} * rows;
        t[b] = i < count ? totals[i * g.c + c] : GradientSums{{0.0f, 0.0f}};
      }
      HIPGRAD_UNROLL
      for (int b = 0; b < kGammaBetaBatch; ++b) {
        sums[0] += t[b][0];
        sums[1] += scale[b] * t[b][1];
      }
    }
  }
  if (row < rows) row_sums[row * kGammaBetaChannels + lane] = sums;
  block_sync();
  if (row == 0 && c < g.c) {
    for (int r = 1; r < rows; ++r) sums = sums + row_sums[r * kGammaBetaChannels + lane];
    dgamma[c] = type_convert<TParam>(sums[1]);
    dbeta[c] = type_convert<TParam>(sums[0]);
  }
}

/// The fold blocks of a backward grid (blocks [ready.data_blocks, gridDim.x)): dγ/dβ from the
/// data blocks' rows of totals ([N][parts][C]), each row read once its block has released its
/// flag (TotalsFlags), kGammaBetaChannels channels at a time. They come after every data block in
/// the grid and the plan leaves room for the data blocks beside them (staged_fold_blocks,
/// one_read_fold_blocks), so that fold blocks waiting for flags never hold back the blocks that
/// release them.
template <typename TParam>
HIPGRAD_DEVICE HIPGRAD_INLINE void fold_in_grid(const GradientSums* totals, int parts, const Geometry& g,
                                                const float* rstd, TParam* dgamma, TParam* dbeta,
                                                const TotalsFlags& ready, GradientSums* row_sums) {
  const Index chunks = (g.c + kGammaBetaChannels - 1) / kGammaBetaChannels;
  const Index fold_blocks = static_cast<Index>(gridDim.x) - ready.data_blocks;
  for (Index chunk = static_cast<Index>(blockIdx.x) - ready.data_blocks; chunk < chunks; chunk += fold_blocks) {
    fold_gamma_beta<true>(chunk, totals, parts, g, rstd, dgamma, dbeta, ready, row_sums);
    block_sync();  // row 0 has read `row_sums`
  }
}

/// The fold as a kernel of its own, a dependent of the grid that wrote `totals`: a block per
/// kGammaBetaChannels channels (gamma_beta_threads threads).
template <typename TParam>
__global__ void __launch_bounds__(kGammaBetaChannels* kGammaBetaMaxRows)
    backward_gamma_beta(const GradientSums* __restrict__ totals, int parts, Geometry g, const float* __restrict__ rstd,
                        TParam* __restrict__ dgamma, TParam* __restrict__ dbeta) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  allow_dependent_grids();
  __shared__ GradientSums row_sums[kGammaBetaMaxRows * kGammaBetaChannels];
  fold_gamma_beta<false>(blockIdx.x, totals, parts, g, rstd, dgamma, dbeta, TotalsFlags{}, row_sums);
}

// ---- dx ----------------------------------------------------------------------------------------

template <Activation kActivation>
HIPGRAD_DEVICE HIPGRAD_INLINE float data_gradient(float dy, float x, const ChannelState& s, const DataGradient& d,
                                                  float swish_beta) {
  const float dz = activation_gradient<kActivation>(dy, x, s, swish_beta);
  return d.p * dz + d.q * (x - s.mean) + d.r;
}

template <typename T, typename TParam, int kThreads, int V, bool kPacked, int kPlaneThreads, Activation kActivation>
__global__ void __launch_bounds__(kThreads)
    backward_data_planes(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs,
                         T* __restrict__ dx, DeviceStrides dxs, Geometry g, Index total_tiles,
                         const float* __restrict__ mean, const float* __restrict__ rstd,
                         const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                         const DataGradient* __restrict__ coefficients) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  const PlaneWalker<kThreads, kPlaneThreads> w(total_tiles, /*reverse=*/true);  // reuse what L2 still holds
  if (!w.valid) return;
  const PlaneTile t = PlaneTile::at(g, w.tile);
  const ChannelState s = channel_state(g, t.n, t.c, mean, rstd, gamma, beta);
  const DataGradient d = coefficients[t.n * g.c + t.c];
  if constexpr (kPacked) {
    const T* xp = x + t.n * xs.n + t.c * xs.c;
    const T* dyp = dy + t.n * dys.n + t.c * dys.c;
    T* dxp = dx + t.n * dxs.n + t.c * dxs.c;
    const Index vector_end = t.begin + (t.end - t.begin) / V * V;
    for (Index i = t.begin + w.thread * V; i < vector_end; i += kPlaneThreads * V) {
      const Vector<T, V> xv = load_vector<V>(xp + i), dv = load_vector<V>(dyp + i);
      Vector<T, V> out;
      HIPGRAD_UNROLL
      for (int j = 0; j < V; ++j)
        out[j] = type_convert<T>(
            data_gradient<kActivation>(type_convert<float>(dv[j]), type_convert<float>(xv[j]), s, d, swish_beta));
      store_vector<V>(dxp + i, out);
    }
    for (Index i = vector_end + w.thread; i < t.end; i += kPlaneThreads)
      dxp[i] = type_convert<T>(
          data_gradient<kActivation>(type_convert<float>(dyp[i]), type_convert<float>(xp[i]), s, d, swish_beta));
  } else {
    for (Index i = t.begin + w.thread; i < t.end; i += kPlaneThreads) {
      const float xv = type_convert<float>(x[g.offset(xs, t.n, t.c, i)]);
      const float dv = type_convert<float>(dy[g.offset(dys, t.n, t.c, i)]);
      dx[g.offset(dxs, t.n, t.c, i)] = type_convert<T>(data_gradient<kActivation>(dv, xv, s, d, swish_beta));
    }
  }
}

template <typename T, typename TParam, int kThreads, int V, Activation kActivation>
__global__ void __launch_bounds__(kThreads)
    backward_data_channels_last(const T* __restrict__ dy, const T* __restrict__ x, T* __restrict__ dx, DeviceStrides xs,
                                Geometry g, const float* __restrict__ mean, const float* __restrict__ rstd,
                                const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                                const DataGradient* __restrict__ coefficients) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  const ColumnTile<kThreads, V> t(g, static_cast<Index>(gridDim.x) - 1 - blockIdx.x);  // reverse order, as planes
  if (!t.active) return;
  ChannelState s[V];
  DataGradient d[V];
  HIPGRAD_UNROLL
  for (int j = 0; j < V; ++j) {
    s[j] = channel_state(g, t.n, t.column * V + j, mean, rstd, gamma, beta);
    d[j] = coefficients[t.n * g.c + t.column * V + j];
  }
  const Index offset = t.n * xs.n + t.column * V;
  for (Index r = t.begin + t.lane; r < t.end; r += t.map.row_lanes) {
    const Vector<T, V> xv = load_vector<V>(x + offset + r * g.c), dv = load_vector<V>(dy + offset + r * g.c);
    Vector<T, V> out;
    HIPGRAD_UNROLL
    for (int j = 0; j < V; ++j)
      out[j] = type_convert<T>(
          data_gradient<kActivation>(type_convert<float>(dv[j]), type_convert<float>(xv[j]), s[j], d[j], swish_beta));
    store_vector<V>(dx + offset + r * g.c, out);
  }
}

}  // namespace hipgrad::groupnorm::detail
