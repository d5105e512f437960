/// @file staged_forward_kernels.hpp
/// @brief GroupNorm forward (+ Swish) over packed channels-last tensors in one launch that stages
///        each unit in shared memory (staged_common.hpp).
#pragma once

#include "hipgrad/ops/groupnorm/detail/staged_sums.hpp"

namespace hipgrad::groupnorm::detail {

template <typename T, typename TParam, Activation kActivation>
__global__ void HIPGRAD_STAGED_FORWARD_BOUNDS forward_staged_channels_last(
    const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys, Geometry g, OneReadRows m,
    StagedLayout layout, StagedStagger stagger, const TParam* __restrict__ gamma, const TParam* __restrict__ beta,
    float epsilon, float swish_beta, float* __restrict__ mean, float* __restrict__ rstd) {
  stagger_start(stagger, m.cluster);
  constexpr int V = kVector16<T>;
  using Sums = Array<float, 2>;  // Σ(x − shift), Σ(x − shift)²: a group's count is its size
  extern __shared__ uint4 staged[];
  __shared__ GroupStatistics statistics[kOneReadMaxBandGroups];
  __shared__ float group_shifts[kOneReadMaxBandGroups];
  static_assert(kOneReadMaxBandGroups * (sizeof(GroupStatistics) + sizeof(float)) <= kStagedStaticBytes,
                "static arrays");
  // The cluster exchanges per-group partials ([cluster][band groups]): a tenth of per-channel
  // ones for 10-channel groups, which is what lets two blocks of a 6-block cluster share a
  // multiprocessor at fp16 32×320×64×64.
  Sums* const exchange = staged_region<Sums>(staged, layout.exchange_at);
  Sums* const scratch = staged_region<Sums>(staged, layout.scratch_at);
  Sums* const channel_totals = staged_region<Sums>(staged, layout.totals_at);
  float* const band_gamma = staged_region<float>(staged, layout.parameters_at);
  float* const band_beta = band_gamma + m.columns * V;
  if (m.cluster > 1) cluster_arrive_relaxed();  // waited for before the first send to a peer
  const StagedUnit u = StagedUnit::of(g, m.band_groups, m.cluster);
  const StagedLane lane = StagedLane::of(m, u.rank, layout.slots);
  const T* unit_x = x + u.n * xs.n + u.c0;
  const T* const bases[1] = {unit_x + lane.column * V};

  int group[V];
  band_groups_of(lane, g.group_channels, group);
  ShiftedSums sums[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) sums[e].shift = type_convert<float>(unit_x[group[e] * g.group_channels]);
  // γ and β of the band, with each group's shift (the block's first row): loaded before the copies
  // are issued (behind them, the loads would wait for every copy; after the cluster barrier, they
  // would be a round trip behind the whole GPU's traffic with every thread waiting), stored to
  // shared memory after, so that no thread waits for them before its copies.
  const bool first_row = threadIdx.x < m.columns;
  float own_gamma[V], own_beta[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    own_gamma[e] = first_row ? type_convert<float>(gamma[u.c0 + lane.column * V + e]) : 0.0f;
    own_beta[e] = first_row ? type_convert<float>(beta[u.c0 + lane.column * V + e]) : 0.0f;
  }
  StagedCopies<1, T> copies = StagedCopies<1, T>::of(staged, lane, bases, g.c, layout.tensor_vectors);
  copies.start(lane);
  if (first_row) {
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) {
      const int c = lane.column * V + e;
      if (c % g.group_channels == 0) group_shifts[group[e]] = sums[e].shift;
      band_gamma[c] = own_gamma[e];
      band_beta[c] = own_beta[e];
    }
  }
  visit_staged(copies, lane, [&](int j) {
    const Vector<T, V> v = staged_vector<V, T>(staged, j);
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) sums[e].add_uncounted(type_convert<float>(v[e]));
  });
  Sums own[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) own[e] = Sums{{sums[e].sums[0], sums[e].sums[1]}};
  // The block's group totals, sent to slot `rank` of every block of the cluster; after the cluster
  // barrier each block adds the ranks' partials of every group in rank order.
  const auto send_group_total = [&](int k, const Sums& total) {
    send_to_cluster(exchange, u.rank * m.band_groups + k, total, m.cluster);
  };
  const ColumnHolders holders = ColumnHolders::of(m);
  if (vector_in_two_groups(g.group_channels, V) && 2 * holders.entries() <= layout.scratch_entries) {
    // Each thread first adds its vector's channels per group, and each group's thread adds the
    // warps' partials of its columns straight from the scratch: one barrier, not two per pass.
    Sums halves[2];
    add_group_halves<V>(own, group, halves);
    column_shuffles<2>(halves, m);
    holders.store<2>(halves, 0, 2, scratch);
    block_sync();
    if (m.cluster > 1) cluster_wait();  // every peer has started
    const int gc = static_cast<int>(g.group_channels);
    for (int k = static_cast<int>(threadIdx.x); k < m.band_groups; k += static_cast<int>(blockDim.x)) {
      const GroupColumns columns = GroupColumns::of(k, gc, V);
      Sums total{{0.0f, 0.0f}};
      for (int column = columns.first; column <= columns.last; ++column)
        total =
            total + holders.column_total(scratch + GroupColumns::half(column, k, gc, V) * holders.entries(), column);
      send_group_total(k, total);
    }
  } else {
    // The block's channel totals, then its group totals (a warp per group adds the group's
    // channels in a fixed butterfly).
    block_column_totals<V>(own, m, scratch, layout.scratch_entries,
                           [&](int c, const Sums& total) { channel_totals[c] = total; });
    block_sync();
    if (m.cluster > 1) cluster_wait();  // every peer has started
    deliver_group_totals(channel_totals, g.group_channels, m.band_groups, send_group_total);
  }
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  const float group_count = static_cast<float>(g.group_channels * m.positions);
  for (int k = static_cast<int>(threadIdx.x); k < m.band_groups; k += static_cast<int>(blockDim.x)) {
    const Sums total = ranks_total(exchange, k, m.band_groups, m.cluster);
    const Moments moments = ShiftedSums::moments(group_shifts[k], total[0], total[1], group_count);
    statistics[k] = GroupStatistics{moments.mean, 1.0f / sqrtf(moments.variance() + epsilon)};
  }
  block_sync();
  const int thread = static_cast<int>(threadIdx.x);
  if (u.rank == 0 && thread < m.band_groups) store_statistics(statistics[thread], u.first_group + thread, mean, rstd);

  Affine affine[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    const int c = lane.column * V + e;
    const GroupStatistics st = statistics[group[e]];
    affine[e] = make_affine<T>(band_gamma[c] * st.rstd, st.mean, band_beta[c]);
  }
  // A running pointer, as in StagedCopies: a slot costs an add, not a 64-bit row product.
  T* target = y + u.n * ys.n + u.c0 + lane.column * V + lane.first * g.c;
  const Index row_step = lane.step * g.c;
  int j = 0;
  const int pitch = static_cast<int>(blockDim.x);
  const uint4* rows = &staged[threadIdx.x];  // slot j of this thread at rows[j·pitch], as in staged_vector
  if constexpr (kActivation == Activation::kSwish) {
    // 16-bit types: four rows at a time, so that each channel's four values share a reciprocal,
    // with k folded into the affine step (ScaledSwish); the last rows by two and one. fp32 keeps
    // the pairs below: its loop waits for memory, not the special-function units.
    if constexpr (sizeof(T) == 2) {
      const ScaledSwish swish = ScaledSwish::of(swish_beta);
      const float root_count = sqrtf(group_count);
      bool scaled_applies = swish.applies;
      static_assert(!kCenteredAffine<T>, "the scaled loop takes the folded affine step");
      Affine scaled[V];
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e) {
        const int c = lane.column * V + e;
        scaled_applies = scaled_applies && swish.keeps_finite(band_gamma[c], band_beta[c], root_count);
        scaled[e] = scaled_folded(affine[e], swish.k);  // 16-bit data: make_affine folded it
      }
      if (scaled_applies) {
        auto scaled_swish = [k = swish.k](auto& u) { fast_scaled_swish(u, k); };
        for (; j + 3 < lane.valid_slots; j += 4, rows += 4 * pitch, target += 4 * row_step)
          store_swish_rows<4>(rows, pitch, scaled, scaled_swish, target, row_step);
        if (j + 1 < lane.valid_slots) {
          store_swish_rows<2>(rows, pitch, scaled, scaled_swish, target, row_step);
          j += 2, rows += 2 * pitch, target += 2 * row_step;
        }
        if (j < lane.valid_slots) store_swish_rows<1>(rows, pitch, scaled, scaled_swish, target, row_step);
        return;
      }
    }
    // Two rows at a time, so that each channel's two values share a reciprocal.
    const SwishConstants constants = SwishConstants::of(swish_beta);
    auto swish_pair = [constants](float(&z)[2]) { fast_swish_pair(z[0], z[1], constants); };
    for (; j + 1 < lane.valid_slots; j += 2, rows += 2 * pitch, target += 2 * row_step)
      store_swish_rows<2>(rows, pitch, affine, swish_pair, target, row_step);
  }
  for (; j < lane.valid_slots; ++j, rows += pitch, target += row_step) {
    store_vector<V>(target,
                    normalise_vector<kActivation>(*reinterpret_cast<const Vector<T, V>*>(rows), affine, swish_beta));
  }
}

}  // namespace hipgrad::groupnorm::detail
