/// @file plan.hpp
/// @brief Host plans of the direct kernels: the tiles, thread roles, shared memory, grid and (for
///        backward-weight) slices and workspace of a problem on a device, or the reason the
///        direct path cannot run it. Made from the problem and the device alone (no pointer).
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/direct/plan_common.hpp"
#include "hipgrad/ops/conv/direct/vector_plan.hpp"
#include "hipgrad/ops/conv/direct/walk.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::direct {

/// A backward-data block's tiles for `slots` thread slots per lane and `runs` W runs per phase
/// class: its thread roles, tiles and dy windows (no longer than dy reaches); returns the dy
/// window positions staged per dx position of the tile (the halo's cost).
template <typename T, int NDim>
double data_tiles(DataKernelParams<T, NDim>& k, int slots, int runs, int depth) {
  DimWalk& w = k.dims[NDim - 1];
  k.runs = runs;
  k.w_slots = w.phase_step * runs;
  k.row_slots = NDim == 1 ? 1 : slots / k.w_slots;
  k.rows_per_thread = NDim == 1 ? 1 : 2;
  k.threads = k.lanes * k.w_slots * k.row_slots;
  w.tile = w.phase_step * kRun * runs;
  outer_tiles<NDim>(k.dims, k.row_slots * k.rows_per_thread, true, depth);
  double window = 1, tile = 1;
  for (int d = 0; d < NDim; ++d) {
    DimWalk& dd = k.dims[d];
    dd.tiles = static_cast<int>(ceil_div(dd.in, dd.tile));
    // Past dy's end the window would hold zeros only: the kernel reads such slots as zero. With
    // stride 1 the reach is exact; otherwise one more for the first position's rounding.
    const int reach =
        (dd.tile - 1 + (dd.filter - 1) * dd.dilation) / dd.stride + (dd.stride == 1 ? 1 : 2) + dd.align - 1;
    dd.window = std::max(1, std::min(reach, dd.out - dy_window_origin(dd, 0)));
    window *= dd.window;
    tile *= std::min(dd.tile, dd.in);
  }
  return window / tile;
}

/// Sets the shared-memory layout of a backward-data block staging `chunk` dy channels per group
/// (the lead before the window, the window's lanes, the taps' lanes); returns its bytes.
template <typename T, int NDim>
std::size_t data_shared_layout(DataKernelParams<T, NDim>& k, int chunk) {
  int positions = 1;
  for (int d = 0; d < NDim; ++d) positions *= k.dims[d].window;
  k.k_chunk = chunk;
  k.dy_box = window_lanes<NDim>(k.group_tile * chunk, chunk, k.dy_strides, positions);
  k.dy_lead = (kMaxWindowTaps - 1) * k.dims[NDim - 1].lattice;
  k.w_pitch = (chunk * k.taps) | 1;
  return (static_cast<std::size_t>(k.dy_lead) + static_cast<std::size_t>(k.dy_box.lanes) * k.dy_box.pitch +
          static_cast<std::size_t>(k.lanes) * k.w_pitch) *
         sizeof(float);
}

/// A backward-data plan: the vector kernel's where it takes the problem (vectors), else the
/// window kernel's.
template <typename T, int NDim>
struct DataPlan {
  Status status;
  DataKernelParams<T, NDim> params{};
  std::size_t shared_bytes = 0;
  std::int64_t blocks = 0;
  int window_taps = 1;
  bool vectors = false;
  VectorDataPlan<T, NDim> vector{};
};

