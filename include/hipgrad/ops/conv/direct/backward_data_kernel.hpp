/// @file backward_data_kernel.hpp
/// @brief Device code: conv::BackwardData's direct kernel for few channels per group.
///
/// A block owns one batch item, a tile of groups and a tile of dx positions. It stages the dy
/// window the tile reads (halo included, zero outside dy) and the groups' filter taps in shared
/// memory as fp32, a chunk of dy channels at a time, then each thread adds, for its dx channel,
/// kRun positions of one phase along W (phase_step apart, so that they meet the same taps) on
/// kDataRows rows of the outer dimensions: dy read through a register window that slides across
/// the W taps, only the taps of the position's phase visited. Every dx element is one thread's
/// fp32 sum in a fixed order, written once; phases that meet no tap are written as zeros.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/direct/walk.hpp"
#include "hipgrad/ops/conv/direct/window_fill.hpp"

namespace hipgrad::conv::direct {

/// Rows of the outer dimensions a backward-data thread owns (none for 1-D).
template <int NDim>
inline constexpr int kDataRows = NDim == 1 ? 1 : 2;

/// The weights of a chunk of dy channels, [lane][k][tap] (lane = group · C + c, lanes w_pitch
/// apart), zero for groups past G. Each thread keeps one lane and walks (k, taps) with an
/// odometer: no division per element.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE void fill_data_weights(float* weights, const DataKernelParams<T, NDim>& p, int g0, int k0,
                                           int chunk, int tid) {
  const int lane_threads = p.lanes < p.threads ? p.lanes : p.threads;
  const int step = p.threads / lane_threads;
  const int first = tid / lane_threads;
  if (first >= step) return;
  for (int lane = tid % lane_threads; lane < p.lanes; lane += lane_threads) {
    const int group = lane / p.c, channel = lane % p.c;
    const bool valid = g0 + group < p.groups;
    const T* w = p.w + (g0 + group) * p.w_g + k0 * p.w_k + channel * p.w_c;
    Odometer<NDim + 1> at;  // (k, filter taps per dimension)
    at.radix[0] = chunk;
    for (int d = 0; d < NDim; ++d) at.radix[d + 1] = p.dims[d].filter;
    at.start(first);
    for (int e = first; e < chunk * p.taps; e += step) {
      std::int64_t offset = at.digit[0] * p.w_k;
      for (int d = 0; d < NDim; ++d) offset += at.digit[d + 1] * p.w_spatial[d];
      weights[lane * p.w_pitch + e] = valid ? type_convert<float>(w[offset]) : 0.0f;
      at.advance(step);
    }
  }
}

/// Calls f(position, tap) for every combination of the outer dimensions' taps that meet the
/// row's phases: `position` the row-major dy window index of the combination's row (W = 0),
/// `tap` the row-major filter index of its taps (W tap = 0).
template <int D, int NDim, typename F>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void for_each_outer_tap(const DimWalk* dims, const Phase* phases, const int* origin,
                                                           int position, int tap, F&& f) {
  if constexpr (D == NDim - 1) {
    f(position * dims[D].window, tap * dims[D].filter);
  } else {
    for (int i = 0; i < phases[D].taps; ++i) {
      const int o = phases[D].base - i * dims[D].lattice;
      if (o - origin[D] >= dims[D].window) continue;  // past dy's end: zeros
      const int t = phases[D].first_tap + i * dims[D].tap_step;
      for_each_outer_tap<D + 1, NDim>(dims, phases, origin,
                                      (position + o - origin[D]) * (D + 1 < NDim - 1 ? dims[D + 1].window : 1),
                                      (tap + t) * (D + 1 < NDim - 1 ? dims[D + 1].filter : 1), f);
    }
  }
}

