/// @file staged_sums.hpp
/// @brief The sums of the staged channels-last kernels: per column over a block's warps, over a
///        cluster's blocks through their shared memory, and per group (staged_common.hpp says
///        how a block holds its unit).
#pragma once

#include "hipgrad/ops/groupnorm/detail/staged_common.hpp"

namespace hipgrad::groupnorm::detail {

/// How a staged block's warps hold their per-column partials after column_shuffles: lanes
/// [0, holders) of each warp, lane l those of thread warp·width + l.
struct ColumnHolders {
  int warps, holders, columns;

  HIPGRAD_DEVICE static ColumnHolders of(const OneReadRows& m) {
    const int columns = static_cast<int>(m.columns), width = warp_size();
    return ColumnHolders{static_cast<int>(blockDim.x) / width, columns < width ? columns : width, columns};
  }
  /// Scratch entries one element of every holder takes.
  HIPGRAD_DEVICE int entries() const { return warps * holders; }

  /// The block's total of `column` from `pass` (one element's entries, warps in order).
  template <typename Value>
  HIPGRAD_DEVICE Value column_total(const Value* pass, int column) const {
    constexpr int width = warp_size();
    Value total{};
    if (columns < width) {
      // Warp w's lanes start at column `first` = w·width mod columns: its lane for `column`.
      const int advance = width % columns;
      for (int w = 0, first = 0; w < warps; ++w) {
        total = total + pass[w * holders + (column >= first ? column - first : column + columns - first)];
        first += advance;
        if (first >= columns) first -= columns;
      }
    } else {
      for (int t = column; t < warps * width; t += columns) total = total + pass[t];
    }
    return total;
  }
  /// Entries of one column in an element's pass, in column_total's order: at most `per_column()`,
  /// the j-th at entry(column, j), or -1 where the column has fewer (columns ≥ the warp width).
  HIPGRAD_DEVICE int per_column() const {
    constexpr int width = warp_size();
    return columns < width ? warps : (warps * width + columns - 1) / columns;
  }
  HIPGRAD_DEVICE int entry(int column, int j) const {
    constexpr int width = warp_size();
    if (columns < width) {
      const int first = j * width % columns;  // warp j's first lane holds this column
      return j * holders + (column >= first ? column - first : column + columns - first);
    }
    const int t = column + j * columns;
    return t < warps * width ? t : -1;
  }
  /// Stores elements [e0, e0 + count) of the holders' `sums` into `scratch` ([element][warp][holder]).
  template <int V, typename Value>
  HIPGRAD_DEVICE void store(const Value (&sums)[V], int e0, int count, Value* scratch) const {
    const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_size();
    if (lane < holders) {
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e)
        if (e >= e0 && e < e0 + count) scratch[((e - e0) * warps + warp) * holders + lane] = sums[e];
    }
  }
};

/// Adds every thread's V per-element `sums` across the lanes of its warp that share its column
/// (lanes `columns` apart), by shuffles: the warp's partials end in its holders (ColumnHolders).
template <int V, typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void column_shuffles(Value (&sums)[V], const OneReadRows& m) {
  constexpr int width = warp_size();
  const int columns = static_cast<int>(m.columns);
  // Rounds d = columns, 2·columns, … < width, uniform across the warp (the lanes' slot loops
  // diverged just before); a lane past the warp's end adds zeros.
  warp_converge();
  HIPGRAD_UNROLL
  for (int round = 0; (1 << round) < width; ++round) {
    const int d = columns << round;
    if (d >= width) break;
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) sums[e] = sums[e] + shfl_down_or_zero(sums[e], d);
  }
}

/// The block's total per channel of the band of every thread's V per-element `sums` (channel
/// column·V + e): deliver(channel, total) for each, once, from some thread of the block. Lanes of
/// a warp that share a column are added by shuffles first, then the warps' partials in warp order
/// through `scratch` (`scratch_entries` ≥ threads), as many elements per barrier as it holds: one
/// or two barriers for narrow bands, where a barrier per element made the sums a large share of
/// the kernel's time. The caller's next barrier orders what `deliver`
/// stores.
template <int V, typename Value, typename Deliver>
HIPGRAD_DEVICE HIPGRAD_INLINE void block_column_totals(Value (&sums)[V], const OneReadRows& m, Value* scratch,
                                                       int scratch_entries, Deliver&& deliver) {
  column_shuffles<V>(sums, m);
  const ColumnHolders h = ColumnHolders::of(m);
  const int per_pass_most = scratch_entries / h.entries();  // ≥ 1: warps · holders ≤ threads
  const int per_pass = per_pass_most < 1 ? 1 : (per_pass_most > V ? V : per_pass_most);
  for (int e0 = 0; e0 < V; e0 += per_pass) {
    const int count = V - e0 < per_pass ? V - e0 : per_pass;
    if (e0 > 0) block_sync();  // the previous pass has read `scratch`
    h.store<V>(sums, e0, count, scratch);
    block_sync();
    for (int item = static_cast<int>(threadIdx.x); item < count * h.columns; item += static_cast<int>(blockDim.x)) {
      const int k = item / h.columns, column = item % h.columns;
      deliver(column * V + e0 + k, h.column_total(scratch + k * h.entries(), column));
    }
  }
}

