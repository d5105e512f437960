/// @file vector_data_kernel.hpp
/// @brief Device code: conv::BackwardData's vector kernel for depthwise convolutions whose groups
///        lie adjacent in memory (VectorDataParams).
///
/// Nothing of dy passes through shared memory: a thread loads kLaneVector groups of dy at a time
/// (one 8- or 16-byte access; a warp's threads read adjacent groups), keeps kRun + kTaps − 1
/// window positions in registers and slides them across the W taps of its phase, so that each dy
/// vector it loads feeds up to kTaps · kRun fused multiply-adds; the halo is re-read from L1/L2,
/// not DRAM. Every dx element is one thread's fp32 sum in a fixed order, written once.
#pragma once

#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/direct/walk.hpp"

namespace hipgrad::conv::direct {

/// How a thread reaches its kLaneVector lanes of one tensor: `step` apart, `valid` of them (the
/// rest past G); `vectors` where every access is one aligned vector: lanes adjacent and all valid,
/// the tensor aligned and every batch and position stride a multiple of the vector. Decided once
/// per thread, so that no load tests its own address.
struct LaneAccess {
  std::int64_t step;
  int valid;
  bool vectors;
};

template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE LaneAccess lane_access(const T* tensor, const TensorStrides<NDim>& s, int g0,
                                                          int groups) {
  LaneAccess a{s.g, groups - g0 < kLaneVector ? groups - g0 : kLaneVector, false};
  a.vectors = a.valid == kLaneVector && s.g == 1 && is_vector_aligned<T, kLaneVector>(tensor) && s.n % kLaneVector == 0;
  for (int d = 0; d < NDim; ++d) a.vectors = a.vectors && s.spatial[d] % kLaneVector == 0;
  return a;
}

/// The lanes at `p` as fp32 (zero past the valid ones): one aligned vector where kVectors (the
/// caller has checked LaneAccess::vectors once), else `step` apart.
template <bool kVectors, typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void load_lanes(const T* p, const LaneAccess& a, float (&v)[kLaneVector]) {
  if constexpr (kVectors) {
    const Vector<T, kLaneVector> raw = load_vector<kLaneVector>(p);
    HIPGRAD_UNROLL
    for (int e = 0; e < kLaneVector; ++e) v[e] = type_convert<float>(raw[e]);
  } else {
    HIPGRAD_UNROLL
    for (int e = 0; e < kLaneVector; ++e) v[e] = e < a.valid ? type_convert<float>(p[e * a.step]) : 0.0f;
  }
}

/// visit(std::bool_constant<vectors>{}): the vector kernels compile their loads for both cases, and
/// each thread takes one, so that neither carries the other's registers.
template <typename Visit>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void with_lane_vectors(bool vectors, Visit&& visit) {
  if (vectors) {
    visit(std::true_type{});
  } else {
    visit(std::false_type{});
  }
}

/// A vector thread of backward-data: its lane vector in the block, first group, batch item and
/// dx coordinates (the outer dimensions', then its first W position); works: it owns dx elements.
struct VectorDataThread {
  int vector = 0, g0 = 0, n = 0;
  int x[3] = {};
  bool works = false;
};

template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE VectorDataThread vector_data_thread(const VectorDataParams<T, NDim>& p, int block_x,
                                                                       int block_y, int tid) {
  VectorDataThread t;
  t.vector = tid % p.block_vectors;
  const int slot = tid / p.block_vectors;
  t.g0 = (block_y * p.block_vectors + t.vector) * kLaneVector;
  const long long run = static_cast<long long>(block_x) * p.slots + slot;
  t.works = slot < p.slots && run < p.runs && t.g0 < p.groups;
  if (!t.works) return t;
  const DimWalk& w = p.dims[NDim - 1];
  std::uint32_t row, w_slot;
  p.run_digits[NDim - 1].divmod(static_cast<std::uint32_t>(run), &row, &w_slot);
  t.x[NDim - 1] =
      static_cast<int>(w_slot) % w.phase_step + (static_cast<int>(w_slot) / w.phase_step) * kRun * w.phase_step;
  for (int d = NDim - 2; d >= 0; --d) {
    std::uint32_t x;
    p.run_digits[d].divmod(row, &row, &x);
    t.x[d] = static_cast<int>(x);
  }
  t.n = static_cast<int>(row);
  return t;
}

/// The block's taps in `taps` as fp32, [tap][lane] (lane = group − the block's first), zero past G.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE void stage_vector_taps(const VectorDataParams<T, NDim>& p, int block_y, int tid, float* taps) {
  const int lanes = p.block_vectors * kLaneVector;
  const int g_first = block_y * lanes;
  for (int e = tid; e < p.taps * lanes; e += p.threads) {
    const int tap = e / lanes, g = g_first + e % lanes;
    std::int64_t offset = 0;
    for (int d = NDim - 1, rest = tap; d >= 0; --d) {
      offset += (rest % p.dims[d].filter) * p.w_spatial[d];
      rest /= p.dims[d].filter;
    }
    taps[e] = g < p.groups ? type_convert<float>(p.w[g * p.w_g + offset]) : 0.0f;
  }
}

