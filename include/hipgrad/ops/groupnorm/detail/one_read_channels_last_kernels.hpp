/// @file one_read_channels_last_kernels.hpp
/// @brief GroupNorm forward and fused backward over packed channels-last tensors (NHWC and kin)
///        in one launch that holds each unit in registers.
///
/// A unit is a *band* of `band_groups` adjacent groups of one sample: a [positions, band
/// channels] matrix whose rows lie C elements apart. Narrow groups are banded so that a row
/// segment fills whole 32-byte sectors (a group of 10 fp16 channels is 20 bytes, four of them 80).
/// The unit goes to a cluster of `cluster` blocks (one_read_common.hpp); block r takes rows
/// [r·span, (r + 1)·span).
///
/// Within a block the rows are cut into `columns` pairs of channels (Vc = 2: a wider vector would
/// need groups of 8 or 16 channels and keep 8 channels' constants and sums per thread, taking the
/// registers that hold the data); thread t owns column t % columns and the rows t / columns,
/// t / columns + rows_per_step, … (kElements / Vc of them, those past the block's rows predicated
/// off). The block size is a multiple of `columns`, so a thread's channels, and with them its
/// group, γ and β, never change.
///
/// Sums by group or by channel go through shared memory: a warp per column adds the column's
/// threads in row order, then a warp per group adds the group's columns, then the cluster's blocks
/// in rank order.
#pragma once

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/ops/groupnorm/detail/one_read_common.hpp"

namespace hipgrad::groupnorm::detail {

/// Channels per access of the channels-last one-read kernels.
inline constexpr int kOneReadChannelVector = 2;
/// Most groups per band, and most channels per band (the shared arrays are sized for these).
inline constexpr int kOneReadMaxBandGroups = 32;
inline constexpr int kOneReadMaxBandChannels = 1024;
static_assert(kOneReadMaxBandGroups >= kOneReadMaxWarps, "the band's group slots double as block_all_sum scratch");

/// How a band's rows are dealt to the threads of its cluster (chosen by OneReadKernels).
struct OneReadRows {
  Index columns = 1;        ///< vectors per row of the band: band_groups · group_channels / Vc
  Index group_columns = 1;  ///< vectors per row of one group
  Index rows_per_step = 1;  ///< threads / columns
  Index positions = 0;      ///< rows of the unit: the spatial size
  Index span = 0;           ///< rows per block: ⌈positions / cluster⌉
  int band_groups = 1;      ///< adjacent groups per unit
  int cluster = 1;          ///< blocks per unit

  /// Deals the unit's rows over `blocks` blocks, ⌈positions / blocks⌉ to each but the last.
  HIPGRAD_HOST_DEVICE void deal_over(int blocks) {
    cluster = blocks;
    span = ceil_div(positions, Index{blocks});
  }
  /// One past the last row of block `rank` (its first is rank · span).
  HIPGRAD_HOST_DEVICE Index block_end(int rank) const {
    const Index end = (rank + 1) * span;
    return end < positions ? end : positions;
  }
  /// How many rows of block `rank` a thread takes whose first is the block's `lane_row`-th
  /// (rows lane_row, lane_row + rows_per_step, … of the block).
  HIPGRAD_HOST_DEVICE Index thread_rows(int rank, Index lane_row) const {
    const Index first = rank * span + lane_row, end = block_end(rank);
    return end > first ? (end - first + rows_per_step - 1) / rows_per_step : 0;
  }
};

/// The thread's column (its Vc channels of the band), its group in the band and its rows.
struct OneReadRowLane {
  Index column;
  int group;
  OneReadSlots slots;

