/// @file one_read_planes.hpp
/// @brief GroupNorm forward and fused backward over packed planes (NCHW and kin) in one launch
///        of one block per (n, group) that holds the whole group in registers: x (and dy) are
///        read from memory once, and both the statistics and the output come from the registers.
///
/// Thread mapping: a block is group_channels × channel_threads threads (channel_threads a power
/// of two), rounded up to whole 64-lane warps. Thread t owns channel t / channel_threads of the
/// group and, in its plane, the vectors lane, lane + channel_threads, … (kVectors of them, those
/// past the plane predicated off), so that neighbouring threads read neighbouring vectors and
/// every per-channel constant sits in a register. A channel is an aligned run of lanes within a
/// warp or a run of whole warps, so its sums need shuffles and at most one barrier.
///
/// The group must fit: kVectors × V elements per thread of each tensor (make_one_read_plan picks
/// the smallest kVectors that fits the block; larger groups take the three-pass path).
#pragma once

#include "hipgrad/ops/groupnorm/detail/backward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/forward_kernels.hpp"

namespace hipgrad::groupnorm::detail {

/// How a group's planes are dealt to a block's threads (chosen by make_one_read_plan).
struct OneReadMapping {
  Index channel_threads = 1;  ///< threads per channel, a power of two
  int channel_shift = 0;      ///< log2(channel_threads)
  Index plane_vectors = 0;    ///< vectors per plane: spatial / V
};

/// Most warps a one-read block has on any target (1024 threads of 32 lanes).
inline constexpr int kOneReadMaxWarps = 32;

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
    s.slots = span >= most * stride ? most : (static_cast<int>(span) + static_cast<int>(stride) - 1) / static_cast<int>(stride);
    return s;
  }
};

/// The thread's channel within its group and its vectors in that channel's plane.
struct OneReadLane {
  Index channel;  ///< within the group; ≥ group_channels for the threads that pad the block
  bool active;
  bool leader;    ///< the channel's first thread
  OneReadSlots slots;

  template <int V>
  HIPGRAD_DEVICE static OneReadLane of(const OneReadMapping& m, const Geometry& g, int most) {
    OneReadLane l;
    l.channel = static_cast<Index>(threadIdx.x) >> m.channel_shift;
    const Index first = static_cast<Index>(threadIdx.x) & (m.channel_threads - 1);
    l.active = l.channel < g.group_channels;
    l.leader = l.active && first == 0;
    l.slots = OneReadSlots::strided(first, m.channel_threads, l.active ? m.plane_vectors : 0, most, V);
    return l;
  }
};

template <int V, int kSlots, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE void load_slots(const T* base, const OneReadSlots& s, Vector<T, V> (&v)[kSlots]) {
  HIPGRAD_UNROLL
  for (int r = 0; r < kSlots; ++r)
    if (s.valid(r)) v[r] = load_vector<V>(base + s.at(r));
}

/// The sum of every thread's `value`, returned to every thread, in a fixed order (lanes by a
/// butterfly, then warps in index order). `scratch` holds a value per warp and must not be in
/// use by another reduction that the block has not passed a barrier since.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value block_all_sum(Value value, Value* scratch) {
  for (int stride = warp_size() / 2; stride > 0; stride /= 2) value = value + shfl_xor(value, stride);
  const int warps = static_cast<int>(blockDim.x) / warp_size();
  if (lane_id() == 0) scratch[threadIdx.x / warp_size()] = value;
  block_sync();
  Value total = scratch[0];
  for (int w = 1; w < warps; ++w) total = total + scratch[w];
  return total;
}

/// The sum over the threads of the caller's channel, returned to each of them; the same
/// contract for `scratch` as block_all_sum. channel_threads is uniform across the block.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value channel_all_sum(Value value, Index channel_threads, Value* scratch) {
  const int lanes = channel_threads < warp_size() ? static_cast<int>(channel_threads) : warp_size();
  for (int stride = lanes / 2; stride > 0; stride /= 2) value = value + shfl_xor(value, stride);
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