template <typename T, int NDim>
DataPlan<T, NDim> make_data_plan(const Problem<NDim>& problem, Kernels kernels = kOpKernels) {
  DataPlan<T, NDim> plan;
  const ConvParams<NDim>& cp = problem.params;
  const std::string no = "algorithm direct cannot run: ";
  plan.status = check_direct_extents(cp);
  if (!plan.status.is_ok()) return plan;
  const LaneLayout layout = vector_lane_layout(cp, problem.output_strides, problem.input_strides, kernels);
  if (layout != LaneLayout::kNone) {
    plan.vector = make_vector_data_plan<T, NDim>(problem, layout);
    plan.vectors = plan.vector.status.is_ok();
    if (plan.vectors) return plan;
  }
  DataKernelParams<T, NDim>& k = plan.params;
  set_sizes(k, cp);
  k.dy_strides = tensor_strides<NDim>(problem.output_strides);
  k.dx_strides = tensor_strides<NDim>(problem.input_strides);
  k.w_g = problem.weight_strides[0], k.w_k = problem.weight_strides[1], k.w_c = problem.weight_strides[2];
  for (int d = 0; d < NDim; ++d) k.w_spatial[d] = problem.weight_strides[3 + d];
  // A dy window filled W fastest may start at a multiple of the fill's vector, so that its rows
  // load as aligned vectors (the search below weighs the longer window).
  const bool w_fastest = !window_lanes<NDim>(1, 1, k.dy_strides, 1).lanes_fastest;
  if (k.c > kMaxBlockThreads) {
    plan.status = Status::not_supported(no + "more than " + std::to_string(kMaxBlockThreads) + " channels per group");
    return plan;
  }
  k.group_tile = balanced_tile(cp.G, std::max(1, 32 / k.c));
  k.group_tiles = static_cast<int>(ceil_div(cp.G, static_cast<Index>(k.group_tile)));
  k.lanes = k.group_tile * k.c;
  const int slots = kMaxBlockThreads / k.lanes;
  DimWalk& w = k.dims[NDim - 1];
  if (w.phase_step > slots) {
    plan.status = Status::not_supported(no + "stride × dilation / gcd along W (" + std::to_string(w.phase_step) +
                                        ") exceeds the " + std::to_string(slots) + " threads a channel has");
    return plan;
  }
  // The W runs (and, where no block of `slots` fits, fewer slots) whose dy window reads the
  // fewest positions per dx position, then the most dy channels a stage that fit beside their taps.
  const int runs_needed = static_cast<int>(ceil_div(ceil_div(w.in, w.phase_step), kRun));
  double best = 0;
  for (int block_slots = slots; block_slots >= w.phase_step && plan.shared_bytes == 0; block_slots /= 2) {
    const int most = std::max(1, std::min(block_slots / w.phase_step, runs_needed));
    for (int runs = most; runs >= 1; --runs) {
      for (int depth = 1; depth <= (NDim == 3 ? block_slots : 1); depth *= 2) {
        for (int align : {w_fastest ? kVector16<T> : 1, 1}) {
          DataKernelParams<T, NDim> c = k;
          c.dims[NDim - 1].align = align;
          const double reads = data_tiles(c, block_slots, runs, depth);
          const std::size_t bytes = data_shared_layout(c, 1);
          // Aligned windows load as vectors: worth a quarter more positions.
          const double cost = align > 1 ? reads * 0.8 : reads;
          if (bytes > kSharedBudget || (plan.shared_bytes != 0 && cost >= best)) continue;
          k = c, best = cost, plan.shared_bytes = bytes;
        }
      }
    }
  }
  if (plan.shared_bytes == 0) {
    plan.status = Status::not_supported(no + "one dy channel's window and taps exceed " +
                                        std::to_string(kSharedBudget / 1024) + " KB of shared memory");
    return plan;
  }
  for (int chunk = k.k; chunk >= 1; chunk = chunk > 1 ? std::min(chunk - 1, (chunk + 1) / 2) : 0) {
    plan.shared_bytes = data_shared_layout(k, chunk);
    if (plan.shared_bytes <= kSharedBudget) break;
  }
  std::int64_t blocks = cp.N * k.group_tiles;
  for (int d = 0; d < NDim; ++d) blocks *= k.dims[d].tiles;
  if (blocks > INT_MAX) {
    plan.status = Status::not_supported(no + "more than 2^31 - 1 blocks");
    return plan;
  }
  plan.blocks = blocks;
  plan.window_taps = window_taps_for(static_cast<int>(ceil_div(w.filter, w.tap_step)));
  return plan;
}

template <typename T, int NDim>
struct WeightPlan {
  Status status;
  WeightKernelParams<T, NDim> params{};
  WeightReduceParams<T, NDim> reduce{};
  std::size_t shared_bytes = 0;
  std::size_t workspace = 0;  ///< the slices' fp32 partial sums
  std::int64_t blocks = 0;
  int window_taps = 1;
  bool vectors = false;
  VectorWeightPlan<T, NDim> vector{};
  int slices() const { return vectors ? vector.params.slices : params.slices; }
};

