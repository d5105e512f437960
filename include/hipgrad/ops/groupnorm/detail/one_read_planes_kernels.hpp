/// @file one_read_planes_kernels.hpp
/// @brief GroupNorm forward and fused backward over packed planes (NCHW and kin) in one launch
///        that holds each group in registers: x (and dy) are read from memory once, and both the
///        statistics and the output come from the registers.
///
/// A unit (one (n, group)) goes to a cluster of `cluster` blocks (one_read_common.hpp); block r
/// of the cluster takes positions [r·span, (r + 1)·span) of every plane of the group.
///
/// Thread mapping within a block: group_channels × channel_threads threads (channel_threads a
/// power of two), rounded up to whole 64-lane warps. Thread t owns channel t / channel_threads of
/// the group and, of the block's part of that plane, the vectors lane, lane + channel_threads, …
/// (kVectors of them, those past the part predicated off), so that neighbouring threads read
/// neighbouring vectors and every per-channel constant sits in a register. A channel is an
/// aligned run of lanes within a warp or a run of whole warps, so its sums need shuffles and at
/// most one barrier.
///
/// The group must fit: kVectors × V elements per thread of each tensor, over the cluster
/// (OneReadKernels picks the fewest blocks, then the fewest bytes per thread, that fit; larger
/// groups take the three-pass path).
#pragma once

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/ops/groupnorm/detail/one_read_common.hpp"

namespace hipgrad::groupnorm::detail {

/// How a group's planes are dealt to the threads of its cluster (chosen by OneReadKernels).
struct OneReadMapping {
  Index channel_threads = 1;  ///< threads per channel, a power of two
  int channel_shift = 0;      ///< log2(channel_threads)
  Index plane_vectors = 0;    ///< vectors per plane: spatial / V
  Index span = 0;             ///< vectors of each plane per block: ⌈plane_vectors / cluster⌉
  int cluster = 1;            ///< blocks per unit
};

/// The thread's channel within its group and its vectors in that channel's plane.
struct OneReadLane {
  Index channel;  ///< within the group; ≥ group_channels for the threads that pad the block
  bool active;
  bool leader;  ///< the channel's first thread
  OneReadSlots slots;

  template <int V>
  HIPGRAD_DEVICE static OneReadLane of(const OneReadMapping& m, int rank, const Geometry& g, int most) {
    OneReadLane l;
    l.channel = static_cast<Index>(threadIdx.x) >> m.channel_shift;
    const Index begin = rank * m.span, end = begin + m.span < m.plane_vectors ? begin + m.span : m.plane_vectors;
    const Index first = begin + (static_cast<Index>(threadIdx.x) & (m.channel_threads - 1));
    l.active = l.channel < g.group_channels;
    l.leader = l.active && first == begin;
    l.slots = OneReadSlots::strided(first, m.channel_threads, l.active ? end : 0, most, V);
    return l;
  }
};

/// The sum over the threads of the caller's channel, returned to each of them; the same
/// contract for `scratch` as block_all_sum. channel_threads is uniform across the block.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value channel_all_sum(Value value, Index channel_threads, Value* scratch) {
  const int lanes = channel_threads < warp_size() ? static_cast<int>(channel_threads) : warp_size();
  value = warp_butterfly_sum(value, lanes);
  if (channel_threads <= warp_size()) return value;
  const int warps_per_channel = static_cast<int>(channel_threads) / warp_size();
  const int warp = static_cast<int>(threadIdx.x) / warp_size();
  if (lane_id() == 0) scratch[warp] = value;
  block_sync();
  const int first = warp / warps_per_channel * warps_per_channel;
  Value total = scratch[first];
  for (int w = 1; w < warps_per_channel; ++w) total = total + scratch[first + w];
  return total;
}

/// Forward: group_statistics from the registers, then y.
template <typename T, typename TParam, int V, int kVectors, int kMaxThreads, Activation kActivation>
__global__ void __launch_bounds__(kMaxThreads)
    forward_one_read_planes(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys, Geometry g,
                            OneReadMapping m, const TParam* __restrict__ gamma, const TParam* __restrict__ beta,
                            float epsilon, float swish_beta, float* __restrict__ mean, float* __restrict__ rstd) {
  __shared__ float scratch[2][kOneReadMaxWarps];
  __shared__ float cluster_slots[2];
  const OneReadBlock b = OneReadBlock::of(m.cluster);
  const Index n = b.unit / g.groups;
  const OneReadLane lane = OneReadLane::of<V>(m, b.rank, g, kVectors);
  const Index c = (b.unit % g.groups) * g.group_channels + lane.channel;
  Vector<T, V> v[kVectors];
  if (lane.active) load_slots(x + n * xs.n + c * xs.c, lane.slots, v);

  const GroupStatistics st = group_statistics(
      v, lane.slots, static_cast<float>(g.group_channels * g.spatial), epsilon, [&](float partial, int pass) {
        return cluster_all_sum(block_all_sum(partial, scratch[pass]), &cluster_slots[pass], m.cluster);
      });
  if (m.cluster > 1) cluster_arrive();  // the last read of a peer's slots is done
  if (threadIdx.x == 0 && b.rank == 0) store_statistics(st, b.unit, mean, rstd);
  if (lane.active) {
    const Affine a = make_affine<T>(type_convert<float>(gamma[c]) * st.rstd, st.mean, type_convert<float>(beta[c]));
    store_slots<V, kVectors>(y + n * ys.n + c * ys.c, lane.slots, [&](int r, int e) {
      return activate<kActivation>(affine_z<T>(a, type_convert<float>(v[r][e])), swish_beta);
    });
  }
  if (m.cluster > 1) cluster_wait();  // no peer reads this block's slots any more
}