/// Forward: the mean from the registers, then the variance as the mean of (x − μ)² (exact two
/// passes over registers, no cancellation), then y.
template <typename T, typename TParam, int V, int kVectors, int kMaxThreads, Activation kActivation>
__global__ void __launch_bounds__(kMaxThreads)
    forward_one_read_planes(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys, Geometry g,
                            OneReadMapping m, const TParam* __restrict__ gamma, const TParam* __restrict__ beta,
                            float epsilon, float swish_beta, float* __restrict__ mean, float* __restrict__ rstd) {
  __shared__ float scratch[2][kOneReadMaxWarps];
  const Index unit = blockIdx.x, n = unit / g.groups;
  const OneReadLane lane = OneReadLane::of<V>(m, g, kVectors);
  const Index c = (unit % g.groups) * g.group_channels + lane.channel;
  Vector<T, V> v[kVectors];
  if (lane.active) load_slots(x + n * xs.n + c * xs.c, lane.slots, v);

  float sum = 0.0f;
  HIPGRAD_UNROLL
  for (int r = 0; r < kVectors; ++r)
    if (lane.slots.valid(r))
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e) sum += type_convert<float>(v[r][e]);
  const float count = static_cast<float>(g.group_channels * g.spatial);
  const float mu = block_all_sum(sum, scratch[0]) / count;
  float squares = 0.0f;
  HIPGRAD_UNROLL
  for (int r = 0; r < kVectors; ++r)
    if (lane.slots.valid(r))
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e) {
        const float d = type_convert<float>(v[r][e]) - mu;
        squares += d * d;
      }
  const float rs = 1.0f / sqrtf(block_all_sum(squares, scratch[1]) / count + epsilon);
  if (threadIdx.x == 0 && mean != nullptr) mean[unit] = mu;
  if (threadIdx.x == 0 && rstd != nullptr) rstd[unit] = rs;
  if (!lane.active) return;

  const float scale = type_convert<float>(gamma[c]) * rs;
  const float shift = type_convert<float>(beta[c]) - mu * scale;
  T* out = y + n * ys.n + c * ys.c;
  HIPGRAD_UNROLL
  for (int r = 0; r < kVectors; ++r) {
    if (!lane.slots.valid(r)) continue;
    Vector<T, V> o;
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) o[e] = type_convert<T>(activate<kActivation>(scale * type_convert<float>(v[r][e]) + shift, swish_beta));
    store_vector<V>(out + lane.slots.at(r), o);
  }
}

/// Fused backward: per-channel (Σdz, Σdz·(x − μ)) from the registers (kept in `totals` for dγ/dβ
/// when given), the group's DataGradient from their γ-weighted sums, then dx (when given)
/// from the registers again.
template <typename T, typename TParam, int V, int kVectors, int kMaxThreads, Activation kActivation>
__global__ void __launch_bounds__(kMaxThreads)
    backward_one_read_planes(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs,
                             T* __restrict__ dx, DeviceStrides dxs, Geometry g, OneReadMapping m,
                             const float* __restrict__ mean, const float* __restrict__ rstd,
                             const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                             GradientSums* __restrict__ totals) {
  __shared__ GradientSums scratch[2][kOneReadMaxWarps];
  const Index unit = blockIdx.x, n = unit / g.groups;
  const OneReadLane lane = OneReadLane::of<V>(m, g, kVectors);
  const Index c = (unit % g.groups) * g.group_channels + lane.channel;
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
    if (lane.slots.valid(r))
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e)
        accumulate<kActivation>(sums, type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), s, swish_beta);
  const GradientSums channel = channel_all_sum(sums, m.channel_threads, scratch[0]);
  const bool leader = lane.leader;
  if (leader && totals != nullptr) totals[n * g.c + c] = channel;
  if (dx == nullptr) return;  // uniform across the block: no thread reaches the barrier below

  const GradientSums weighted = leader ? GradientSums{{s.gamma * channel[0], s.gamma * channel[1]}} : GradientSums{{0.0f, 0.0f}};
  const GradientSums ab = block_all_sum(weighted, scratch[1]);
  if (!lane.active) return;
  const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
  const DataGradient d{s.rstd * s.gamma, -s.rstd * s.rstd * s.rstd * ab[1] * inverse_count, -s.rstd * ab[0] * inverse_count};
  T* out = dx + n * dxs.n + c * dxs.c;
  HIPGRAD_UNROLL
  for (int r = 0; r < kVectors; ++r) {
    if (!lane.slots.valid(r)) continue;
    Vector<T, V> o;
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e)
      o[e] = type_convert<T>(data_gradient<kActivation>(type_convert<float>(dv[r][e]), type_convert<float>(xv[r][e]), s, d, swish_beta));
    store_vector<V>(out + lane.slots.at(r), o);
  }
}

}  // namespace hipgrad::groupnorm::detail
