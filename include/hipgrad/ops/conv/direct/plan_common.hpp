/// @file plan_common.hpp
/// @brief Host: what the direct kernels' plans share (plan.hpp, vector_plan.hpp): limits, each
///        dimension's walk, strides, tiles, and backward-weight's slices and reduction.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::direct {

/// Shared memory a direct block takes at most: below every target's default limit (no opt-in)
/// and AMD's 64 KB of LDS.
inline constexpr std::size_t kSharedBudget = 48 * 1024;

/// The most slices (problem.split_k) backward-weight takes, as its GEMM paths.
inline constexpr int kMaxSlices = 1024;

/// The W window's compiled tap counts: the smallest of 1, 2, 3, 4, 5, 7 that holds `taps`
/// (more run in chunks of 7).
inline int window_taps_for(int taps) {
  for (int t : {1, 2, 3, 4, 5}) {
    if (taps <= t) return t;
  }
  return kMaxWindowTaps;
}

template <int NDim>
DimWalk dim_walk(const ConvParams<NDim>& p, int d) {
  DimWalk w;
  w.in = static_cast<int>(p.input[d]);
  w.out = static_cast<int>(p.output_spatial()[d]);
  w.filter = static_cast<int>(p.filter[d]);
  w.stride = static_cast<int>(p.strides[d]);
  w.dilation = static_cast<int>(p.dilations[d]);
  w.pad = static_cast<int>(p.left_pads[d]);
  const int g = std::gcd(w.stride, w.dilation);
  w.tap_step = w.stride / g;
  w.lattice = w.dilation / g;
  w.phase_step = w.stride * w.lattice;
  return w;
}

/// not_supported where a length the kernels hold in 32-bit integers does not fit.
template <int NDim>
Status check_direct_extents(const ConvParams<NDim>& p) {
  constexpr std::int64_t kLimit = INT_MAX / 4;
  const std::string no = "algorithm direct cannot run: ";
  if (p.G > kLimit || p.N > kLimit || p.K > kLimit || p.C > kLimit)
    return Status::not_supported(no + "G, N, K or C past 2^29");
  for (int d = 0; d < NDim; ++d) {
    const std::int64_t reach = p.dilations[d] * (p.filter[d] - 1) + 1;
    if (p.input[d] > kLimit || reach > kLimit || p.strides[d] > kLimit || p.left_pads[d] > kLimit ||
        p.right_pads[d] > kLimit)
      return Status::not_supported(no + "a spatial length, stride, reach or pad past 2^29");
  }
  return Status::ok();
}

/// The fill order and lane pitch of a window of `lanes` lanes and `positions` positions over a
/// tensor of these strides: W fastest where W is contiguous and the channels are not (NCHW),
/// lanes fastest otherwise; lanes an odd number of floats apart.
template <int NDim>
WindowLanes window_lanes(int lanes, int per_group, const TensorStrides<NDim>& s, int positions) {
  WindowLanes box;
  box.lanes = lanes;
  box.per_group = per_group;
  box.lanes_fastest = !(s.c != 1 && s.spatial[NDim - 1] == 1);
  box.pitch = positions | 1;
  return box;
}

template <int NDim>
TensorStrides<NDim> tensor_strides(const std::vector<Index>& s) {
  TensorStrides<NDim> t;
  t.g = s[0], t.n = s[1], t.c = s[2];
  for (int d = 0; d < NDim; ++d) t.spatial[d] = s[3 + d];
  return t;
}

/// The sizes both kernels' parameters hold: G, N, K, C, each dimension's walk, the filter's taps.
template <typename Params, int NDim>
void set_sizes(Params& k, const ConvParams<NDim>& cp) {
  k.groups = static_cast<int>(cp.G), k.batch = static_cast<int>(cp.N);
  k.k = static_cast<int>(cp.K), k.c = static_cast<int>(cp.C);
  k.taps = 1;
  for (int d = 0; d < NDim; ++d) {
    k.dims[d] = dim_walk(cp, d);
    k.taps *= k.dims[d].filter;
  }
}

/// `count` items in tiles of at most `most`, as even as the tile count allows.
inline int balanced_tile(std::int64_t count, std::int64_t most) {
  const std::int64_t tiles = ceil_div(count, most);
  return static_cast<int>(ceil_div(count, tiles));
}

