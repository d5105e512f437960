/// @file one_read_channels_last.hpp
/// @brief GroupNorm forward and fused backward over packed channels-last tensors (NHWC and kin)
///        in one launch of one block per (n, group) that holds the group in registers.
///
/// A group is a [positions, group_channels] matrix whose rows lie C elements apart. Its rows are
/// cut into `columns` pairs of channels (Vc = 2: a wider vector would need a group of 8 or 16
/// channels and keep 8 channels' constants and sums per thread, taking the registers that hold
/// the data; pairs use the 32-byte sectors as fully, as a warp covers whole row segments); thread t owns column t % columns and the rows
/// t / columns, t / columns + rows_per_step, … (kElements / Vc of them, those past the last
/// position predicated off). The block size is a multiple of `columns`, so a thread's channels,
/// and with them its γ and β, never change. Neighbouring groups are neighbouring blocks, which
/// run at the same time: the part of a 32-byte sector one group does not use, the next one reads
/// from L2.
///
/// dx needs only the γ-weighted group sums, which every thread adds up over its own elements;
/// dγ/dβ need per-channel sums, which go through shared memory one channel of the vector at a
/// time, each column summed by one warp in a fixed order.
#pragma once

#include "hipgrad/ops/groupnorm/detail/one_read_planes.hpp"

namespace hipgrad::groupnorm::detail {

/// Channels per access of the channels-last one-read kernels.
inline constexpr int kOneReadChannelVector = 2;

/// How a group's rows are dealt to a block's threads (chosen by make_one_read_rows).
struct OneReadRows {
  Index columns = 1;        ///< vectors per row: group_channels / Vc
  Index rows_per_step = 1;  ///< threads / columns
  Index positions = 0;      ///< rows: the spatial size
};

/// The thread's column (its Vc channels of the group) and its rows.
struct OneReadRowLane {
  Index column, columns;
  Index rows_per_step;
  OneReadSlots slots;

  template <int Vc>
  HIPGRAD_DEVICE static OneReadRowLane of(const OneReadRows& m, const Geometry& g, int most) {
    OneReadRowLane l;
    l.columns = m.columns;
    const int columns = static_cast<int>(m.columns);  // ≤ 1024: 32-bit division
    l.column = static_cast<int>(threadIdx.x) % columns;
    l.rows_per_step = m.rows_per_step;
    l.slots = OneReadSlots::strided(static_cast<int>(threadIdx.x) / columns, m.rows_per_step, m.positions, most, g.c);
    l.slots.offset += l.column * Vc;
    return l;
  }
};

template <typename T, typename TParam, int Vc, int kElements, int kMaxThreads, Activation kActivation>
__global__ void __launch_bounds__(kMaxThreads)
    forward_one_read_channels_last(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys,
                                   Geometry g, OneReadRows m, const TParam* __restrict__ gamma,
                                   const TParam* __restrict__ beta, float epsilon, float swish_beta,
                                   float* __restrict__ mean, float* __restrict__ rstd) {
  constexpr int kSlots = kElements / Vc;
  __shared__ float scratch[2][kOneReadMaxWarps];
  const Index unit = blockIdx.x, n = unit / g.groups, c0 = (unit % g.groups) * g.group_channels;
  const OneReadRowLane lane = OneReadRowLane::of<Vc>(m, g, kSlots);
  Vector<T, Vc> v[kSlots];
  load_slots(x + n * xs.n + c0, lane.slots, v);

  float sum = 0.0f;
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (lane.slots.valid(r))
      HIPGRAD_UNROLL
      for (int e = 0; e < Vc; ++e) sum += type_convert<float>(v[r][e]);
  const float count = static_cast<float>(g.group_channels * g.spatial);
  const float mu = block_all_sum(sum, scratch[0]) / count;
  float squares = 0.0f;
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (lane.slots.valid(r))
      HIPGRAD_UNROLL
      for (int e = 0; e < Vc; ++e) {
        const float d = type_convert<float>(v[r][e]) - mu;
        squares += d * d;
      }
  const float rs = 1.0f / sqrtf(block_all_sum(squares, scratch[1]) / count + epsilon);
  if (threadIdx.x == 0 && mean != nullptr) mean[unit] = mu;
  if (threadIdx.x == 0 && rstd != nullptr) rstd[unit] = rs;

  float scale[Vc], shift[Vc];
  HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e) {
    scale[e] = type_convert<float>(gamma[c0 + (lane.column * Vc + e)]) * rs;
    shift[e] = type_convert<float>(beta[c0 + (lane.column * Vc + e)]) - mu * scale[e];
  }
  T* out = y + n * ys.n + c0;
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r) {
    if (!lane.slots.valid(r)) continue;
    Vector<T, Vc> o;
    HIPGRAD_UNROLL
    for (int e = 0; e < Vc; ++e) o[e] = type_convert<T>(activate<kActivation>(scale[e] * type_convert<float>(v[r][e]) + shift[e], swish_beta));
    store_vector<Vc>(out + lane.slots.at(r), o);
  }
}