/// Sets the shared-memory layout of a weight tile: dy's tile, then x's window with a tail for
/// the window slots of taps past a thread's (read, never multiplied); the block's sums reuse it
/// at the end. Returns its bytes.
template <typename T, int NDim>
std::size_t weight_shared_layout(WeightKernelParams<T, NDim>& k, int window_taps) {
  int tile = 1, window = 1;
  for (int d = 0; d < NDim; ++d) {
    tile *= k.dims[d].tile;
    window *= k.dims[d].window;
  }
  k.dy_box = window_lanes<NDim>(k.group_tile * k.k_tile, k.k_tile, k.dy_strides, tile);
  k.x_box = window_lanes<NDim>(k.group_tile * k.c, k.c, k.x_strides, window);
  const DimWalk& w = k.dims[NDim - 1];
  const std::size_t tail = static_cast<std::size_t>(window_taps) * w.stride * w.lattice;
  const std::size_t staged = static_cast<std::size_t>(k.dy_box.lanes) * k.dy_box.pitch +
                             static_cast<std::size_t>(k.x_box.lanes) * k.x_box.pitch + tail;
  const std::size_t sums = static_cast<std::size_t>(k.slots) * k.lanes * window_taps;
  return std::max(staged, sums) * sizeof(float);
}

template <typename T, int NDim>
void weight_tiles(WeightKernelParams<T, NDim>& k, int outer_rows) {
  outer_tiles<NDim>(k.dims, outer_rows, false);
  k.position_tiles = k.batch;
  for (int d = 0; d < NDim; ++d) {
    DimWalk& dd = k.dims[d];
    dd.tiles = static_cast<int>(ceil_div(dd.out, dd.tile));
    dd.window = (dd.tile - 1) * dd.stride + (dd.filter - 1) * dd.dilation + dd.align;
    k.position_tiles *= dd.tiles;
  }
}

template <typename T, int NDim>
WeightPlan<T, NDim> make_weight_plan(const Problem<NDim>& problem, const DeviceInfo& device,
                                     Kernels kernels = kOpKernels) {
  WeightPlan<T, NDim> plan;
  const ConvParams<NDim>& cp = problem.params;
  const std::string no = "algorithm direct cannot run: ";
  plan.status = check_direct_extents(cp);
  if (!plan.status.is_ok()) return plan;
  const LaneLayout layout = vector_lane_layout(cp, problem.input_strides, problem.output_strides, kernels);
  if (layout != LaneLayout::kNone) {
    plan.vector = make_vector_weight_plan<T, NDim>(problem, device, layout);
    plan.vectors = plan.vector.status.is_ok();
    if (plan.vectors) {
      plan.workspace = plan.vector.workspace;
      return plan;
    }
  }
  WeightKernelParams<T, NDim>& k = plan.params;
  set_sizes(k, cp);
  k.x_strides = tensor_strides<NDim>(problem.input_strides);
  k.dy_strides = tensor_strides<NDim>(problem.output_strides);
  k.outer_taps = k.taps / k.dims[NDim - 1].filter;
  // An x window filled W fastest starts at a multiple of the fill's vector (dy's tiles do: their
  // W tile is a multiple of kRun).
  if (!window_lanes<NDim>(1, 1, k.x_strides, 1).lanes_fastest) k.dims[NDim - 1].align = kVector16<T>;
  DimWalk& w = k.dims[NDim - 1];
  const int class_taps = static_cast<int>(ceil_div(w.filter, w.tap_step));
  plan.window_taps = window_taps_for(class_taps);
  k.tap_groups = w.tap_step * static_cast<int>(ceil_div(class_taps, plan.window_taps));
  k.combos = k.outer_taps * k.tap_groups;
  if (k.c * w.lattice > kMaxBlockThreads) {
    plan.status = Status::not_supported(no + "C times dilation / gcd(stride, dilation) along W exceeds " +
                                        std::to_string(kMaxBlockThreads) + " threads");
    return plan;
  }
  // Up to 32 lanes, as many as let one block hold every tap combination; C lanes where not even
  // those do, the combinations then spread over several blocks.
  const int fit = kMaxBlockThreads / (k.combos * w.lattice);
  const int lane_target = fit >= k.c ? std::min(32, fit) : k.c;
  k.k_tile = balanced_tile(cp.K, std::max(1, lane_target / k.c));
  k.k_tiles = static_cast<int>(ceil_div(cp.K, static_cast<Index>(k.k_tile)));
  k.group_tile = balanced_tile(cp.G, std::max(1, lane_target / (k.k_tile * k.c)));
  k.group_tiles = static_cast<int>(ceil_div(cp.G, static_cast<Index>(k.group_tile)));
  k.lanes = k.group_tile * k.k_tile * k.c;
  k.combos_per_block = balanced_tile(k.combos, std::max(1, kMaxBlockThreads / (k.lanes * w.lattice)));
  k.combo_blocks = static_cast<int>(ceil_div(k.combos, k.combos_per_block));
  const int runs_needed = static_cast<int>(ceil_div(ceil_div(w.out, w.lattice), kRun));
  k.runs = std::max(1, std::min(kMaxBlockThreads / (k.lanes * k.combos_per_block * w.lattice), runs_needed));
  k.slots = k.combos_per_block * w.lattice * k.runs;
  k.threads = k.lanes * k.slots;
  w.tile = w.lattice * kRun * k.runs;
  // Outer tiles of 8 rows, fewer where shared memory runs short.
  for (int rows = NDim == 1 ? 1 : 8;; rows /= 2) {
    weight_tiles(k, rows);
    plan.shared_bytes = weight_shared_layout(k, plan.window_taps);
    if (plan.shared_bytes <= kSharedBudget) break;
    if (rows == 1) {
      plan.status = Status::not_supported(no + "a tile's dy and x windows exceed " +
                                          std::to_string(kSharedBudget / 1024) + " KB of shared memory");
      return plan;
    }
  }
  const std::int64_t block_tiles = static_cast<std::int64_t>(k.group_tiles) * k.k_tiles * k.combo_blocks;
  const std::int64_t sums_per_slice = cp.G * cp.K * cp.C * k.taps;
  plan.status = choose_slices<T>(problem, device, k.position_tiles, block_tiles, k.threads, plan.shared_bytes,
                                 sums_per_slice, &k.tiles_per_slice, &k.slices);
  if (!plan.status.is_ok()) return plan;
  plan.blocks = k.slices * block_tiles;
  plan.workspace = static_cast<std::size_t>(k.slices) * static_cast<std::size_t>(sums_per_slice) * sizeof(float);
  plan.reduce = weight_reduce_params<T>(problem, k.slices);
  return plan;
}