/// Stages dy channels k0 … k0 + chunk − 1 of the block's window and their taps in `shared`
/// (thread `tid` of the block's part): the window from dy_lead on, the taps behind it.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE void stage_data(const DataKernelParams<T, NDim>& p, const DataBlock<NDim>& blk, int k0, int chunk,
                                    int tid, float* shared) {
  WindowSource<T, NDim> src{};
  src.base = p.dy + blk.n * p.dy_strides.n + blk.g0 * p.dy_strides.g + k0 * p.dy_strides.c;
  src.strides = &p.dy_strides;
  src.valid_groups = p.groups - blk.g0;
  src.valid_channels = chunk;
  for (int d = 0; d < NDim; ++d) {
    src.origin[d] = blk.origin[d];
    src.length[d] = p.dims[d].window;
    src.extent[d] = p.dims[d].out;
  }
  fill_window(shared + p.dy_lead, src, p.dy_box, tid, p.threads);
  fill_data_weights(shared + p.dy_lead + p.dy_box.lanes * p.dy_box.pitch, p, blk.g0, k0, chunk, tid);
}

/// acc[j] += Σ over the W taps of the phase (i0 + i, i < count) of the window · the tap's weight:
/// output j meets tap i0 + i through window slot j − i + kTaps − 1, which holds dy at `slots`
/// + (j − i + kTaps − 1)·lattice (checked against the window's end where `checked`).
template <int kTaps, bool kChecked, bool kUnitLattice>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void add_window_taps(const float* slots, int lattice, int first_slot, int window,
                                                        const float* weights, int tap_step, int count,
                                                        float (&acc)[kRun]) {
  float slot[kRun + kTaps - 1];
  HIPGRAD_UNROLL
  for (int v = 0; v < kRun + kTaps - 1; ++v) {
    const int step = kUnitLattice ? v : v * lattice;  // a constant offset where the lattice is 1
    if constexpr (kChecked) {
      const int at = first_slot + step;
      slot[v] = at >= 0 && at < window ? slots[step] : 0.0f;
    } else {
      slot[v] = slots[step];
    }
  }
  HIPGRAD_UNROLL
  for (int i = 0; i < kTaps; ++i) {
    if (i >= count) break;
    const float wv = weights[i * tap_step];
    HIPGRAD_UNROLL
    for (int j = 0; j < kRun; ++j) acc[j] += slot[j - i + kTaps - 1] * wv;
  }
}

/// A thread's sums over the staged dy channels (chunk of them): acc[r][j] for its row r and W
/// position j.
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE void accumulate_data(const DataKernelParams<T, NDim>& p, const DataBlock<NDim>& blk,
                                         const DataThread& th, int chunk, const float* shared,
                                         float (&acc)[kDataRows<NDim>][kRun]) {
  constexpr int W = NDim - 1;
  const DimWalk& dw = p.dims[W];
  const Phase w_phase = phase_of(dw, th.x_first);
  const float* window = shared + p.dy_lead;
  const float* weights = window + p.dy_box.lanes * p.dy_box.pitch + th.lane * p.w_pitch;
  HIPGRAD_UNROLL
  for (int r = 0; r < kDataRows<NDim>; ++r) {
    int x[NDim];
    if (!outer_row<NDim>(p.dims, blk.tile_start, th.row_slot + r * p.row_slots, true, x)) continue;
    Phase phases[NDim];
    bool meets = w_phase.taps > 0;
    for (int d = 0; d < W; ++d) {
      phases[d] = phase_of(p.dims[d], x[d]);
      meets = meets && phases[d].taps > 0;
    }
    if (!meets) continue;
    for (int kk = 0; kk < chunk; ++kk) {
      const float* lane_row = window + (th.group * p.k_chunk + kk) * p.dy_box.pitch;
      const float* lane_taps = weights + kk * p.taps;
      for_each_outer_tap<0, NDim>(p.dims, phases, blk.origin, 0, 0, [&](int position, int tap) {
        for (int i0 = 0; i0 < w_phase.taps; i0 += kTaps) {
          const int count = w_phase.taps - i0 < kTaps ? w_phase.taps - i0 : kTaps;
          // Slot 0's window index; slots below kTaps − count are never multiplied (dy_lead
          // keeps them inside shared memory), the last must lie inside the window to skip checks.
          const int first_slot = w_phase.base - (kTaps - 1 + i0) * dw.lattice - blk.origin[W];
          const int last_slot = first_slot + (kRun + kTaps - 2) * dw.lattice;
          const float* slots = lane_row + position + first_slot;
          const float* taps = lane_taps + tap + w_phase.first_tap + i0 * dw.tap_step;
          if (last_slot >= dw.window)
            add_window_taps<kTaps, true, false>(slots, dw.lattice, first_slot, dw.window, taps, dw.tap_step, count,
                                                acc[r]);
          else if (dw.lattice == 1)
            add_window_taps<kTaps, false, true>(slots, 1, first_slot, dw.window, taps, dw.tap_step, count, acc[r]);
          else
            add_window_taps<kTaps, false, false>(slots, dw.lattice, first_slot, dw.window, taps, dw.tap_step, count,
                                                 acc[r]);
        }
      });
    }
  }
}