  template <int Vc>
  HIPGRAD_DEVICE static OneReadRowLane of(const OneReadRows& m, int rank, const Geometry& g, int most) {
    OneReadRowLane l;
    const int columns = static_cast<int>(m.columns);  // ≤ 512: 32-bit division
    l.column = static_cast<int>(threadIdx.x) % columns;
    l.group = static_cast<int>(l.column) / static_cast<int>(m.group_columns);
    const Index begin = rank * m.span, end = begin + m.span < m.positions ? begin + m.span : m.positions;
    l.slots = OneReadSlots::strided(begin + static_cast<int>(threadIdx.x) / columns, m.rows_per_step, end, most, g.c);
    l.slots.offset += l.column * Vc;
    return l;
  }
};

/// `m` itself for a kernel built for bands and clusters (kSplit), else `m` with one group per
/// band and one block per cluster written as constants: the compiler then drops the band and
/// cluster arithmetic, whose registers a one-group kernel needs for its data (without this the
/// 64-byte backward spilled registers and ran slower).
template <bool kSplit>
HIPGRAD_DEVICE HIPGRAD_INLINE OneReadRows unsplit_unless(const OneReadRows& m) {
  if constexpr (kSplit) {
    return m;
  } else {
    OneReadRows one = m;
    one.group_columns = m.columns;
    one.span = m.positions;
    one.band_groups = 1;
    one.cluster = 1;
    return one;
  }
}

/// out[column · stride] = Σ of `value` over the block's threads of each column, in row order (a
/// warp per column); `rows` holds one entry per thread. Begins and ends with a barrier's worth of
/// ordering: every thread's earlier reads of `rows` and `out` must be behind a barrier.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void column_totals(Value value, const OneReadRows& m, Value* rows, Value* out,
                                                 int stride) {
  const int warps = static_cast<int>(blockDim.x) / warp_size(), warp = static_cast<int>(threadIdx.x) / warp_size();
  rows[threadIdx.x] = value;
  block_sync();
  for (Index column = warp; column < m.columns; column += warps) {
    Value acc{};
    for (Index i = lane_id(); i < m.rows_per_step; i += warp_size()) acc = acc + rows[column + i * m.columns];
    acc = warp_butterfly_sum(acc);
    if (lane_id() == 0) out[column * stride] = acc;
  }
  block_sync();
}

/// deliver(group, Σ values[group · width … (group + 1) · width − 1]) for each group of the band,
/// from lane 0 of the warp that adds it (a warp per group, a fixed butterfly).
template <typename Value, typename Deliver>
HIPGRAD_DEVICE HIPGRAD_INLINE void deliver_group_totals(const Value* values, Index width, int groups,
                                                        Deliver&& deliver) {
  const int warps = static_cast<int>(blockDim.x) / warp_size(), warp = static_cast<int>(threadIdx.x) / warp_size();
  for (int group = warp; group < groups; group += warps) {
    Value acc{};
    for (Index i = lane_id(); i < width; i += warp_size()) acc = acc + values[group * width + i];
    acc = warp_butterfly_sum(acc);
    if (lane_id() == 0) deliver(group, acc);
  }
}

/// out[group] = the group's total (deliver_group_totals). No barrier: the caller orders the reads
/// of `out`.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void group_totals(const Value* values, Index width, int groups, Value* out) {
  deliver_group_totals(values, width, groups, [&](int group, const Value& total) { out[group] = total; });
}

/// The total over the unit (the block and its cluster) of every thread's `value`, for the
/// caller's group of the band. `slots` ([max(band_groups, warps)]) are for this call alone: peers
/// read them until the caller's next cluster barrier.
HIPGRAD_DEVICE HIPGRAD_INLINE float band_group_sum(float value, const OneReadRowLane& lane, const OneReadRows& m,
                                                   float* rows, float* column_sums, float* slots) {
  if (m.band_groups == 1 && m.cluster == 1) return block_all_sum(value, slots);  // one group, one block
  column_totals(value, m, rows, column_sums, 1);
  group_totals(column_sums, m.group_columns, m.band_groups, slots);
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  return cluster_sum_at(slots, lane.group, m.cluster);
}