/// Fused backward: per-channel (Σdz, Σdz·(x − μ)) from the registers, over the cluster (kept in
/// `totals` for dγ/dβ when given), the group's DataGradient from their γ-weighted sums, then dx
/// (when given) from the registers again. kFold: the grid's blocks past ready.data_blocks fold
/// dγ/dβ (fold_in_grid); otherwise a kernel after it does. kFold is a kernel of its own, so that
/// the kernels without it keep every register for the data.
template <typename T, typename TParam, int V, int kVectors, int kMaxThreads, Activation kActivation, bool kFold>
__global__ void __launch_bounds__(kMaxThreads)
    backward_one_read_planes(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs,
                             T* __restrict__ dx, DeviceStrides dxs, Geometry g, OneReadMapping m,
                             const float* __restrict__ mean, const float* __restrict__ rstd,
                             const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                             GradientSums* __restrict__ totals, TotalsFlags ready, TParam* __restrict__ dgamma,
                             TParam* __restrict__ dbeta) {
  allow_dependent_grids();  // backward_gamma_beta, where it follows, may be placed as this grid drains
  __shared__ GradientSums scratch[2][kOneReadMaxWarps];
  __shared__ GradientSums channel_partials[kMaxThreads];  // a cluster's blocks swap these
  if constexpr (kFold) {
    if (static_cast<Index>(blockIdx.x) >= ready.data_blocks) {
      fold_in_grid(totals, 1, g, rstd, dgamma, dbeta, ready, channel_partials);  // a pair per thread
      return;
    }
  }
  const OneReadBlock b = OneReadBlock::of(m.cluster);
  const Index n = b.unit / g.groups;
  const OneReadLane lane = OneReadLane::of<V>(m, b.rank, g, kVectors);
  const Index c = (b.unit % g.groups) * g.group_channels + lane.channel;
  Vector<T, V> xv[kVectors], dv[kVectors];
  ChannelState s{};
  if (lane.active) {
    load_slots(x + n * xs.n + c * xs.c, lane.slots, xv);
    load_slots(dy + n * dys.n + c * dys.c, lane.slots, dv);
    s = channel_state(g, n, c, mean, rstd, gamma, beta);
  }

  GradientSums sums{{0.0f, 0.0f}};
  HIPGRAD_UNROLL
  for (int r = 0; r < kVectors; ++r)
    if (lane.slots.valid(r)) HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e)
    accumulate<kActivation>(sums, type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), s, swish_beta);
  GradientSums channel = channel_all_sum(sums, m.channel_threads, scratch[0]);
  if (m.cluster > 1) {
    if (lane.leader) channel_partials[lane.channel] = channel;
    cluster_sync();
    if (lane.leader) channel = cluster_sum_at(channel_partials, lane.channel, m.cluster);
    cluster_arrive();  // the last read of a peer's partials is done
  }
  const bool leader = lane.leader;
  if (leader && b.rank == 0 && totals != nullptr) totals[n * g.c + c] = channel;
  if constexpr (kFold) release_unit_totals(ready, b);

  if (dx != nullptr) {  // uniform across the cluster
    const GradientSums weighted =
        leader ? GradientSums{{s.gamma * channel[0], s.gamma * channel[1]}} : GradientSums{{0.0f, 0.0f}};
    const GradientSums ab = block_all_sum(weighted, scratch[1]);
    if (lane.active) {
      const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
      const DataGradient d{s.rstd * s.gamma, -s.rstd * s.rstd * s.rstd * ab[1] * inverse_count,
                           -s.rstd * ab[0] * inverse_count};
      store_slots<V, kVectors>(dx + n * dxs.n + c * dxs.c, lane.slots, [&](int r, int e) {
        return data_gradient<kActivation>(type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), s, d,
                                          swish_beta);
      });
    }
  }
  if (m.cluster > 1) cluster_wait();  // no peer reads this block's partials any more
}

}  // namespace hipgrad::groupnorm::detail