/// Writes a thread's dx elements.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE void store_data(const DataKernelParams<T, NDim>& p, const DataBlock<NDim>& blk,
                                    const DataThread& th, const float (&acc)[kDataRows<NDim>][kRun]) {
  constexpr int W = NDim - 1;
  const DimWalk& dw = p.dims[W];
  HIPGRAD_UNROLL
  for (int r = 0; r < kDataRows<NDim>; ++r) {
    int x[NDim];
    if (!outer_row<NDim>(p.dims, blk.tile_start, th.row_slot + r * p.row_slots, true, x)) continue;
    std::int64_t offset = blk.n * p.dx_strides.n + (blk.g0 + th.group) * p.dx_strides.g + th.channel * p.dx_strides.c;
    for (int d = 0; d < W; ++d) offset += x[d] * p.dx_strides.spatial[d];
    T* run = p.dx + offset + th.x_first * p.dx_strides.spatial[W];
    constexpr int kWidth = kVector16<T>;
    if (dw.phase_step == 1 && p.dx_strides.spatial[W] == 1 && th.x_first + kRun <= dw.in &&
        is_vector_aligned<T, kWidth>(run)) {
      // W contiguous (NCHW): the run's positions in 16-byte stores.
      HIPGRAD_UNROLL
      for (int j0 = 0; j0 < kRun; j0 += kWidth) {
        Vector<T, kWidth> v;
        HIPGRAD_UNROLL
        for (int e = 0; e < kWidth; ++e) v[e] = type_convert<T>(acc[r][j0 + e]);
        store_vector<kWidth>(run + j0, v);
      }
      continue;
    }
    HIPGRAD_UNROLL
    for (int j = 0; j < kRun; ++j) {
      const int xw = th.x_first + j * dw.phase_step;
      if (xw < dw.in) p.dx[offset + xw * p.dx_strides.spatial[W]] = type_convert<T>(acc[r][j]);
    }
  }
}

/// Whether a thread owns dx elements (its row slot and group exist).
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool data_thread_works(const DataKernelParams<T, NDim>& p,
                                                          const DataBlock<NDim>& blk, const DataThread& th) {
  return th.row_slot < p.row_slots && blk.g0 + th.group < p.groups;
}

template <typename T, int NDim, int kTaps>
__global__ void __launch_bounds__(kMaxBlockThreads, kMinBlocks)
    direct_backward_data_kernel(const DataKernelParams<T, NDim> p) {
  extern __shared__ float shared[];
  const int tid = static_cast<int>(threadIdx.x);
  const DataBlock<NDim> blk = data_block(p, static_cast<int>(blockIdx.x));
  const DataThread th = data_thread(p, blk, tid);
  const bool works = data_thread_works(p, blk, th);
  float acc[kDataRows<NDim>][kRun];
  HIPGRAD_UNROLL
  for (int r = 0; r < kDataRows<NDim>; ++r) HIPGRAD_UNROLL
  for (int j = 0; j < kRun; ++j) acc[r][j] = 0.0f;
  for (int k0 = 0; k0 < p.k; k0 += p.k_chunk) {
    const int chunk = p.k - k0 < p.k_chunk ? p.k - k0 : p.k_chunk;
    stage_data(p, blk, k0, chunk, tid, shared);
    __syncthreads();
    if (works) accumulate_data<T, NDim, kTaps>(p, blk, th, chunk, shared, acc);
    __syncthreads();
  }
  if (works) store_data(p, blk, th, acc);
}

}  // namespace hipgrad::conv::direct