/// The dy row a window reads: `row` at W position 0 of the thread's first group, W's stride, the
/// lanes' access.
template <typename T>
struct LaneRow {
  const T* row;
  std::int64_t w_stride;
  LaneAccess lanes;
};

/// acc[j] += Σ over taps i < count (tap_floats apart in `taps`) of window slot j − i + kTaps − 1 ·
/// the tap: slot v holds dy at W position first + v·lattice (zero outside [0, extent)); slots below
/// kTaps − count are never multiplied and not loaded. The taps stay in registers and the slots
/// stream through one vector, last first (each sum still takes its taps in order), so that the
/// window costs no registers beside the sums.
template <bool kVectors, typename T, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void add_vector_window(const LaneRow<T>& src, int first, int lattice, int extent,
                                                          int count, const float* taps, int tap_floats,
                                                          float (&acc)[kRun][kLaneVector]) {
  float wv[kTaps][kLaneVector];
  HIPGRAD_UNROLL
  for (int i = 0; i < kTaps; ++i) {
    const Vector<float, kLaneVector> v = load_vector<kLaneVector>(taps + (i < count ? i : 0) * tap_floats);
    HIPGRAD_UNROLL
    for (int e = 0; e < kLaneVector; ++e) wv[i][e] = v[e];
  }
  // Guards, not breaks: loops of one exit unroll on every compiler.
  HIPGRAD_UNROLL
  for (int v = kRun + kTaps - 2; v >= 0; --v) {
    const int o = first + v * lattice;
    if (v >= kTaps - count && o >= 0 && o < extent) {
      float slot[kLaneVector];
      load_lanes<kVectors>(src.row + o * src.w_stride, src.lanes, slot);
      // Slot v meets sum j through tap i = j − v + kTaps − 1.
      HIPGRAD_UNROLL
      for (int i = 0; i < kTaps; ++i) {
        const int j = v + i - (kTaps - 1);
        if (j >= 0 && j < kRun && i < count) {
          HIPGRAD_UNROLL
          for (int e = 0; e < kLaneVector; ++e) acc[j][e] += slot[e] * wv[i][e];
        }
      }
    }
  }
}