/// e.g. "taps3_lanes32_w2x4_rows4x2": the W window's taps, the dx lanes of a block, its W
/// slots (phase classes × runs) × rows of threads, and the rows a thread owns.
template <typename T, int NDim>
std::string data_plan_name(const DataPlan<T, NDim>& plan) {
  if (plan.vectors) return vector_data_plan_name(plan.vector);
  const DataKernelParams<T, NDim>& k = plan.params;
  return "taps" + std::to_string(plan.window_taps) + "_lanes" + std::to_string(k.lanes) + "_w" +
         std::to_string(k.w_slots) + "x" + std::to_string(kRun) + "_rows" + std::to_string(k.row_slots) + "x" +
         std::to_string(k.rows_per_thread);
}

/// e.g. "taps3_lanes32_slots6_slices120": the W window's taps, the (group, k, c) lanes of a
/// block, its thread slots per lane, and the slices the reduction adds.
template <typename T, int NDim>
std::string weight_plan_name(const WeightPlan<T, NDim>& plan) {
  if (plan.vectors) return vector_weight_plan_name(plan.vector);
  const WeightKernelParams<T, NDim>& k = plan.params;
  return "taps" + std::to_string(plan.window_taps) + "_lanes" + std::to_string(k.lanes) + "_slots" +
         std::to_string(k.slots) + "_slices" + std::to_string(k.slices);
}

/// The plans as the ops make them (detail::DirectPath): with the ops' kernels (kOpKernels).
template <typename T, int NDim>
struct MakeDataPlan {
  DataPlan<T, NDim> operator()(const Problem<NDim>& problem, const DeviceInfo&) const {
    return make_data_plan<T, NDim>(problem);
  }
};

template <typename T, int NDim>
struct MakeWeightPlan {
  WeightPlan<T, NDim> operator()(const Problem<NDim>& problem, const DeviceInfo& device) const {
    return make_weight_plan<T, NDim>(problem, device);
  }
};

}  // namespace hipgrad::conv::direct
