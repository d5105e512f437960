/// @file backward_weight_kernel.hpp
/// @brief Device code: conv::BackwardWeight's direct kernel for few channels per group, and the
///        fixed-order reduction of its slices into dw.
///
/// A block owns a tile of groups, a tile of dy channels and a slice of position tiles. For each
/// tile it stages dy and the x window the tile's taps reach (zero outside x) in shared memory as
/// fp32; each thread holds, for one (group, k, c) lane, one tap of the outer dimensions and up to
/// kTaps W taps of one class (taps tap_step apart, which meet x at unit steps of one window), the
/// fp32 sums over its dy positions along W (lattice apart), reading x through a register window
/// that slides across those taps. After the slice the block adds its threads' sums in a fixed
/// order into one partial per (lane, tap); a second kernel adds the slices in order and writes dw
/// once. No atomics: the same bits on every run.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/direct/walk.hpp"
#include "hipgrad/ops/conv/direct/window_fill.hpp"

namespace hipgrad::conv::direct {

/// A backward-weight thread's role: its lane's group, k and c, and the taps it sums.
struct WeightRole {
  int group, k, channel;
  int outer;      ///< row-major index of its taps of the outer dimensions
  int tap_group;  ///< (W tap class, chunk of kTaps)
  int residue;    ///< its dy W positions' residue modulo the lattice
  int run;
};

/// A backward-weight block: its first group and k, its block of tap combinations, its slice.
struct WeightBlock {
  int g0, k0, combo_block, slice;
};

template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE WeightBlock weight_block(const WeightKernelParams<T, NDim>& p, int b) {
  WeightBlock w;
  w.g0 = static_cast<int>(b % p.group_tiles) * p.group_tile;
  b /= p.group_tiles;
  w.k0 = static_cast<int>(b % p.k_tiles) * p.k_tile;
  b /= p.k_tiles;
  w.combo_block = static_cast<int>(b % p.combo_blocks);
  w.slice = static_cast<int>(b / p.combo_blocks);
  return w;
}

/// The role of slot `slot` of lane `lane` in block of combinations `combo_block`; its outer
/// index reaches outer_taps where the block has fewer combinations than slots.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE WeightRole weight_role(const WeightKernelParams<T, NDim>& p, int lane, int slot,
                                                          int combo_block) {
  WeightRole r;
  r.group = lane / (p.k_tile * p.c);
  r.k = (lane / p.c) % p.k_tile;
  r.channel = lane % p.c;
  r.run = slot % p.runs;
  slot /= p.runs;
  r.residue = slot % p.dims[NDim - 1].lattice;
  const int combo = combo_block * p.combos_per_block + slot / p.dims[NDim - 1].lattice;
  r.tap_group = combo % p.tap_groups;
  r.outer = combo / p.tap_groups;
  return r;
}

/// The W taps of a tap group: tap_class + (first + i)·tap_step for i < count.
struct TapGroup {
  int tap_class, first, count;
};

template <int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE TapGroup tap_group_of(const DimWalk& d, int tap_group) {
  TapGroup t;
  t.tap_class = tap_group % d.tap_step;
  t.first = (tap_group / d.tap_step) * kTaps;
  const int taps = t.tap_class < d.filter ? (d.filter - t.tap_class + d.tap_step - 1) / d.tap_step : 0;
  t.count = taps - t.first < kTaps ? taps - t.first : kTaps;
  return t;
}

/// A thread's first dy W position in its tile (then lattice apart), and the x window index of its
/// W window slot 0 (then x_step apart: slot j + i meets dy position j through tap i).
struct WeightWalk {
  int dy_first, x_first, x_step;
};

template <int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE WeightWalk weight_walk(const DimWalk& w, const WeightRole& role,
                                                          const TapGroup& taps) {
  WeightWalk k;
  k.dy_first = role.residue + role.run * kRun * w.lattice;
  // x = stride·o + dilation·tap, with tap_step·dilation = stride·lattice.
  k.x_first = w.stride * k.dy_first + taps.tap_class * w.dilation + taps.first * w.stride * w.lattice;
  k.x_step = w.stride * w.lattice;
  return k;
}

