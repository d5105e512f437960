/// @file forward_kernels.hpp
/// @brief GroupNorm forward in three launches: per-(n, c, tile) Welford moments, per-group merge
///        into mean/rstd and per-(n, c) affine steps (Affine), then y = act(z).
///
/// Within a tile, values are summed around a shift (the tile's first value), which keeps the
/// fp32 sums free of the cancellation of E[x²] − E[x]² and lets threads combine by addition;
/// the states of tiles and channels are merged with Chan's formula. Every order is fixed, so
/// results are bitwise reproducible.
#pragma once

#include "hipgrad/core/array.hpp"
#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/groupnorm/activation.hpp"
#include "hipgrad/ops/groupnorm/detail/fast_swish.hpp"
#include "hipgrad/ops/groupnorm/detail/affine.hpp"
#include "hipgrad/ops/groupnorm/detail/channel_tiles_reduce.hpp"
#include "hipgrad/ops/groupnorm/detail/tiles.hpp"
#include "hipgrad/primitives/block_reduce.hpp"
#include "hipgrad/primitives/welford.hpp"

namespace hipgrad::groupnorm::detail {

using Moments = WelfordState<float>;

/// Sums of values taken around a `shift` shared by every thread of a tile (its first value), so
/// that the sums of a tile's threads simply add up, and the fp32 sums stay free of the
/// cancellation of E[x²] − E[x]² as long as the shift is within a few σ of the mean.
struct ShiftedSums {
  float shift = 0.0f;
  Array<float, 3> sums{{0.0f, 0.0f, 0.0f}};  ///< Σ(x − shift), Σ(x − shift)², count

  HIPGRAD_DEVICE HIPGRAD_INLINE void add(float value) {
    add_uncounted(value);
    sums[2] += 1.0f;
  }
  /// add() without the count, for loops that know how many values they added: an add per value
  /// fewer, a fifth of a 16-bit sum loop's instructions.
  HIPGRAD_DEVICE HIPGRAD_INLINE void add_uncounted(float value) {
    const float d = value - shift;
    sums[0] += d;
    sums[1] += d * d;
  }
  /// Welford moments of summed values (sums of several threads added together).
  HIPGRAD_DEVICE static HIPGRAD_INLINE Moments moments(float shift, const Array<float, 3>& s) {
    return moments(shift, s[0], s[1], s[2]);
  }
  /// The same from Σ(x − shift), Σ(x − shift)² and the count of values.
  HIPGRAD_DEVICE static HIPGRAD_INLINE Moments moments(float shift, float sum, float squares, float count) {
    if (count == 0.0f) return Moments::empty();
    const float mean_offset = sum / count;
    const float m2 = squares - sum * mean_offset;
    return Moments::of_chunk(shift + mean_offset, m2 > 0.0f ? m2 : 0.0f, count);
  }
};

template <Activation kActivation>
HIPGRAD_DEVICE HIPGRAD_INLINE float activate(float z, float swish_beta) {
  if constexpr (kActivation == Activation::kSwish) {
    // Fast exp and reciprocal (a few ulp): far below what fp16/bf16 outputs keep, and within
    // fp32's test tolerance; the IEEE division would make this pass compute-bound.
    return z * fast_sigmoid(z, swish_beta);
  } else {
    return z;
  }
}

/// act(z) of a vector's V values, value i by channel i's affine[i], in T.
template <Activation kActivation, int V, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE Vector<T, V> normalise_vector(const Vector<T, V>& v, const Affine (&affine)[V],
                                                            float swish_beta) {
  Vector<T, V> out;
  HIPGRAD_UNROLL
  for (int i = 0; i < V; ++i) {
    const float z = affine_z<T>(affine[i], type_convert<float>(v[i]));
    out[i] = type_convert<T>(activate<kActivation>(z, swish_beta));
  }
  return out;
}

/// normalise_vector with Swish of R rows of the same V channels (R = 1, 2 or 4), each channel's R
/// values sharing one reciprocal: `swish(z)` rewrites a float[R] of one channel in place
/// (fast_swish_pair, or fast_scaled_swish with `affine` scaled by k). Row i is read from
/// `rows[i·row_pitch]` and stored to `target + i·row_step`. For loops bound by the
/// special-function units (the staged forward's writes), not for those bound by the latency of their loads, whose chains the shared reciprocal lengthens.
template <int R, int V, typename T, typename SwishOfChannel>
HIPGRAD_DEVICE HIPGRAD_INLINE void store_swish_rows(const uint4* rows, int row_pitch, const Affine (&affine)[V],
                                                    SwishOfChannel swish, T* target, Index row_step) {
  Vector<T, V> in[R], out[R];
  HIPGRAD_UNROLL
  for (int i = 0; i < R; ++i) in[i] = *reinterpret_cast<const Vector<T, V>*>(rows + i * row_pitch);
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    float z[R];
    HIPGRAD_UNROLL
    for (int i = 0; i < R; ++i) z[i] = affine_z<T>(affine[e], type_convert<float>(in[i][e]));
    swish(z);
    HIPGRAD_UNROLL
    for (int i = 0; i < R; ++i) out[i][e] = type_convert<T>(z[i]);
  }
  HIPGRAD_UNROLL
  for (int i = 0; i < R; ++i) store_vector<V>(target + i * row_step, out[i]);
}