/// A thread's sums: for every combination of the outer dimensions' taps that meet its row (an
/// odometer over them, dy rows outside dy skipped), its W phase's taps in chunks of kTaps.
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE void accumulate_vector_data(const VectorDataParams<T, NDim>& p, const VectorDataThread& t,
                                                const float* taps, float (&acc)[kRun][kLaneVector]) {
  constexpr int W = NDim - 1;
  const DimWalk& dw = p.dims[W];
  const Phase wp = phase_of(dw, t.x[W]);
  Phase phases[NDim];
  bool meets = wp.taps > 0;
  for (int d = 0; d < W; ++d) {
    phases[d] = phase_of(p.dims[d], t.x[d]);
    meets = meets && phases[d].taps > 0;
  }
  if (!meets) return;
  const int lanes = p.block_vectors * kLaneVector;
  LaneRow<T> src{p.dy + t.n * p.dy_strides.n + t.g0 * p.dy_strides.g, p.dy_strides.spatial[W],
                 lane_access(p.dy, p.dy_strides, t.g0, p.groups)};
  const T* base = src.row;
  with_lane_vectors(src.lanes.vectors, [&](auto vectors) {
    int at[NDim] = {};  // the odometer over the outer dimensions' taps of their phases
    for (;;) {
      bool inside = true;
      std::int64_t offset = 0;
      int tap = 0;
      for (int d = 0; d < W; ++d) {
        const DimWalk& dd = p.dims[d];
        const int o = phases[d].base - at[d] * dd.lattice;
        inside = inside && o >= 0 && o < dd.out;
        offset += o * p.dy_strides.spatial[d];
        tap = tap * dd.filter + phases[d].first_tap + at[d] * dd.tap_step;
      }
      if (inside) {
        src.row = base + offset;
        const float* row_taps = taps + (tap * dw.filter + wp.first_tap) * lanes + t.vector * kLaneVector;
        for (int i0 = 0; i0 < wp.taps; i0 += kTaps) {
          const int count = wp.taps - i0 < kTaps ? wp.taps - i0 : kTaps;
          add_vector_window<decltype(vectors)::value, T, kTaps>(
              src, wp.base - (kTaps - 1 + i0) * dw.lattice, dw.lattice, dw.out, count,
              row_taps + i0 * dw.tap_step * lanes, dw.tap_step * lanes, acc);
        }
      }
      int d = W - 1;
      for (; d >= 0; --d) {
        if (++at[d] < phases[d].taps) break;
        at[d] = 0;
      }
      if (d < 0) break;
    }
  });
}

/// Writes a thread's dx elements: one access per position where its lanes are adjacent and aligned.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE void store_vector_data(const VectorDataParams<T, NDim>& p, const VectorDataThread& t,
                                           const float (&acc)[kRun][kLaneVector]) {
  constexpr int W = NDim - 1;
  const DimWalk& dw = p.dims[W];
  std::int64_t offset = t.n * p.dx_strides.n + t.g0 * p.dx_strides.g;
  for (int d = 0; d < W; ++d) offset += t.x[d] * p.dx_strides.spatial[d];
  const LaneAccess lanes = lane_access(p.dx, p.dx_strides, t.g0, p.groups);
  HIPGRAD_UNROLL
  for (int j = 0; j < kRun; ++j) {
    const int xw = t.x[W] + j * dw.phase_step;
    if (xw < dw.in) {
      T* to = p.dx + offset + xw * p.dx_strides.spatial[W];
      Vector<T, kLaneVector> v;
      HIPGRAD_UNROLL
      for (int e = 0; e < kLaneVector; ++e) v[e] = type_convert<T>(acc[j][e]);
      if (lanes.vectors) {
        store_vector<kLaneVector>(to, v);
      } else {
        for (int e = 0; e < lanes.valid; ++e) to[e * lanes.step] = v[e];
      }
    }
  }
}

template <typename T, int NDim, int kTaps>
__global__ void __launch_bounds__(kMaxBlockThreads, kVectorMinBlocks)
    vector_backward_data_kernel(const VectorDataParams<T, NDim> p) {
  extern __shared__ Vector<float, kLaneVector> vector_taps[];
  float* taps = &vector_taps[0][0];
  const int tid = static_cast<int>(threadIdx.x);
  stage_vector_taps(p, static_cast<int>(blockIdx.y), tid, taps);
  __syncthreads();
  const VectorDataThread t = vector_data_thread(p, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), tid);
  if (!t.works) return;
  float acc[kRun][kLaneVector];
  HIPGRAD_UNROLL
  for (int j = 0; j < kRun; ++j) HIPGRAD_UNROLL
  for (int e = 0; e < kLaneVector; ++e) acc[j][e] = 0.0f;
  accumulate_vector_data<T, NDim, kTaps>(p, t, taps, acc);
  store_vector_data(p, t, acc);
}

}  // namespace hipgrad::conv::direct