/// Stores `value` at `at` of `exchange` in block `to` of the cluster (this block's own when the
/// cluster is one block).
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void send_to_rank(Value* exchange, Index at, const Value& value, int to, int cluster) {
  if (cluster == 1) {
    exchange[at] = value;
  } else {
    cluster_peer(exchange, to)[at] = value;
  }
}

/// Stores `value` at `at` of `exchange` in every block of the cluster.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void send_to_cluster(Value* exchange, Index at, const Value& value, int cluster) {
  for (int r = 0; r < cluster; ++r) send_to_rank(exchange, at, value, r, cluster);
}

/// Slot `at` of the ranks' partials in `exchange` ([cluster][stride]) added in rank order.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value ranks_total(const Value* exchange, Index at, Index stride, int cluster) {
  Value total = exchange[at];
  for (int r = 1; r < cluster; ++r) total = total + exchange[r * stride + at];
  return total;
}

/// The cluster's per-channel totals of every thread's V per-element `sums`, then, for each channel
/// c of the band this thread visits (c = threadIdx.x, + blockDim.x, …), visit(c, total) with the
/// ranks' partials added in rank order. Each block sends its totals into slot `rank` of every
/// block's `exchange` ([cluster][band channels]) and reads only its own after the cluster
/// barrier, so no block waits for its peers before it exits; the caller arrives
/// (cluster_arrive_relaxed) at the start of the kernel, so that no block sends before every peer
/// runs.
template <int V, typename Value, typename Visit>
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_channel_totals(Value (&sums)[V], const OneReadRows& m, int rank,
                                                          Value* scratch, int scratch_entries, Value* exchange,
                                                          Visit&& visit) {
  if (m.cluster > 1) cluster_wait();  // every peer has started
  const Index channels = m.columns * V;
  block_column_totals<V>(sums, m, scratch, scratch_entries, [&](int c, const Value& total) {
    send_to_cluster(exchange, rank * channels + c, total, m.cluster);
  });
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  for (Index c = threadIdx.x; c < channels; c += blockDim.x) visit(c, ranks_total(exchange, c, channels, m.cluster));
}

/// Whether every V-channel vector (at a multiple of V) holds channels of at most two groups of
/// `group_channels` channels.
HIPGRAD_HOST_DEVICE constexpr bool vector_in_two_groups(Index group_channels, int V) {
  return group_channels + 1 >= V || 2 * group_channels == V;
}

/// A thread's V per-channel `values` added per group where its vector holds channels of at most two
/// (vector_in_two_groups): halves[0] those of its vector's first group, halves[1] the next one's.
/// The block then adds two values per column instead of V.
template <int V, typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void add_group_halves(const Value (&values)[V], const int (&group)[V],
                                                    Value (&halves)[2]) {
  halves[0] = halves[1] = Value{};
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    if (group[e] == group[0]) {
      halves[0] = halves[0] + values[e];
    } else {
      halves[1] = halves[1] + values[e];
    }
  }
}

/// The band's columns [first, last] that hold channels of group k, where every vector holds
/// channels of at most two groups, and which half (add_group_halves) of a column is k's.
struct GroupColumns {
  int first, last;

  HIPGRAD_DEVICE static GroupColumns of(int k, int group_channels, int V) {
    return GroupColumns{k * group_channels / V, ((k + 1) * group_channels - 1) / V};
  }
  HIPGRAD_DEVICE int count() const { return last - first + 1; }
  /// 0 where k is the column's first group, 1 where it is its second.
  HIPGRAD_DEVICE static int half(int column, int k, int group_channels, int V) {
    return column * V / group_channels == k ? 0 : 1;
  }
};

