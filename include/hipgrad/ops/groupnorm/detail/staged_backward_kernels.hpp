/// @file staged_backward_kernels.hpp
/// @brief GroupNorm fused backward (+ Swish) over packed channels-last tensors in one launch that
///        stages each unit of x and dy in shared memory (staged_common.hpp), and folds dγ/dβ in
///        blocks at the end of its own grid where it can.
#pragma once

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/ops/groupnorm/detail/backward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_sums.hpp"

namespace hipgrad::groupnorm::detail {

/// Which meeting the staged backward's cluster holds: without an activation, group totals only
/// (cluster_group_sums: each block keeps its own channel totals, `totals` is [N][cluster][C]);
/// with Swish, channel totals (cluster_channel_totals: rank 0 keeps the unit's, `totals` is
/// [N][C]), which measured faster there: the Swish kernel is at its register cap, and holding the
/// group halves beside the channel sums cost it more than the exchange.
template <Activation kActivation>
inline constexpr bool kStagedGroupMeeting = kActivation == Activation::kIdentity;

/// Fused backward: per-channel (Σdz, Σdz·(x − μ)) (kept in `totals` for dγ/dβ when given: see
/// kStagedGroupMeeting), each group's γ-weighted sums over the unit, then dx (when given) from
/// shared memory. Meeting over groups with dγ/dβ wanted (`ready` has flags), the grid's blocks
/// past ready.data_blocks fold dγ/dβ (fold_in_grid); otherwise a kernel after it does.
template <typename T, typename TParam, Activation kActivation>
__global__ void HIPGRAD_STAGED_BACKWARD_BOUNDS backward_staged_channels_last(
    const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs, T* __restrict__ dx,
    DeviceStrides dxs, Geometry g, OneReadRows m, StagedLayout layout, StagedStagger stagger,
    const float* __restrict__ mean, const float* __restrict__ rstd, const TParam* __restrict__ gamma,
    const TParam* __restrict__ beta, float swish_beta, GradientSums* __restrict__ totals, TotalsFlags ready,
    TParam* __restrict__ dgamma, TParam* __restrict__ dbeta) {
  allow_dependent_grids();  // backward_gamma_beta, where it follows, may be placed as this grid drains
  constexpr int V = kVector16<T>;
  extern __shared__ uint4 staged[];
  if constexpr (kStagedGroupMeeting<kActivation>) {
    if (ready.flags != nullptr && static_cast<Index>(blockIdx.x) >= ready.data_blocks) {
      // The scratch holds a pair per thread (staged_layout).
      fold_in_grid(totals, m.cluster, g, rstd, dgamma, dbeta, ready,
                   staged_region<GradientSums>(staged, layout.scratch_at));
      return;
    }
  }
  __shared__ GradientSums group_sums[kOneReadMaxBandGroups];
  static_assert(kOneReadMaxBandGroups * sizeof(GradientSums) <= kStagedStaticBytes, "static arrays");
  // The cluster exchanges per-group totals ([cluster][band groups], cluster_group_sums).
  float* const band_gamma = staged_region<float>(staged, layout.parameters_at);
  stagger_start(stagger, m.cluster);
  if (m.cluster > 1) cluster_arrive_relaxed();  // waited for before the first send to a peer
  const StagedUnit u = StagedUnit::of(g, m.band_groups, m.cluster);
  const StagedLane lane = StagedLane::of(m, u.rank, layout.slots);
  const T* const bases[2] = {x + u.n * xs.n + u.c0 + lane.column * V, dy + u.n * dys.n + u.c0 + lane.column * V};
  // Two chunks in flight for the 16-bit backward with Swish, every chunk at once for the others
  // (visit_staged says why).
  constexpr int kInFlight = kActivation == Activation::kSwish && sizeof(T) == 2 ? 2 : kStagedChunks;
  auto copies = StagedCopies<2, T, kInFlight>::of(staged, lane, bases, g.c, layout.tensor_vectors);
  copies.start(lane);

  int group[V];
  band_groups_of(lane, g.group_channels, group);
  ChannelState state[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    const Index c = u.c0 + lane.column * V + e;
    const float beta_c = kActivation == Activation::kSwish ? beta_or_zero(beta, c) : 0.0f;
    state[e] = make_channel_state(mean[u.first_group + group[e]], rstd[u.first_group + group[e]],
                                  type_convert<float>(gamma[c]), beta_c);
  }
  if (threadIdx.x < m.columns) {  // the block's first row: γ of the band, for the group sums
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) band_gamma[lane.column * V + e] = state[e].gamma;
  }
  GradientSums sums[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) sums[e] = GradientSums{{0.0f, 0.0f}};
  visit_staged(copies, lane, [&](int j) {
    const Vector<T, V> xv = staged_vector<V, T>(staged, j), dv = staged_vector<V, T>(staged + layout.tensor_vectors, j);
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e)
      accumulate<kActivation>(sums[e], type_convert<float>(dv[e]), type_convert<float>(xv[e]), state[e], swish_beta);
  });
  const bool with_dx = dx != nullptr;  // uniform across the cluster
  GradientSums* const scratch = staged_region<GradientSums>(staged, layout.scratch_at);
  GradientSums* const exchange = staged_region<GradientSums>(staged, layout.exchange_at);
  if constexpr (kStagedGroupMeeting<kActivation>) {
    // Each block's per-channel totals go to its own row of `totals` ([N][cluster][C]).
    cluster_group_sums<V>(sums, state, group, m, g.group_channels, u.rank, band_gamma, scratch, exchange, with_dx,
                          group_sums, [&](int c, const GradientSums& total) {
                            if (totals != nullptr) totals[(u.n * m.cluster + u.rank) * g.c + u.c0 + c] = total;
                          });
    // The block's totals are written (cluster_group_sums ends on a barrier): the grid's fold
    // blocks may take them. Thread 0 waits for their stores before its dx; a release after dx
    // instead held every block until its dx stores landed, slower than no flags at all.
    if (ready.flags != nullptr && threadIdx.x == 0) release_flag(ready.flags + blockIdx.x, ready.generation);
  } else {
    // The unit's per-channel totals over the cluster; rank 0 keeps them in `totals` ([N][C]).
    GradientSums* const weighted = staged_region<GradientSums>(staged, layout.totals_at);
    cluster_channel_totals<V>(sums, m, u.rank, scratch, layout.scratch_entries, exchange,
                              [&](Index c, const GradientSums& total) {
                                if (u.rank == 0 && totals != nullptr) totals[u.n * g.c + u.c0 + c] = total;
                                const float gamma_c = band_gamma[c];
                                weighted[c] = GradientSums{{gamma_c * total[0], gamma_c * total[1]}};
                              });
    if (with_dx) {
      block_sync();
      group_totals(weighted, g.group_channels, m.band_groups, group_sums);
      block_sync();
    }
  }

  if (with_dx) {
    const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
    DataGradient coefficients[V];
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) {
      const GradientSums ab = group_sums[group[e]];
      const float rs = state[e].rstd;
      coefficients[e] =
          DataGradient{rs * state[e].gamma, -rs * rs * rs * ab[1] * inverse_count, -rs * ab[0] * inverse_count};
    }
    // Rows by product, not a running pointer: the pointer's registers made the 16-bit backward
    // with Swish spill 48 bytes instead of 12 at its 96.
    T* unit_dx = dx + u.n * dxs.n + u.c0 + lane.column * V;
    for (int j = 0; j < lane.valid_slots; ++j) {
      const Vector<T, V> xv = staged_vector<V, T>(staged, j),
                         dv = staged_vector<V, T>(staged + layout.tensor_vectors, j);
      Vector<T, V> out;
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e)
        out[e] = type_convert<T>(data_gradient<kActivation>(type_convert<float>(dv[e]), type_convert<float>(xv[e]),
                                                            state[e], coefficients[e], swish_beta));
      store_vector<V>(unit_dx + (lane.first + j * lane.step) * g.c, out);
    }
  }
}

}  // namespace hipgrad::groupnorm::detail