template <typename T, typename TParam, int Vc, int kElements, int kMaxThreads, Activation kActivation, bool kSplit>
__global__ void __launch_bounds__(kMaxThreads)
    forward_one_read_channels_last(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys,
                                   Geometry g, OneReadRows split, const TParam* __restrict__ gamma,
                                   const TParam* __restrict__ beta, float epsilon, float swish_beta,
                                   float* __restrict__ mean, float* __restrict__ rstd) {
  constexpr int kSlots = kElements / Vc;
  const OneReadRows m = unsplit_unless<kSplit>(split);
  __shared__ float rows[kMaxThreads], column_sums[kMaxThreads];
  __shared__ float group_slots[2][kOneReadMaxBandGroups];
  const OneReadBlock b = OneReadBlock::of(m.cluster);
  const Index bands = g.groups / m.band_groups, n = b.unit / bands;
  const Index c0 = (b.unit % bands) * m.band_groups * g.group_channels;
  const OneReadRowLane lane = OneReadRowLane::of<Vc>(m, b.rank, g, kSlots);
  Vector<T, Vc> v[kSlots];
  load_slots(x + n * xs.n + c0, lane.slots, v);

  const GroupStatistics st = group_statistics(
      v, lane.slots, static_cast<float>(g.group_channels * g.spatial), epsilon,
      [&](float partial, int pass) { return band_group_sum(partial, lane, m, rows, column_sums, group_slots[pass]); });
  if (m.cluster > 1) cluster_arrive();  // the last read of a peer's slots is done
  // The band's groups are units × band_groups + group; a group's first column stores them.
  if (b.rank == 0 && threadIdx.x < m.columns && lane.column % m.group_columns == 0)
    store_statistics(st, b.unit * m.band_groups + lane.group, mean, rstd);

  Affine affine[Vc];
  HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e) {
    const Index c = c0 + (lane.column * Vc + e);
    affine[e] = make_affine<T>(type_convert<float>(gamma[c]) * st.rstd, st.mean, type_convert<float>(beta[c]));
  }
  store_slots<Vc, kSlots>(y + n * ys.n + c0, lane.slots, [&](int r, int e) {
    return activate<kActivation>(affine_z<T>(affine[e], type_convert<float>(v[r][e])), swish_beta);
  });
  if (m.cluster > 1) cluster_wait();  // no peer reads this block's slots any more
}

/// Fused backward: per-channel (Σdz, Σdz·(x − μ)) over the unit (kept in `totals` for dγ/dβ when
/// given), each group's γ-weighted sums from them, then dx (when given) from the registers.
/// kFold: the grid's blocks past ready.data_blocks fold dγ/dβ (fold_in_grid); otherwise a kernel
/// after it does. kFold is a kernel of its own, so that the kernels without it keep every
/// register for the data.
template <typename T, typename TParam, int Vc, int kElements, int kMaxThreads, Activation kActivation, bool kSplit,
          bool kFold>