// ---- moments -----------------------------------------------------------------------------------

/// Planes: a block (or, for small planes, each warp of it) per (n, c, spatial tile). kPacked:
/// the plane is contiguous, and with V > 1 its start and the tile boundaries are V-aligned.
template <typename T, int kThreads, int V, bool kPacked, int kPlaneThreads>
__global__ void __launch_bounds__(kThreads)
    forward_moments_planes(const T* __restrict__ x, DeviceStrides xs, Geometry g, Index total_tiles,
                           Moments* __restrict__ partials) {
  allow_dependent_grids();
  using Walker = PlaneWalker<kThreads, kPlaneThreads>;
  using Reduce = TileReduce<Array<float, 3>, kThreads, kPlaneThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const Walker w(total_tiles, /*reverse=*/false);
  if (!w.valid) return;  // whole warps only: never a block barrier (see PlaneWalker)
  const PlaneTile t = PlaneTile::at(g, w.tile);
  ShiftedSums sums;
  if constexpr (kPacked) {
    const T* plane = x + t.n * xs.n + t.c * xs.c;
    sums.shift = type_convert<float>(plane[t.begin]);
    const Index vector_end = t.begin + (t.end - t.begin) / V * V;
    for (Index s = t.begin + w.thread * V; s < vector_end; s += kPlaneThreads * V) {
      const Vector<T, V> v = load_vector<V>(plane + s);
      HIPGRAD_UNROLL
      for (int i = 0; i < V; ++i) sums.add(type_convert<float>(v[i]));
    }
    for (Index s = vector_end + w.thread; s < t.end; s += kPlaneThreads) sums.add(type_convert<float>(plane[s]));
  } else {
    sums.shift = type_convert<float>(x[g.offset(xs, t.n, t.c, t.begin)]);
    for (Index s = t.begin + w.thread; s < t.end; s += kPlaneThreads)
      sums.add(type_convert<float>(x[g.offset(xs, t.n, t.c, s)]));
  }
  const Array<float, 3> tile = Reduce::reduce(storage, w.walker(), sums.sums, SumOp{});
  if (w.thread == 0) partials[w.tile] = ShiftedSums::moments(sums.shift, tile);
}

/// Channels last: one block per (n, column tile, spatial tile); each thread owns V adjacent
/// channels and walks positions; lanes are merged through shared memory in lane order.
template <typename T, int kThreads, int V>
__global__ void __launch_bounds__(kThreads) forward_moments_channels_last(const T* __restrict__ x, DeviceStrides xs,
                                                                          Geometry g, Moments* __restrict__ partials) {
  allow_dependent_grids();
  const ColumnTile<kThreads, V> t(g, blockIdx.x);
  const Index position_stride = g.c;  // packed channels-last: positions are C apart

  ShiftedSums sums[V];
  if (t.active) {
    const T* base = x + t.n * xs.n + t.column * V;
    const Vector<T, V> first = load_vector<V>(base + t.begin * position_stride);
    HIPGRAD_UNROLL
    for (int i = 0; i < V; ++i) sums[i].shift = type_convert<float>(first[i]);
    for (Index r = t.begin + t.lane; r < t.end; r += t.map.row_lanes) {
      const Vector<T, V> v = load_vector<V>(base + r * position_stride);
      HIPGRAD_UNROLL
      for (int i = 0; i < V; ++i) sums[i].add(type_convert<float>(v[i]));
    }
  }
  // Every lane of a column shares the column's shifts, so lanes combine by plain addition.
  __shared__ Array<float, 3> lanes[kThreads * V];
  __shared__ float shifts[ColumnMapping<kThreads, V>::kMaxColumnsPerBlock * V];
  if (t.active) {
    HIPGRAD_UNROLL
    for (int i = 0; i < V; ++i) lanes[t.lane_slot(t.lane, i)] = sums[i].sums;
    if (t.lane == 0) {
      HIPGRAD_UNROLL
      for (int i = 0; i < V; ++i) shifts[t.column_in_block * V + i] = sums[i].shift;
    }
  }
  block_sync();
  const Index first_channel = (t.column - t.column_in_block) * V;
  sum_lanes(t, lanes, [&](int column_in_block, int i, const Array<float, 3>& total) {
    const Index c = first_channel + column_in_block * V + i;
    partials[(t.n * g.c + c) * g.tiles_per_sample_channel + t.k] =
        ShiftedSums::moments(shifts[column_in_block * V + i], total);
  });
}

// ---- per-group statistics ------------------------------------------------------------------------

