/// @file vector_weight_kernel.hpp
/// @brief Device code: conv::BackwardWeight's vector kernel for depthwise convolutions whose
///        groups lie adjacent in memory (VectorWeightParams).
///
/// A thread owns kLaneVector groups and one combination of outer taps and W taps (a tap group of
/// up to kTaps taps tap_step apart, which meet x at unit steps of one window). Over the runs of
/// its block's slice it loads kRun dy vectors (lattice apart along W) and the x window of its
/// taps straight from global memory and adds dy · x into kTaps × kLaneVector fp32 sums. The block
/// then adds its slots' sums in slot order into the slice's partials; direct_weight_reduce_kernel
/// adds the slices in order. No atomics: the same bits on every run.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/conv/direct/backward_weight_kernel.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/direct/vector_data_kernel.hpp"

namespace hipgrad::conv::direct {

/// A vector thread of backward-weight: its lane vector and combination in the block, first
/// group, slot, its taps (outer taps per outer dimension and W tap group), its lanes of dy and x,
/// its slice's runs [first_run, end_run); active: it sums anything.
struct VectorWeightThread {
  int vector = 0, combo = 0, g0 = 0, slot = 0, outer = 0;
  int outer_taps[3] = {};
  TapGroup taps{};
  LaneAccess dy_lanes{}, x_lanes{};
  long long first_run = 0, end_run = 0;
  bool active = false;
};

template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE VectorWeightThread vector_weight_thread(const VectorWeightParams<T, NDim>& p,
                                                                           int block_x, int block_y, int tid) {
  constexpr int W = NDim - 1;
  VectorWeightThread t;
  t.vector = tid % p.block_vectors;
  const int rest = tid / p.block_vectors;
  t.combo = rest % p.combos_per_block;
  t.slot = rest / p.combos_per_block;
  const int lane_tile = block_y / p.combo_blocks;
  const int combo = (block_y % p.combo_blocks) * p.combos_per_block + t.combo;
  t.g0 = (lane_tile * p.block_vectors + t.vector) * kLaneVector;
  t.taps = tap_group_of<kTaps>(p.dims[W], combo % p.tap_groups);
  t.outer = combo / p.tap_groups;
  for (int d = W - 1, r = t.outer; d >= 0; --d) {
    t.outer_taps[d] = r % p.dims[d].filter;
    r /= p.dims[d].filter;
  }
  t.first_run = static_cast<long long>(block_x) * p.runs_per_slice;
  t.end_run = t.first_run + p.runs_per_slice < p.runs ? t.first_run + p.runs_per_slice : p.runs;
  t.active = t.slot < p.slots && combo < p.combos && t.g0 < p.groups && t.taps.count > 0;
  t.dy_lanes = lane_access(p.dy, p.dy_strides, t.g0, p.groups);
  t.x_lanes = lane_access(p.x, p.x_strides, t.g0, p.groups);
  return t;
}

/// acc[i] += Σ_j dy[j] · x[j + i] over run `run` (kRun dy positions lattice apart in one row):
/// dy and the x window of the thread's taps loaded straight from global memory, zero outside. The
/// x window streams through one vector (each sum still takes its positions in order), so that it
/// costs no registers beside dy and the sums.
template <bool kVectors, typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void add_vector_run(const VectorWeightParams<T, NDim>& p,
                                                       const VectorWeightThread& t, std::uint32_t run,
                                                       float (&acc)[kTaps][kLaneVector]) {
  constexpr int W = NDim - 1;
  const DimWalk& dw = p.dims[W];
  std::uint32_t row, w_slot;
  p.run_digits[W].divmod(run, &row, &w_slot);
  const int dy_first =
      static_cast<int>(w_slot) % dw.lattice + (static_cast<int>(w_slot) / dw.lattice) * kRun * dw.lattice;
  std::int64_t dy_offset = 0, x_offset = 0;
  bool inside = true;
  for (int d = W - 1; d >= 0; --d) {
    const DimWalk& dd = p.dims[d];
    std::uint32_t digit;
    p.run_digits[d].divmod(row, &row, &digit);
    const int o = static_cast<int>(digit);
    const int xo = o * dd.stride - dd.pad + t.outer_taps[d] * dd.dilation;
    inside = inside && xo >= 0 && xo < dd.in;
    dy_offset += o * p.dy_strides.spatial[d];
    x_offset += xo * p.x_strides.spatial[d];
  }
  if (!inside) return;  // the taps' x row is padding: it adds nothing
  const int n = static_cast<int>(row);
  const T* dy_row = p.dy + n * p.dy_strides.n + t.g0 * p.dy_strides.g + dy_offset;
  const T* x_row = p.x + n * p.x_strides.n + t.g0 * p.x_strides.g + x_offset;
  // x = stride·o − pad + dilation·tap, with tap_step·dilation = stride·lattice = phase_step.
  const int x_first = dw.stride * dy_first - dw.pad + t.taps.tap_class * dw.dilation + t.taps.first * dw.phase_step;
  float dy[kRun][kLaneVector];
  HIPGRAD_UNROLL
  for (int j = 0; j < kRun; ++j) {
    const int o = dy_first + j * dw.lattice;
    if (o < dw.out) {
      load_lanes<kVectors>(dy_row + o * p.dy_strides.spatial[W], t.dy_lanes, dy[j]);
    } else {
      HIPGRAD_UNROLL
      for (int e = 0; e < kLaneVector; ++e) dy[j][e] = 0.0f;
    }
  }
  // Guards, not breaks: loops of one exit unroll on every compiler.
  HIPGRAD_UNROLL
  for (int u = 0; u < kRun + kTaps - 1; ++u) {
    const int xw = x_first + u * dw.phase_step;
    if (u < kRun + t.taps.count - 1 && xw >= 0 && xw < dw.in) {
      float x[kLaneVector];
      load_lanes<kVectors>(x_row + xw * p.x_strides.spatial[W], t.x_lanes, x);
      // Window slot u meets dy position j through tap i = u − j.
      HIPGRAD_UNROLL
      for (int i = 0; i < kTaps; ++i) {
        const int j = u - i;
        if (j >= 0 && j < kRun && i < t.taps.count) {
          HIPGRAD_UNROLL
          for (int e = 0; e < kLaneVector; ++e) acc[i][e] += dy[j][e] * x[e];
        }
      }
    }
  }
}

/// A thread's sums over the runs of its slice its slot takes (slots apart).
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE void sum_vector_runs(const VectorWeightParams<T, NDim>& p, const VectorWeightThread& t,
                                         float (&acc)[kTaps][kLaneVector]) {
  if (!t.active) return;
  with_lane_vectors(t.dy_lanes.vectors && t.x_lanes.vectors, [&](auto vectors) {
    for (long long run = t.first_run + t.slot; run < t.end_run; run += p.slots)
      add_vector_run<decltype(vectors)::value, T, NDim, kTaps>(p, t, static_cast<std::uint32_t>(run), acc);
  });
}

/// Element e of a block's sums (scratch[((slot · combos_per_block + combo) · block_vectors +
/// vector) · kTaps · kLaneVector + i · kLaneVector + lane] for slot 0): its group and row-major
/// tap; false past G, the combinations or its group's taps.
struct VectorPartial {
  int g, tap;
};

template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool vector_partial(const VectorWeightParams<T, NDim>& p, int block_x, int block_y,
                                                       int e, VectorPartial* out) {
  constexpr int W = NDim - 1;
  const int per_thread = kTaps * kLaneVector;
  const int i = (e % per_thread) / kLaneVector;
  const VectorWeightThread t = vector_weight_thread<T, NDim, kTaps>(p, block_x, block_y, e / per_thread);
  out->g = t.g0 + e % kLaneVector;
  out->tap = t.outer * p.dims[W].filter + t.taps.tap_class + (t.taps.first + i) * p.dims[W].tap_step;
  return t.active && i < t.taps.count && out->g < p.groups;
}

/// Output e's partial: the sum over the block's slots in order, into the slice's partials.
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void write_vector_partial(const VectorWeightParams<T, NDim>& p, int block_x,
                                                             int block_y, int e, const float* scratch) {
  VectorPartial o;
  if (!vector_partial<T, NDim, kTaps>(p, block_x, block_y, e, &o)) return;
  const int stride = p.combos_per_block * p.block_vectors * kTaps * kLaneVector;  // between slots
  float sum = 0.0f;
  for (int s = 0; s < p.slots; ++s) sum += scratch[s * stride + e];
  p.partials[(static_cast<long long>(block_x) * p.groups + o.g) * p.taps + o.tap] = sum;
}

template <typename T, int NDim, int kTaps>
__global__ void __launch_bounds__(kMaxBlockThreads, kVectorMinBlocks)
    vector_backward_weight_kernel(const VectorWeightParams<T, NDim> p) {
  extern __shared__ Vector<float, kLaneVector> vector_sums[];
  float* scratch = &vector_sums[0][0];
  const int tid = static_cast<int>(threadIdx.x);
  const int bx = static_cast<int>(blockIdx.x), by = static_cast<int>(blockIdx.y);
  const VectorWeightThread t = vector_weight_thread<T, NDim, kTaps>(p, bx, by, tid);
  float acc[kTaps][kLaneVector];
  HIPGRAD_UNROLL
  for (int i = 0; i < kTaps; ++i) HIPGRAD_UNROLL
  for (int e = 0; e < kLaneVector; ++e) acc[i][e] = 0.0f;
  sum_vector_runs<T, NDim, kTaps>(p, t, acc);
  HIPGRAD_UNROLL
  for (int i = 0; i < kTaps; ++i) HIPGRAD_UNROLL
  for (int e = 0; e < kLaneVector; ++e) scratch[(tid * kTaps + i) * kLaneVector + e] = acc[i][e];
  __syncthreads();
  const int outputs = p.combos_per_block * p.block_vectors * kTaps * kLaneVector;
  for (int e = tid; e < outputs; e += p.threads) write_vector_partial<T, NDim, kTaps>(p, bx, by, e, scratch);
}

}  // namespace hipgrad::conv::direct