__global__ void __launch_bounds__(kMaxThreads)
    backward_one_read_channels_last(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x,
                                    DeviceStrides xs, T* __restrict__ dx, DeviceStrides dxs, Geometry g,
                                    OneReadRows split, const float* __restrict__ mean, const float* __restrict__ rstd,
                                    const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                                    GradientSums* __restrict__ totals, TotalsFlags ready, TParam* __restrict__ dgamma,
                                    TParam* __restrict__ dbeta) {
  allow_dependent_grids();  // backward_gamma_beta, where it follows, may be placed as this grid drains
  constexpr int kSlots = kElements / Vc;
  const OneReadRows m = unsplit_unless<kSplit>(split);
  __shared__ GradientSums rows[kMaxThreads];
  __shared__ GradientSums channel_partials[kOneReadMaxBandChannels];  // a cluster's blocks swap these
  __shared__ GradientSums weighted[kOneReadMaxBandChannels];
  __shared__ GradientSums group_sums[kOneReadMaxBandGroups];  // ≥ kOneReadMaxWarps
  if constexpr (kFold) {
    if (static_cast<Index>(blockIdx.x) >= ready.data_blocks) {
      fold_in_grid(totals, 1, g, rstd, dgamma, dbeta, ready, rows);  // a pair per thread
      return;
    }
  }
  const OneReadBlock b = OneReadBlock::of(m.cluster);
  const Index bands = g.groups / m.band_groups, n = b.unit / bands;
  const Index c0 = (b.unit % bands) * m.band_groups * g.group_channels;
  const OneReadRowLane lane = OneReadRowLane::of<Vc>(m, b.rank, g, kSlots);
  Vector<T, Vc> xv[kSlots], dv[kSlots];
  load_slots(x + n * xs.n + c0, lane.slots, xv);
  load_slots(dy + n * dys.n + c0, lane.slots, dv);
  // Per element only γ and β (the rest of a ChannelState is the group's or follows from them),
  // so that the registers go to the data.
  const Index group = b.unit * m.band_groups + lane.group;
  const float group_mean = mean[group], group_rstd = rstd[group];
  float gm[Vc], bt[Vc];
  HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e) {
    gm[e] = type_convert<float>(gamma[c0 + lane.column * Vc + e]);
    bt[e] = kActivation == Activation::kSwish ? beta_or_zero(beta, c0 + lane.column * Vc + e) : 0.0f;
  }
  auto state = [&](int e) { return make_channel_state(group_mean, group_rstd, gm[e], bt[e]); };

  GradientSums sums[Vc];
  HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e) sums[e] = GradientSums{{0.0f, 0.0f}};
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (lane.slots.valid(r)) HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e)
    accumulate<kActivation>(sums[e], type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), state(e),
                            swish_beta);
  // One group in one block: dx needs only the γ-weighted group sums, which every thread adds up
  // over its own elements; per-channel totals only for dγ/dβ.
  const bool single = m.band_groups == 1 && m.cluster == 1;
  if (single && totals != nullptr) {
    HIPGRAD_UNROLL
    for (int e = 0; e < Vc; ++e) column_totals(sums[e], m, rows, totals + n * g.c + c0 + e, Vc);
  } else if (!single) {
    HIPGRAD_UNROLL
    for (int e = 0; e < Vc; ++e) column_totals(sums[e], m, rows, channel_partials + e, Vc);
    if (m.cluster > 1) cluster_sync();
    for (Index channel = threadIdx.x; channel < m.columns * Vc; channel += blockDim.x) {
      const GradientSums total = cluster_sum_at(channel_partials, channel, m.cluster);
      if (b.rank == 0 && totals != nullptr) totals[n * g.c + c0 + channel] = total;
      const float gamma_c = type_convert<float>(gamma[c0 + channel]);
      weighted[channel] = GradientSums{{gamma_c * total[0], gamma_c * total[1]}};
    }
    if (m.cluster > 1) cluster_arrive();  // the last read of a peer's partials is done
  }
  if constexpr (kFold) release_unit_totals(ready, b);

  if (dx != nullptr) {  // uniform across the cluster
    GradientSums ab;
    if (single) {
      GradientSums own{{0.0f, 0.0f}};
      HIPGRAD_UNROLL
      for (int e = 0; e < Vc; ++e) own = own + GradientSums{{gm[e] * sums[e][0], gm[e] * sums[e][1]}};
      ab = block_all_sum(own, group_sums);
    } else {
      block_sync();
      group_totals(weighted, g.group_channels, m.band_groups, group_sums);
      block_sync();
      ab = group_sums[lane.group];
    }
    const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
    const float rs = group_rstd, q = -rs * rs * rs * ab[1] * inverse_count, shift = -rs * ab[0] * inverse_count;
    store_slots<Vc, kSlots>(dx + n * dxs.n + c0, lane.slots, [&](int r, int e) {
      return data_gradient<kActivation>(type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), state(e),
                                        DataGradient{rs * gm[e], q, shift}, swish_beta);
    });
  }
  if (m.cluster > 1) cluster_wait();  // no peer reads this block's partials any more
}

}  // namespace hipgrad::groupnorm::detail
