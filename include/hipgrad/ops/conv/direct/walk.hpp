/// @file walk.hpp
/// @brief Host and device: where one dimension's taps meet a position (the phase of a dx
///        position), the windows a tile reads, and a tile's rows over the outer dimensions.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"

namespace hipgrad::conv::direct {

/// ⌊a / b⌋ for b > 0.
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int floor_div_int(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// The taps of one dimension that meet dx position x: first_tap, first_tap + tap_step, ... (taps
/// of them, 0 where none does), the first reaching dy position `base`, the next ones base −
/// lattice, base − 2·lattice, ...
struct Phase {
  int first_tap = 0, taps = 0, base = 0;
};

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE Phase phase_of(const DimWalk& d, int x) {
  Phase phase;
  const int limit = d.tap_step < d.filter ? d.tap_step : d.filter;
  for (int t = 0; t < limit; ++t) {
    const int reach = x + d.pad - t * d.dilation;
    if (reach % d.stride == 0) {  // also for a negative reach: C++ remainders of multiples are 0
      phase.first_tap = t;
      phase.taps = (d.filter - t + d.tap_step - 1) / d.tap_step;
      phase.base = reach / d.stride;
      return phase;
    }
  }
  return phase;
}

/// The first position of a backward-data tile's dy window (of dx positions from `tile_start`):
/// the first it reads, rounded down to d.align.
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int dy_window_origin(const DimWalk& d, int tile_start) {
  return floor_div_int(floor_div_int(tile_start + d.pad - (d.filter - 1) * d.dilation, d.stride), d.align) * d.align;
}

/// The first position of a backward-weight tile's x window (of dy positions from `tile_start`):
/// the first it reads, rounded down to d.align.
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int x_window_origin(const DimWalk& d, int tile_start) {
  return floor_div_int(tile_start * d.stride - d.pad, d.align) * d.align;
}

/// The coordinates (tile_start + offset per dimension) of row `row` of a tile over the outer
/// dimensions 0 … NDim − 2 (the last outer dimension fastest), each below `limit` of its
/// dimension (the tensor's extent); false past the tile or the tensor.
template <int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool outer_row(const DimWalk* dims, const int* tile_start, int row, bool dx_limit,
                                                  int* coords) {
  for (int d = NDim - 2; d >= 0; --d) {
    coords[d] = tile_start[d] + row % dims[d].tile;
    row /= dims[d].tile;
    if (coords[d] >= (dx_limit ? dims[d].in : dims[d].out)) return false;
  }
  return row == 0;
}

/// A backward-data block: its batch item, first group, and per dimension its tile's first dx
/// position and the first dy position of its window.
template <int NDim>
struct DataBlock {
  int n = 0, g0 = 0;
  int tile_start[NDim] = {}, origin[NDim] = {};
};

/// Block → (n, group tile, tile of each dimension), the last dimension fastest.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE DataBlock<NDim> data_block(const DataKernelParams<T, NDim>& p, int block) {
  DataBlock<NDim> b;
  for (int d = NDim - 1; d >= 0; --d) {
    b.tile_start[d] = static_cast<int>(block % p.dims[d].tiles) * p.dims[d].tile;
    block /= p.dims[d].tiles;
    b.origin[d] = dy_window_origin(p.dims[d], b.tile_start[d]);
  }
  b.g0 = static_cast<int>(block % p.group_tiles) * p.group_tile;
  b.n = static_cast<int>(block / p.group_tiles);
  return b;
}

/// A backward-data thread: its lane (group of the tile, channel), its W slot (phase class and
/// run: dx positions x_first + j·phase_step, j < kRun) and its row slot (rows row_slot + r ·
/// row_slots of the tile, r < rows_per_thread).
struct DataThread {
  int lane = 0, group = 0, channel = 0, w_slot = 0, row_slot = 0, x_first = 0;
};

template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE DataThread data_thread(const DataKernelParams<T, NDim>& p, const DataBlock<NDim>& b,
                                                          int tid) {
  DataThread t;
  const DimWalk& w = p.dims[NDim - 1];
  t.lane = tid % p.lanes;
  const int slot = tid / p.lanes;
  t.w_slot = slot % p.w_slots;
  t.row_slot = slot / p.w_slots;
  t.group = t.lane / p.c;
  t.channel = t.lane % p.c;
  t.x_first = b.tile_start[NDim - 1] + t.w_slot % w.phase_step + (t.w_slot / w.phase_step) * kRun * w.phase_step;
  return t;
}

}  // namespace hipgrad::conv::direct