/// The tile `t` of the flattened (n, tiles of each dimension) space: its batch item, and per
/// dimension its first dy position.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int weight_tile(const WeightKernelParams<T, NDim>& p, long long t, int* tile_start) {
  for (int d = NDim - 1; d >= 0; --d) {
    tile_start[d] = static_cast<int>(t % p.dims[d].tiles) * p.dims[d].tile;
    t /= p.dims[d].tiles;
  }
  return static_cast<int>(t);
}

/// Output e of a block's reduction: (lane, combination of the block, tap of its group). Sets its
/// dw coordinates (g, k, c, row-major tap) and its first slot; false where it holds no tap or
/// lies past G, K or the combinations.
struct WeightOutput {
  int lane, g, k, c, tap, first_slot, i;
};

template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool weight_output(const WeightKernelParams<T, NDim>& p, const WeightBlock& b, int e,
                                                      WeightOutput* out) {
  constexpr int W = NDim - 1;
  out->i = e % kTaps;
  const int rest = e / kTaps;
  out->lane = rest % p.lanes;
  const int combo_slot = rest / p.lanes;  // the combination's index in the block
  out->first_slot = combo_slot * p.dims[W].lattice * p.runs;
  const WeightRole who = weight_role(p, out->lane, out->first_slot, b.combo_block);
  const TapGroup tg = tap_group_of<kTaps>(p.dims[W], who.tap_group);
  out->g = b.g0 + who.group;
  out->k = b.k0 + who.k;
  out->c = who.channel;
  out->tap = who.outer * p.dims[W].filter + tg.tap_class + (tg.first + out->i) * p.dims[W].tap_step;
  return who.outer < p.outer_taps && out->i < tg.count && out->g < p.groups && out->k < p.k;
}

/// The sums of one thread over the dy rows of a staged tile.
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void accumulate_weight_tile(const WeightKernelParams<T, NDim>& p,
                                                               const WeightRole& role, const TapGroup& taps,
                                                               const int* outer_taps, const int* tile_start,
                                                               const float* dy_lane, const float* x_lane, float* acc) {
  constexpr int W = NDim - 1;
  const DimWalk& dw = p.dims[W];
  int rows = 1;
  for (int d = 0; d < W; ++d) rows *= p.dims[d].tile;
  const WeightWalk walk = weight_walk<kTaps>(dw, role, taps);
  // The window starts `shift` positions before the tile's first tap (rounded down to align).
  const int shift = tile_start[W] * dw.stride - dw.pad - x_window_origin(dw, tile_start[W]);
  const int dy_first = walk.dy_first, x_first = walk.x_first + shift, x_step = walk.x_step;
  for (int row = 0; row < rows; ++row) {
    int o[NDim];
    if (!outer_row<NDim>(p.dims, tile_start, row, false, o)) continue;
    int x_row_index = 0;
    for (int d = 0; d < W; ++d) {
      const int rel = (o[d] - tile_start[d]) * p.dims[d].stride + outer_taps[d] * p.dims[d].dilation;
      x_row_index = x_row_index * p.dims[d].window + rel;
    }
    // Slots past the thread's taps may read past its row: the x window's tail keeps them
    // inside shared memory, and they are never multiplied.
    const float* dy_row = dy_lane + row * dw.tile + dy_first;
    const float* x_row = x_lane + x_row_index * dw.window + x_first;
    float dy[kRun], x[kRun + kTaps - 1];
    HIPGRAD_UNROLL
    for (int j = 0; j < kRun; ++j) dy[j] = dy_row[j * dw.lattice];
    HIPGRAD_UNROLL
    for (int u = 0; u < kRun + kTaps - 1; ++u) x[u] = x_row[u * x_step];
    HIPGRAD_UNROLL
    for (int i = 0; i < kTaps; ++i) {
      if (i >= taps.count) break;
      HIPGRAD_UNROLL
      for (int j = 0; j < kRun; ++j) acc[i] += dy[j] * x[j + i];
    }
  }
}

