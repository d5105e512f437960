/// @file l2_reread_planes.hpp
/// @brief GroupNorm forward and fused backward over packed planes (NCHW and kin) in one launch
///        that reads x (and dy) from memory once and a second time from L2 (unit_sync.hpp).
///
/// A tile is up to kVectors vectors per lane of one (n, c) plane; a unit is the
/// group_channels × tiles_per_sample_channel tiles of one (n, group), contiguous in tile order.
#pragma once

#include "hipgrad/ops/groupnorm/detail/backward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/forward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/unit_sync.hpp"

namespace hipgrad::groupnorm::detail {

/// Where this lane's vectors of a planes tile lie: vector r starts at position at(r).
template <int V>
struct LaneVectors {
  Index first;  ///< t.begin + lane·V
  Index end;
  HIPGRAD_DEVICE explicit LaneVectors(const PlaneTile& t) : first(t.begin + lane_id() * V), end(t.end) {}
  HIPGRAD_DEVICE Index at(int r) const { return first + static_cast<Index>(r) * warp_size() * V; }
  /// Tiles are whole vectors (V divides the plane and the tile), so a vector is in or out.
  HIPGRAD_DEVICE bool valid(int r) const { return at(r) < end; }
};

template <int V, int kVectors, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE void load_tile(const T* plane, const LaneVectors<V>& lv, Vector<T, V> (&v)[kVectors]) {
  HIPGRAD_UNROLL
  for (int r = 0; r < kVectors; ++r)
    if (lv.valid(r)) v[r] = load_vector<V>(plane + lv.at(r));
}

/// The (mean, rstd) of a unit.
struct GroupStatistics {
  float mean, rstd;
};

/// A tile's Welford state without its count (which the tile's size gives): one 8-byte slot.
struct TileMoments {
  float mean, m2;
};

/// The sums (Σγ_c·S1_c, Σγ_c·S2_c) of a unit, from which every channel's DataGradient follows.
using WeightedSums = GradientSums;

template <typename T, typename TParam, int V, int kVectors, Activation kActivation>
__global__ void __launch_bounds__(kRereadThreads)
    forward_l2_reread_planes(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys, Geometry g,
                             Index total_tiles, const TParam* __restrict__ gamma, const TParam* __restrict__ beta,
                             float epsilon, float swish_beta, float* __restrict__ mean, float* __restrict__ rstd,
                             UnitSync<TileMoments, GroupStatistics> sync) {
  for (Index i = sync.claim(); i < total_tiles + sync.lag;) {
    if (i < total_tiles) {  // step 1: the tile's moments
      const PlaneTile t = PlaneTile::at(g, i);
      const T* in = x + t.n * xs.n + t.c * xs.c;
      const LaneVectors<V> lv(t);
      Vector<T, V> v[kVectors];
      load_tile(in, lv, v);
      ShiftedSums sums;
      sums.shift = type_convert<float>(in[t.begin]);
      HIPGRAD_UNROLL
      for (int r = 0; r < kVectors; ++r)
        if (lv.valid(r))
          HIPGRAD_UNROLL
          for (int e = 0; e < V; ++e) sums.add(type_convert<float>(v[r][e]));
      Array<float, 3> total = sums.sums;
      for (int stride = warp_size() / 2; stride > 0; stride /= 2) total = total + shfl_xor(total, stride);
      const Moments m = ShiftedSums::moments(sums.shift, total);
      sync.publish(i, TileMoments{m.mean, m.m2});
    }
    const Index next = sync.claim();  // early: its latency hides behind step 2
    if (i >= sync.lag) {  // step 2: y of tile i − lag
      const Index j = i - sync.lag, unit = j / sync.unit_tiles;
      const GroupStatistics stats = sync.statistics(unit, [&] {
        const TileMoments* partials = sync.partials + unit * sync.unit_tiles;
        auto load = [&](Index c, Index k) {
          const TileMoments tm = wait_written(partials + c * g.tiles_per_sample_channel + k);
          const Index begin = k * g.tile_spatial;
          const Index count = begin + g.tile_spatial < g.spatial ? g.tile_spatial : g.spatial - begin;
          return Moments::of_chunk(tm.mean, tm.m2, static_cast<float>(count));
        };
        const Moments m = fold_unit(load, g.group_channels, g.tiles_per_sample_channel, Moments::empty(),
                                    WelfordMergeOp{}, [](Index, const Moments& s) { return s; },
                                    [](Index, const Moments&) {});
        const GroupStatistics s{m.mean, 1.0f / sqrtf(m.variance() + epsilon)};
        if (lane_id() == 0 && mean != nullptr) mean[unit] = s.mean;
        if (lane_id() == 0 && rstd != nullptr) rstd[unit] = s.rstd;
        return s;
      });
      const PlaneTile t = PlaneTile::at(g, j);
      const LaneVectors<V> lv(t);
      Vector<T, V> v[kVectors];
      load_tile(x + t.n * xs.n + t.c * xs.c, lv, v);
      const float scale = type_convert<float>(gamma[t.c]) * stats.rstd;
      const float shift = type_convert<float>(beta[t.c]) - stats.mean * scale;
      T* out = y + t.n * ys.n + t.c * ys.c;
      HIPGRAD_UNROLL
      for (int r = 0; r < kVectors; ++r) {
        if (!lv.valid(r)) continue;
        Vector<T, V> o;
        HIPGRAD_UNROLL
        for (int e = 0; e < V; ++e)
          o[e] = type_convert<T>(activate<kActivation>(scale * type_convert<float>(v[r][e]) + shift, swish_beta));
        store_vector<V>(out + lv.at(r), o);
      }
    }
    i = next;
  }
}

template <typename T, typename TParam, int V, int kVectors, Activation kActivation>
__global__ void __launch_bounds__(kRereadThreads)
    backward_l2_reread_planes(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs,
                              T* __restrict__ dx, DeviceStrides dxs, Geometry g, Index total_tiles,
                              const float* __restrict__ mean, const float* __restrict__ rstd,
                              const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                              GradientSums* __restrict__ totals, UnitSync<GradientSums, WeightedSums> sync) {
  const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
  for (Index i = sync.claim(); i < total_tiles + sync.lag;) {
    if (i < total_tiles) {  // step 1: the tile's (Σdz, Σdz·(x − μ))
      const PlaneTile t = PlaneTile::at(g, i);
      const LaneVectors<V> lv(t);
      Vector<T, V> xv[kVectors], dv[kVectors];
      load_tile(x + t.n * xs.n + t.c * xs.c, lv, xv);
      load_tile(dy + t.n * dys.n + t.c * dys.c, lv, dv);
      const ChannelState s = channel_state(g, t.n, t.c, mean, rstd, gamma, beta);
      GradientSums sums{{0.0f, 0.0f}};
      HIPGRAD_UNROLL
      for (int r = 0; r < kVectors; ++r)
        if (lv.valid(r))
          HIPGRAD_UNROLL
          for (int e = 0; e < V; ++e)
            accumulate<kActivation>(sums, type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), s, swish_beta);
      for (int stride = warp_size() / 2; stride > 0; stride /= 2) sums = sums + shfl_xor(sums, stride);
      sync.publish(i, sums);
    }
    const Index next = sync.claim();
    if (i >= sync.lag) {  // step 2: dx of tile i − lag
      const Index j = i - sync.lag, unit = j / sync.unit_tiles;
      const PlaneTile t = PlaneTile::at(g, j);
      const Index c0 = t.c - t.c % g.group_channels;
      const WeightedSums ab = sync.statistics(unit, [&] {
        const GradientSums* partials = sync.partials + unit * sync.unit_tiles;
        auto load = [&](Index c, Index k) { return wait_written(partials + c * g.tiles_per_sample_channel + k); };
        return fold_unit(
            load, g.group_channels, g.tiles_per_sample_channel, GradientSums{{0.0f, 0.0f}}, SumOp{},
            [&](Index c, const GradientSums& total) {
              const float gm = type_convert<float>(gamma[c0 + c]);
              return GradientSums{{gm * total[0], gm * total[1]}};
            },
            [&](Index c, const GradientSums& total) {
              if (totals != nullptr) totals[t.n * g.c + c0 + c] = total;
            });
      });
      const LaneVectors<V> lv(t);
      Vector<T, V> xv[kVectors], dv[kVectors];
      load_tile(x + t.n * xs.n + t.c * xs.c, lv, xv);
      load_tile(dy + t.n * dys.n + t.c * dys.c, lv, dv);
      const ChannelState s = channel_state(g, t.n, t.c, mean, rstd, gamma, beta);
      const DataGradient d{s.rstd * s.gamma, -s.rstd * s.rstd * s.rstd * ab[1] * inverse_count,
                           -s.rstd * ab[0] * inverse_count};
      T* out = dx + t.n * dxs.n + t.c * dxs.c;
      HIPGRAD_UNROLL
      for (int r = 0; r < kVectors; ++r) {
        if (!lv.valid(r)) continue;
        Vector<T, V> o;
        HIPGRAD_UNROLL
        for (int e = 0; e < V; ++e)
          o[e] = type_convert<T>(
              data_gradient<kActivation>(type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), s, d, swish_beta));
        store_vector<V>(out + lv.at(r), o);
      }
    }
    i = next;
  }
}

}  // namespace hipgrad::groupnorm::detail