/// One block per (n, group): merges the tiles of each channel, then the channels; writes mean
/// and rstd (when asked) and each channel's Affine.
template <typename T, typename TParam, int kThreads>
__global__ void __launch_bounds__(kThreads)
    forward_group_statistics(const Moments* __restrict__ partials, Geometry g, float epsilon,
                             const TParam* __restrict__ gamma, const TParam* __restrict__ beta,
                             float* __restrict__ mean, float* __restrict__ rstd, Affine* __restrict__ affine) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  allow_dependent_grids();
  const Index n = blockIdx.x / g.groups, group = blockIdx.x % g.groups;
  const Index c0 = group * g.group_channels;
  __shared__ Moments scratch[kThreads];
  Moments mine = Moments::empty();  // the channels this thread visits, merged in channel order
  reduce_channel_tiles<kThreads>(partials + (n * g.c + c0) * g.tiles_per_sample_channel, g.group_channels,
                                 g.tiles_per_sample_channel, Moments::empty(), WelfordMergeOp{}, scratch,
                                 [&](Index, const Moments& channel) { mine = welford_merge(mine, channel); });
  __shared__ typename BlockWelford<float, kThreads>::TempStorage storage;
  const Moments all = BlockWelford<float, kThreads>(storage).all_reduce(mine, WelfordMergeOp{});
  const float group_mean = all.mean;
  const float group_rstd = 1.0f / sqrtf(all.variance() + epsilon);
  if (threadIdx.x == 0 && mean != nullptr) mean[blockIdx.x] = group_mean;
  if (threadIdx.x == 0 && rstd != nullptr) rstd[blockIdx.x] = group_rstd;
  for (Index i = threadIdx.x; i < g.group_channels; i += kThreads) {
    affine[n * g.c + c0 + i] =
        make_affine<T>(type_convert<float>(gamma[c0 + i]) * group_rstd, group_mean, type_convert<float>(beta[c0 + i]));
  }
}

// ---- y = act(z) --------------------------------------------------------------------

/// Planes. Tiles are visited in the reverse order of the moments pass, so that the first tiles
/// read are the last ones that pass left in L2.
template <typename T, int kThreads, int V, bool kPacked, int kPlaneThreads, Activation kActivation>
__global__ void __launch_bounds__(kThreads)
    forward_apply_planes(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys, Geometry g,
                         Index total_tiles, const Affine* __restrict__ affine, float swish_beta) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  const PlaneWalker<kThreads, kPlaneThreads> w(total_tiles, /*reverse=*/true);
  if (!w.valid) return;
  const PlaneTile t = PlaneTile::at(g, w.tile);
  const Affine a = affine[t.n * g.c + t.c];
  auto normalise = [&](T value) {
    return type_convert<T>(activate<kActivation>(affine_z<T>(a, type_convert<float>(value)), swish_beta));
  };
  if constexpr (kPacked) {
    const T* in = x + t.n * xs.n + t.c * xs.c;
    T* out = y + t.n * ys.n + t.c * ys.c;
    const Index vector_end = t.begin + (t.end - t.begin) / V * V;
    for (Index s = t.begin + w.thread * V; s < vector_end; s += kPlaneThreads * V) {
      const Vector<T, V> v = load_vector<V>(in + s);
      Vector<T, V> r;
      HIPGRAD_UNROLL
      for (int i = 0; i < V; ++i) r[i] = normalise(v[i]);
      store_vector<V>(out + s, r);
    }
    for (Index s = vector_end + w.thread; s < t.end; s += kPlaneThreads) out[s] = normalise(in[s]);
  } else {
    for (Index s = t.begin + w.thread; s < t.end; s += kPlaneThreads)
      y[g.offset(ys, t.n, t.c, s)] = normalise(x[g.offset(xs, t.n, t.c, s)]);
  }
}

/// Channels last, the moments kernel's mapping; x and y share the packed layout.
template <typename T, int kThreads, int V, Activation kActivation>
__global__ void __launch_bounds__(kThreads)
    forward_apply_channels_last(const T* __restrict__ x, T* __restrict__ y, DeviceStrides xs, Geometry g,
                                const Affine* __restrict__ affine, float swish_beta) {
  wait_for_prior_grids();  // a dependent launch: before any memory access (dependent_launch.hpp)
  const ColumnTile<kThreads, V> t(g, static_cast<Index>(gridDim.x) - 1 - blockIdx.x);  // reverse order, as planes
  if (!t.active) return;
  Affine a[V];
  HIPGRAD_UNROLL
  for (int i = 0; i < V; ++i) a[i] = affine[t.n * g.c + t.column * V + i];
  const Index offset = t.n * xs.n + t.column * V;
  for (Index r = t.begin + t.lane; r < t.end; r += t.map.row_lanes) {
    const Vector<T, V> v = load_vector<V>(x + offset + r * g.c);
    store_vector<V>(y + offset + r * g.c, normalise_vector<kActivation>(v, a, swish_beta));
  }
}

}  // namespace hipgrad::groupnorm::detail