/// A backward-weight thread: its role, tap group, outer taps (per outer dimension), and whether
/// it sums anything.
struct WeightThread {
  int lane, slot;
  WeightRole role;
  TapGroup taps;
  int outer_taps[3];
  bool active;
};

template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE WeightThread weight_thread(const WeightKernelParams<T, NDim>& p,
                                                              const WeightBlock& blk, int tid) {
  constexpr int W = NDim - 1;
  WeightThread t;
  t.lane = tid % p.lanes;
  t.slot = tid / p.lanes;
  t.role = weight_role(p, t.lane, t.slot, blk.combo_block);
  t.taps = tap_group_of<kTaps>(p.dims[W], t.role.tap_group);
  for (int d = 0; d < 3; ++d) t.outer_taps[d] = 0;
  for (int d = W - 1, rest = t.role.outer; d >= 0; --d) {
    t.outer_taps[d] = rest % p.dims[d].filter;
    rest /= p.dims[d].filter;
  }
  t.active = t.slot < p.slots && t.role.outer < p.outer_taps && blk.g0 + t.role.group < p.groups &&
             blk.k0 + t.role.k < p.k && t.taps.count > 0;
  return t;
}

/// Stages position tile `tile` of the block: dy's tile, then x's window behind it in `shared`.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE void stage_weight_tile(const WeightKernelParams<T, NDim>& p, const WeightBlock& blk, long long tile,
                                           int tid, float* shared, int* tile_start) {
  const int n = weight_tile(p, tile, tile_start);
  WindowSource<T, NDim> dy_src{}, x_src{};
  dy_src.base = p.dy + n * p.dy_strides.n + blk.g0 * p.dy_strides.g + blk.k0 * p.dy_strides.c;
  dy_src.strides = &p.dy_strides;
  dy_src.valid_groups = p.groups - blk.g0;
  dy_src.valid_channels = p.k - blk.k0;
  x_src.base = p.x + n * p.x_strides.n + blk.g0 * p.x_strides.g;
  x_src.strides = &p.x_strides;
  x_src.valid_groups = p.groups - blk.g0;
  x_src.valid_channels = p.c;
  for (int d = 0; d < NDim; ++d) {
    dy_src.origin[d] = tile_start[d];
    dy_src.length[d] = p.dims[d].tile;
    dy_src.extent[d] = p.dims[d].out;
    x_src.origin[d] = x_window_origin(p.dims[d], tile_start[d]);
    x_src.length[d] = p.dims[d].window;
    x_src.extent[d] = p.dims[d].in;
  }
  fill_window(shared, dy_src, p.dy_box, tid, p.threads);
  fill_window(shared + p.dy_box.lanes * p.dy_box.pitch, x_src, p.x_box, tid, p.threads);
}

/// A thread's sums over a staged tile.
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void accumulate_weight(const WeightKernelParams<T, NDim>& p, const WeightThread& t,
                                                          const int* tile_start, const float* shared, float* acc) {
  const float* dy_lane = shared + (t.role.group * p.k_tile + t.role.k) * p.dy_box.pitch;
  const float* x_lane =
      shared + p.dy_box.lanes * p.dy_box.pitch + (t.role.group * p.c + t.role.channel) * p.x_box.pitch;
  accumulate_weight_tile<T, NDim, kTaps>(p, t.role, t.taps, t.outer_taps, tile_start, dy_lane, x_lane, acc);
}