/// The fused backward's meeting: the block's per-channel totals of every thread's V per-element
/// `sums` (channel column·V + e), delivered once each as deliver(channel, total), and, where
/// `groups_wanted`, each band group's γ-weighted total over the cluster in group_sums[k]. The lanes
/// of a warp that share a column are added by shuffles and the warps' partials of all V elements
/// land in `scratch` behind one barrier, and beside them each thread's γ-weighted channels added
/// per group, its vector's first and the next (`state`, `group`: its V channels'), which is all
/// a group needs where a vector holds channels of at most two groups (otherwise the group adds its
/// channels' partials, each times γ, from `band_gamma`). Then warp k adds group k's partials (every
/// lane a fixed share, then a butterfly) and lane r stores the block's total into slot `rank` of
/// rank r's `exchange` ([cluster][band groups]); meanwhile the other warps (or, where every warp
/// has a group, all threads after it) add each channel's partials in warp order for `deliver`.
/// After the cluster barrier warp k adds the ranks' totals of group k by a butterfly. Only group
/// totals cross the cluster and only they wait for the meeting: every step between a block's last
/// copy and its first write of dx lengthens the life of every block, and the backward's time
/// follows it. The bits depend on the sizes only. The caller arrives
/// (cluster_arrive_relaxed) at the start of the kernel, so that no block stores into a peer before
/// every peer runs; no block waits for its peers after the meeting. `scratch` holds
/// (V + 2) · ColumnHolders::entries() entries.
template <int V, typename Deliver>
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_group_sums(GradientSums (&sums)[V], const ChannelState (&state)[V],
                                                      const int (&group)[V], const OneReadRows& m, Index group_channels,
                                                      int rank, const float* band_gamma, GradientSums* scratch,
                                                      GradientSums* exchange, bool groups_wanted,
                                                      GradientSums* group_sums, Deliver&& deliver) {
  constexpr int width = warp_size();
  const bool two_groups = vector_in_two_groups(group_channels, V);
  const ColumnHolders h = ColumnHolders::of(m);
  GradientSums* const channel_scratch = scratch + 2 * h.entries();  // [e][warp][holder]; the halves before it
  GradientSums weighted[V], halves[2];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) weighted[e] = GradientSums{{state[e].gamma * sums[e][0], state[e].gamma * sums[e][1]}};
  add_group_halves<V>(weighted, group, halves);
  column_shuffles<2>(halves, m);
  column_shuffles<V>(sums, m);
  h.store<2>(halves, 0, 2, scratch);
  h.store<V>(sums, 0, V, channel_scratch);
  block_sync();
  if (m.cluster > 1) cluster_wait();  // every peer has started
  const int warp = static_cast<int>(threadIdx.x) / width, lane = lane_id();
  const int band_groups = groups_wanted ? m.band_groups : 0, gc = static_cast<int>(group_channels);
  // Group k's share of lanes [first_lane, …) in steps of `lanes`: the halves of its columns, or its
  // channels' partials, each times γ.
  const int per_column = h.per_column();
  const auto group_share = [&](int k, int first_lane, int lanes) {
    GradientSums total{{0.0f, 0.0f}};
    if (two_groups) {
      const GroupColumns columns = GroupColumns::of(k, gc, V);
      for (int i = first_lane; i < columns.count() * per_column; i += lanes) {
        const int column = columns.first + i / per_column, at = h.entry(column, i % per_column);
        if (at >= 0) total = total + scratch[GroupColumns::half(column, k, gc, V) * h.entries() + at];
      }
    } else {
      for (int i = first_lane; i < gc * per_column; i += lanes) {
        const int c = k * gc + i / per_column, at = h.entry(c / V, i % per_column);
        if (at >= 0) {
          const GradientSums part = channel_scratch[(c % V) * h.entries() + at];
          total = total + GradientSums{{band_gamma[c] * part[0], band_gamma[c] * part[1]}};
        }
      }
    }
    return total;
  };
  // A warp per group, one group each: the shuffles stay out of loops, which measured slower.
  // Groups past the warps (small groups in
  // narrow blocks) take a thread each.
  const int group_warps = band_groups < h.warps ? band_groups : h.warps;
  if (warp < group_warps) {
    const GradientSums total = warp_butterfly_sum(group_share(warp, lane, width));
    if (lane < m.cluster) send_to_rank(exchange, rank * band_groups + warp, total, lane, m.cluster);
  }
  for (int k = group_warps + static_cast<int>(threadIdx.x); k < band_groups; k += static_cast<int>(blockDim.x)) {
    send_to_cluster(exchange, rank * band_groups + k, group_share(k, 0, 1), m.cluster);
  }
  // A thread's first channel total is delivered after the cluster barrier: the barrier's release
  // would wait for the stores `deliver` makes (the rest, where a thread has several, go at once).
  const int channels = static_cast<int>(m.columns) * V;
  const int helpers_from = group_warps < h.warps ? group_warps * width : 0,
            helpers = static_cast<int>(blockDim.x) - helpers_from;
  const int kept_channel = static_cast<int>(threadIdx.x) - helpers_from;
  GradientSums kept{{0.0f, 0.0f}};
  for (int c = kept_channel; c >= 0 && c < channels; c += helpers) {
    const GradientSums total = h.column_total(channel_scratch + (c % V) * h.entries(), c / V);
    if (c == kept_channel) {
      kept = total;
    } else {
      deliver(c, total);
    }
  }
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  if (kept_channel >= 0 && kept_channel < channels) deliver(kept_channel, kept);
  if (warp < group_warps) {
    const GradientSums part = lane < m.cluster ? exchange[lane * band_groups + warp] : GradientSums{{0.0f, 0.0f}};
    const GradientSums total = warp_butterfly_sum(part);
    if (lane == 0) group_sums[warp] = total;
  }
  for (int k = group_warps + static_cast<int>(threadIdx.x); k < band_groups; k += static_cast<int>(blockDim.x))
    group_sums[k] = ranks_total(exchange, k, band_groups, m.cluster);
  block_sync();
}

/// The band's group of each of the thread's V channels.
template <int V>
HIPGRAD_DEVICE HIPGRAD_INLINE void band_groups_of(const StagedLane& l, Index group_channels, int (&group)[V]) {
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) group[e] = static_cast<int>((l.column * V + e) / group_channels);
}

}  // namespace hipgrad::groupnorm::detail