/// The outer dimensions' tiles: `rows` rows over dimensions 0 … NDim − 2, `depth` of them (a
/// power of two, 3-D only) along dimension 0 and the rest along the innermost first.
template <int NDim>
void outer_tiles(DimWalk* dims, int rows, bool of_dx, int depth = 1) {
  for (int d = NDim - 2; d >= 0; --d) {
    const int extent = of_dx ? dims[d].in : dims[d].out;
    const int along_depth = depth < rows ? depth : rows;  // the tile holds at most `rows` rows
    const int share = d == 0 && NDim == 3 ? along_depth : (d == NDim - 2 && NDim == 3 ? rows / along_depth : rows);
    dims[d].tile = std::max(1, std::min(extent, share));
    rows = std::max(1, rows / dims[d].tile);
  }
}
/// A backward-weight plan's slices: `units` position units (tiles or runs) in slices of
/// *per_slice; enough blocks (block_tiles per slice, `threads` and `shared_bytes` each) to fill the
/// device twice over, while the partial sums (sums_per_slice floats each) stay below a quarter of
/// the bytes the op reads, so that the reduction never dominates; the caller's split_k where set.
template <typename T, int NDim>
Status choose_slices(const Problem<NDim>& problem, const DeviceInfo& device, std::int64_t units,
                     std::int64_t block_tiles, int threads, std::size_t shared_bytes, std::int64_t sums_per_slice,
                     std::int64_t* per_slice, int* slices_out) {
  const ConvParams<NDim>& cp = problem.params;
  const std::string no = "algorithm direct cannot run: ";
  const int resident = std::max<int>(
      1, std::min<int>(2048 / threads,
                       static_cast<int>(device.known && device.shared_per_multiprocessor > 0
                                            ? device.shared_per_multiprocessor / std::max<std::size_t>(shared_bytes, 1)
                                            : 8)));
  const std::int64_t target = 2LL * (device.known ? device.multiprocessors : 1) * resident;
  std::int64_t slices = std::max<std::int64_t>(1, std::min<std::int64_t>(ceil_div(target, block_tiles), units));
  const double read_bytes =
      static_cast<double>(sizeof(T)) *
      (static_cast<double>(Problem<NDim>::element_space(cp.input_lengths(), problem.input_strides)) +
       static_cast<double>(Problem<NDim>::element_space(cp.output_lengths(), problem.output_strides)));
  const std::int64_t cap = static_cast<std::int64_t>(read_bytes / 4 / (4.0 * static_cast<double>(sums_per_slice)));
  slices = std::max<std::int64_t>(1, std::min(slices, cap));
  *per_slice = ceil_div(units, slices);
  slices = ceil_div(units, *per_slice);
  if (problem.split_k > kMaxSlices)
    return Status::not_supported(no + "split_k " + std::to_string(problem.split_k) + " is more than " +
                                 std::to_string(kMaxSlices));
  if (problem.split_k > 0) {  // the caller's slices, some of them empty where they outnumber the units
    slices = problem.split_k;
    *per_slice = ceil_div(units, slices);
  }
  if (slices * block_tiles > INT_MAX || slices > INT_MAX)
    return Status::not_supported(no + "more than 2^31 - 1 blocks");
  *slices_out = static_cast<int>(slices);
  return Status::ok();
}

/// The reduction of `slices` slices of partials into dw.
template <typename T, int NDim>
WeightReduceParams<T, NDim> weight_reduce_params(const Problem<NDim>& problem, int slices) {
  WeightReduceParams<T, NDim> r;
  r.slices = slices;
  r.groups = static_cast<int>(problem.params.G), r.k = static_cast<int>(problem.params.K);
  r.c = static_cast<int>(problem.params.C);
  r.w_g = problem.weight_strides[0], r.w_k = problem.weight_strides[1], r.w_c = problem.weight_strides[2];
  for (int d = 0; d < NDim; ++d) {
    r.filter[d] = static_cast<int>(problem.params.filter[d]);
    r.w_spatial[d] = problem.weight_strides[3 + d];
  }
  return r;
}

}  // namespace hipgrad::conv::direct