/// After the block's threads put their sums at scratch[(slot · lanes + lane) · kTaps + i]: output
/// e's partial, the sum of its combination's slots in order, into the slice's partials.
template <typename T, int NDim, int kTaps>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void write_weight_partial(const WeightKernelParams<T, NDim>& p,
                                                             const WeightBlock& blk, int e, const float* scratch) {
  WeightOutput o;
  if (!weight_output<T, NDim, kTaps>(p, blk, e, &o)) return;
  const int summed = p.dims[NDim - 1].lattice * p.runs;  // slots of one combination
  float sum = 0.0f;
  for (int s = 0; s < summed; ++s) sum += scratch[((o.first_slot + s) * p.lanes + o.lane) * kTaps + o.i];
  const long long slice_base = static_cast<long long>(blk.slice) * p.groups * p.k * p.c * p.taps;
  p.partials[slice_base + ((static_cast<long long>(o.g) * p.k + o.k) * p.c + o.c) * p.taps + o.tap] = sum;
}

/// The tiles of a block's slice: [first, end).
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void slice_tiles(const WeightKernelParams<T, NDim>& p, const WeightBlock& blk,
                                                    long long* first, long long* end) {
  *first = static_cast<long long>(blk.slice) * p.tiles_per_slice;
  *end = *first + p.tiles_per_slice < p.position_tiles ? *first + p.tiles_per_slice : p.position_tiles;
}

template <typename T, int NDim, int kTaps>
__global__ void __launch_bounds__(kMaxBlockThreads, kMinBlocks)
    direct_backward_weight_kernel(const WeightKernelParams<T, NDim> p) {
  extern __shared__ float shared[];
  const int tid = static_cast<int>(threadIdx.x);
  const WeightBlock blk = weight_block(p, static_cast<int>(blockIdx.x));
  const WeightThread t = weight_thread<T, NDim, kTaps>(p, blk, tid);
  float acc[kTaps];
  HIPGRAD_UNROLL
  for (int i = 0; i < kTaps; ++i) acc[i] = 0.0f;
  long long first, end;
  slice_tiles(p, blk, &first, &end);
  for (long long tile = first; tile < end; ++tile) {
    int tile_start[NDim];
    stage_weight_tile(p, blk, tile, tid, shared, tile_start);
    __syncthreads();
    if (t.active) accumulate_weight<T, NDim, kTaps>(p, t, tile_start, shared, acc);
    __syncthreads();
  }
  // The block's sums per (lane, tap): its threads' in slot order (residues, then runs).
  if (t.slot < p.slots) {
    HIPGRAD_UNROLL
    for (int i = 0; i < kTaps; ++i) shared[(t.slot * p.lanes + t.lane) * kTaps + i] = acc[i];
  }
  __syncthreads();
  for (int e = tid; e < p.lanes * p.combos_per_block * kTaps; e += p.threads)
    write_weight_partial<T, NDim, kTaps>(p, blk, e, shared);
}

/// dw element e: the slices' partials added in order.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void reduce_weight_element(const WeightReduceParams<T, NDim>& p, long long e,
                                                              long long total) {
  float sum = 0.0f;
  for (int s = 0; s < p.slices; ++s) sum += p.partials[s * total + e];
  long long rest = e;
  std::int64_t offset = 0;
  for (int d = NDim - 1; d >= 0; --d) {
    offset += (rest % p.filter[d]) * p.w_spatial[d];
    rest /= p.filter[d];
  }
  offset += (rest % p.c) * p.w_c;
  rest /= p.c;
  offset += (rest % p.k) * p.w_k + (rest / p.k) * p.w_g;
  p.dw[offset] = type_convert<T>(sum);
}

/// dw = Σ over slices in order of the partials; one thread per dw element.
template <typename T, int NDim>
__global__ void __launch_bounds__(256) direct_weight_reduce_kernel(const WeightReduceParams<T, NDim> p) {
  int taps = 1;
  for (int d = 0; d < NDim; ++d) taps *= p.filter[d];
  const long long total = static_cast<long long>(p.groups) * p.k * p.c * taps;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x)
    reduce_weight_element(p, e, total);
}

}  // namespace hipgrad::conv::direct
