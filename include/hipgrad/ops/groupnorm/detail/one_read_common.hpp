/// @file one_read_common.hpp
/// @brief What the one-read kernels (one_read_planes_kernels.hpp, one_read_channels_last_kernels.hpp) share:
///        a thread's slots, loading and storing them, fixed-order sums over a block and over a
///        cluster, and the forward's statistics.
///
/// A one-read kernel covers a *unit* (a group, or a band of adjacent channels-last groups) with a
/// cluster of `cluster` blocks (core/cluster.hpp); each block holds its part of the unit in
/// registers. The blocks' partial sums meet in shared memory, every block adds all of them in
/// rank order, so every block gets the same bits, and no float atomics are involved.
#pragma once

#include "hipgrad/core/cluster.hpp"
#include "hipgrad/ops/groupnorm/detail/backward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/forward_kernels.hpp"

namespace hipgrad::groupnorm::detail {

/// Most warps a one-read block has on any target (1024 threads of 32 lanes).
inline constexpr int kOneReadMaxWarps = 32;

/// The block's unit and its rank in the unit's cluster.
struct OneReadBlock {
  Index unit;
  int rank;

  HIPGRAD_DEVICE static OneReadBlock of(int cluster) {
    const auto block = static_cast<Index>(blockIdx.x);
    return OneReadBlock{block / cluster, static_cast<int>(block % cluster)};
  }
};

/// Where a thread's slots (vectors) lie: slot r at offset + r·step, for r < slots. Offsets and
/// counts are worked out once, so that a slot costs an add and a compare.
struct OneReadSlots {
  Index offset = 0, step = 0;
  int slots = 0;

  HIPGRAD_DEVICE bool valid(int r) const { return r < slots; }
  HIPGRAD_DEVICE Index at(int r) const { return offset + r * step; }

  /// Slots first, first + stride, … below `end`, at most `most`; V elements each, `pitch`
  /// elements per unit of the walked index.
  HIPGRAD_DEVICE static OneReadSlots strided(Index first, Index stride, Index end, int most, Index pitch) {
    OneReadSlots s;
    s.offset = first * pitch;
    s.step = stride * pitch;
    // At most `most` slots: a 32-bit division (stride ≤ 1024) unless the range is longer.
    const Index span = first < end ? end - first : 0;
    s.slots = span >= most * stride
                  ? most
                  : (static_cast<int>(span) + static_cast<int>(stride) - 1) / static_cast<int>(stride);
    return s;
  }
};

template <int V, int kSlots, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE void load_slots(const T* base, const OneReadSlots& s, Vector<T, V> (&v)[kSlots]) {
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (s.valid(r)) v[r] = load_vector<V>(base + s.at(r));
}

/// Stores element(r, e) (a float) as element e of slot r, for every valid slot.
template <int V, int kSlots, typename T, typename Element>
HIPGRAD_DEVICE HIPGRAD_INLINE void store_slots(T* base, const OneReadSlots& s, Element&& element) {
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r) {
    if (!s.valid(r)) continue;
    Vector<T, V> o;
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) o[e] = type_convert<T>(element(r, e));
    store_vector<V>(base + s.at(r), o);
  }
}

/// The sum of every thread's `value`, returned to every thread, in a fixed order (lanes by a
/// butterfly, then warps in index order). `scratch` holds a value per warp and must not be in
/// use by another reduction that the block has not passed a barrier since.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value block_all_sum(Value value, Value* scratch) {
  value = warp_butterfly_sum(value);
  const int warps = static_cast<int>(blockDim.x) / warp_size();
  if (lane_id() == 0) scratch[threadIdx.x / warp_size()] = value;
  block_sync();
  Value total = scratch[0];
  for (int w = 1; w < warps; ++w) total = total + scratch[w];
  return total;
}

/// Σ over the cluster's blocks, in rank order, of element `index` of each block's `shared`
/// array. The caller has passed a cluster barrier since the blocks wrote it.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value cluster_sum_at(const Value* shared, Index index, int cluster) {
  if (cluster == 1) return shared[index];
  Value total = cluster_peer(shared, 0)[index];
  for (int r = 1; r < cluster; ++r) total = total + cluster_peer(shared, r)[index];
  return total;
}

/// The sum of each block's `value` (uniform within its block) over the cluster, returned to
/// every thread. `slot` is a shared variable for this call alone: peers read it until the
/// caller's next cluster barrier.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value cluster_all_sum(Value value, Value* slot, int cluster) {
  if (cluster == 1) return value;
  if (threadIdx.x == 0) *slot = value;
  cluster_sync();
  return cluster_sum_at(slot, 0, cluster);
}

/// A backward data block (rank 0 of its unit's cluster keeps the unit's channel totals) has
/// written its totals: releases the unit's flag for the grid's fold blocks (TotalsFlags, one row
/// of totals per unit). Every thread calls it.
HIPGRAD_DEVICE HIPGRAD_INLINE void release_unit_totals(const TotalsFlags& ready, const OneReadBlock& b) {
  block_sync();  // every thread's totals written, before thread 0 publishes them at GPU scope
  if (threadIdx.x == 0 && b.rank == 0) release_flag(ready.flags + b.unit, ready.generation);
}

struct GroupStatistics {
  float mean, rstd;
};

/// The mean of the thread's valid slots' elements over the group, then the variance as the mean
/// of (x − μ)² (exact two passes over registers, no cancellation). reduce(partial, pass), pass 0
/// then 1, returns the group's total of every thread's partial.
template <int V, int kSlots, typename T, typename Reduce>
HIPGRAD_DEVICE HIPGRAD_INLINE GroupStatistics group_statistics(const Vector<T, V> (&v)[kSlots], const OneReadSlots& s,
                                                               float count, float epsilon, Reduce&& reduce) {
  float sum = 0.0f;
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (s.valid(r)) HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) sum += type_convert<float>(v[r][e]);
  const float mu = reduce(sum, 0) / count;
  float squares = 0.0f;
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (s.valid(r)) HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    const float d = type_convert<float>(v[r][e]) - mu;
    squares += d * d;
  }
  return GroupStatistics{mu, 1.0f / sqrtf(reduce(squares, 1) / count + epsilon)};
}

HIPGRAD_DEVICE HIPGRAD_INLINE void store_statistics(const GroupStatistics& st, Index group, float* mean, float* rstd) {
  if (mean != nullptr) mean[group] = st.mean;
  if (rstd != nullptr) rstd[group] = st.rstd;
}

}  // namespace hipgrad::groupnorm::detail