/// Writes totals[n·C + c0 + channel] for every channel of the group: each thread gives its
/// sums per element of its vector; one element index at a time they pass through `rows` (one
/// slot per thread) and a warp per column adds the column's threads in index order.
template <int Vc>
HIPGRAD_DEVICE HIPGRAD_INLINE void store_channel_totals(const GradientSums (&sums)[Vc], const OneReadRowLane& lane,
                                                        GradientSums* rows, GradientSums* totals) {
  const int warps = static_cast<int>(blockDim.x) / warp_size(), warp = static_cast<int>(threadIdx.x) / warp_size();
  const Index columns = lane.columns;
  HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e) {
    if (e > 0) block_sync();  // the previous element's reads of `rows` are done
    rows[threadIdx.x] = sums[e];
    block_sync();
    for (Index column = warp; column < columns; column += warps) {
      GradientSums acc{{0.0f, 0.0f}};
      for (Index i = lane_id(); i < lane.rows_per_step; i += warp_size()) acc = acc + rows[column + i * columns];
      for (int stride = warp_size() / 2; stride > 0; stride /= 2) acc = acc + shfl_xor(acc, stride);
      if (lane_id() == 0) totals[column * Vc + e] = acc;
    }
  }
}

template <typename T, typename TParam, int Vc, int kElements, int kMaxThreads, Activation kActivation>
__global__ void __launch_bounds__(kMaxThreads)
    backward_one_read_channels_last(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x,
                                    DeviceStrides xs, T* __restrict__ dx, DeviceStrides dxs, Geometry g, OneReadRows m,
                                    const float* __restrict__ mean, const float* __restrict__ rstd,
                                    const TParam* __restrict__ gamma, const TParam* __restrict__ beta,
                                    float swish_beta, GradientSums* __restrict__ totals) {
  constexpr int kSlots = kElements / Vc;
  __shared__ GradientSums scratch[kOneReadMaxWarps];
  __shared__ GradientSums rows[kMaxThreads];
  const Index unit = blockIdx.x, n = unit / g.groups, c0 = (unit % g.groups) * g.group_channels;
  const OneReadRowLane lane = OneReadRowLane::of<Vc>(m, g, kSlots);
  Vector<T, Vc> xv[kSlots], dv[kSlots];
  load_slots(x + n * xs.n + c0, lane.slots, xv);
  load_slots(dy + n * dys.n + c0, lane.slots, dv);
  // Per element only γ and β (the rest of a ChannelState is the group's or follows from them),
  // so that the registers go to the data.
  const float group_mean = mean[unit], group_rstd = rstd[unit];
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
    if (lane.slots.valid(r))
      HIPGRAD_UNROLL
      for (int e = 0; e < Vc; ++e)
        accumulate<kActivation>(sums[e], type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), state(e), swish_beta);
  if (totals != nullptr) store_channel_totals<Vc>(sums, lane, rows, totals + n * g.c + c0);
  if (dx == nullptr) return;  // uniform across the block: no thread reaches the barrier below

  GradientSums weighted{{0.0f, 0.0f}};
  HIPGRAD_UNROLL
  for (int e = 0; e < Vc; ++e) weighted = weighted + GradientSums{{gm[e] * sums[e][0], gm[e] * sums[e][1]}};
  const GradientSums ab = block_all_sum(weighted, scratch);
  const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
  const float rs = group_rstd, q = -rs * rs * rs * ab[1] * inverse_count, shift = -rs * ab[0] * inverse_count;
  T* out = dx + n * dxs.n + c0;
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r) {
    if (!lane.slots.valid(r)) continue;
    Vector<T, Vc> o;
    HIPGRAD_UNROLL
    for (int e = 0; e < Vc; ++e)
      o[e] = type_convert<T>(data_gradient<kActivation>(type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), state(e),
                                                        DataGradient{rs * gm[e], q, shift}, swish_beta));
    store_vector<Vc>(out + lane.slots.at(r), o);
  }
}

}  // namespace hipgrad::groupnorm::detail
