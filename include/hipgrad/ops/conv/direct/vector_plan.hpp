/// @file vector_plan.hpp
/// @brief Host plans of the vector kernels (vector_data_kernel.hpp, vector_weight_kernel.hpp):
///        depthwise problems whose groups lie adjacent in memory, where a thread's kLaneVector
///        groups are one access and no operand passes through shared memory.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"
#include "hipgrad/ops/conv/direct/plan_common.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::direct {

/// Lane vectors a vector block takes at most: 128 groups, a warp's loads of one position
/// 256 (16-bit) or 512 (fp32) adjacent bytes.
inline constexpr int kBlockVectors = 32;

/// Which direct kernels a plan may take: the window kernels alone; the vector kernels where the
/// groups are adjacent (channels-last); or those and the vector kernels over W runs where W is
/// contiguous (NCHW).
enum class Kernels { kWindow, kVectorsWhereTheyApply, kVectorsAndWRuns };

/// The kernels the ops' plans take: every vector layout, faster than the window kernels where they
/// apply (bench/log/conv_direct.md); bench_conv --direct=window|vectors times the others beside.
inline constexpr Kernels kOpKernels = Kernels::kVectorsAndWRuns;

/// How a vector plan lays its threads: kAdjacentGroups, a block's fastest index walks lane
/// vectors of adjacent groups (one aligned access each); kWRuns, it walks W runs of one lane
/// vector, so that a warp reads consecutive W positions where W is the contiguous dimension and
/// the lanes (groups) are far apart.
enum class LaneLayout { kNone, kAdjacentGroups, kWRuns };

/// Which layout the vector kernels take a problem with: depthwise without multiplier (C = K = 1),
/// the groups adjacent in both tensors the op reads or writes (`a`, `b`: their strides) with at
/// least one whole lane vector of them, or, where `kernels` allows, W contiguous in both.
template <int NDim>
LaneLayout vector_lane_layout(const ConvParams<NDim>& cp, const std::vector<Index>& a, const std::vector<Index>& b,
                              Kernels kernels) {
  if (kernels == Kernels::kWindow || cp.C != 1 || cp.K != 1) return LaneLayout::kNone;
  if (cp.G >= kLaneVector && a[0] == 1 && b[0] == 1) return LaneLayout::kAdjacentGroups;
  const std::size_t w = 2 + NDim;
  if (kernels == Kernels::kVectorsAndWRuns && a[w] == 1 && b[w] == 1) return LaneLayout::kWRuns;
  return LaneLayout::kNone;
}

/// The lane vectors of a block: up to kBlockVectors where the groups are adjacent, one where the
/// block's threads walk W runs.
inline int block_lane_vectors(LaneLayout layout, std::int64_t lane_vectors, std::int64_t most) {
  return layout == LaneLayout::kWRuns ? 1 : static_cast<int>(balanced_tile(lane_vectors, most));
}

/// The vector kernels' compiled W window taps: the smallest of 1, 3, 5, 7 that holds `taps` (more
/// run in chunks of 7).
inline int vector_taps_for(int taps) {
  for (int t : {1, 3, 5}) {
    if (taps <= t) return t;
  }
  return kMaxWindowTaps;
}

/// Whether the vector kernels take a problem: depthwise without multiplier (C = K = 1), at least
/// one whole lane vector of groups, the groups adjacent in both tensors the op reads or writes.
template <int NDim>
bool vector_kernels_take(const ConvParams<NDim>& cp, const std::vector<Index>& a_strides,
                         const std::vector<Index>& b_strides) {
  return cp.C == 1 && cp.K == 1 && cp.G >= kLaneVector && a_strides[0] == 1 && b_strides[0] == 1;
}

/// The sizes both vector kernels hold: G, N, each dimension's walk, the filter's taps.
template <typename Params, int NDim>
void set_vector_sizes(Params& k, const ConvParams<NDim>& cp) {
  k.groups = static_cast<int>(cp.G), k.batch = static_cast<int>(cp.N);
  k.taps = 1;
  for (int d = 0; d < NDim; ++d) {
    k.dims[d] = dim_walk(cp, d);
    k.taps *= k.dims[d].filter;
  }
}

/// The mixed radix of a vector kernel's run index: W runs, then the outer dimensions' `in` (dx) or
/// `out` (dy) lengths; false where the runs do not fit the 32-bit index the kernels divide.
template <typename Params, int NDim>
bool set_run_digits(Params& k, bool of_dx) {
  if (k.runs > INT_MAX) return false;
  k.run_digits[NDim - 1] = FastDivmod(static_cast<std::uint32_t>(k.w_runs));
  for (int d = 0; d < NDim - 1; ++d)
    k.run_digits[d] = FastDivmod(static_cast<std::uint32_t>(of_dx ? k.dims[d].in : k.dims[d].out));
  return true;
}

/// N · Π of the outer dimensions' `in` (dx) or `out` (dy) lengths: a vector kernel's rows.
template <int NDim>
std::int64_t vector_rows(const DimWalk* dims, int batch, bool of_dx) {
  std::int64_t rows = batch;
  for (int d = 0; d < NDim - 1; ++d) rows *= of_dx ? dims[d].in : dims[d].out;
  return rows;
}

template <typename T, int NDim>
struct VectorDataPlan {
  Status status;
  VectorDataParams<T, NDim> params{};
  std::size_t shared_bytes = 0;  ///< the block's taps
  std::int64_t grid_x = 1;
  int grid_y = 1;
  int window_taps = 1;
  LaneLayout layout = LaneLayout::kAdjacentGroups;
};

template <typename T, int NDim>
VectorDataPlan<T, NDim> make_vector_data_plan(const Problem<NDim>& problem, LaneLayout layout) {
  VectorDataPlan<T, NDim> plan;
  plan.layout = layout;
  const std::string no = "algorithm direct cannot run: ";
  VectorDataParams<T, NDim>& k = plan.params;
  set_vector_sizes(k, problem.params);
  k.dy_strides = tensor_strides<NDim>(problem.output_strides);
  k.dx_strides = tensor_strides<NDim>(problem.input_strides);
  k.w_g = problem.weight_strides[0];
  for (int d = 0; d < NDim; ++d) k.w_spatial[d] = problem.weight_strides[3 + d];
  const std::int64_t lane_vectors = ceil_div<std::int64_t>(k.groups, kLaneVector);
  const std::int64_t fit = static_cast<std::int64_t>(kSharedBudget / (static_cast<std::size_t>(k.taps) * 16));
  if (fit < 1) {
    plan.status = Status::not_supported(no + "the taps of one lane vector exceed the shared memory");
    return plan;
  }
  k.block_vectors = block_lane_vectors(layout, lane_vectors, std::min<std::int64_t>(kBlockVectors, fit));
  k.slots = kMaxBlockThreads / k.block_vectors;
  k.threads = k.block_vectors * k.slots;
  const DimWalk& w = k.dims[NDim - 1];
  k.w_runs = w.phase_step * static_cast<int>(ceil_div(ceil_div(w.in, w.phase_step), kRun));
  k.runs = vector_rows<NDim>(k.dims, k.batch, true) * k.w_runs;
  if (!set_run_digits<VectorDataParams<T, NDim>, NDim>(k, true)) {
    plan.status = Status::not_supported(no + "more W runs than a 32-bit index holds");
    return plan;
  }
  plan.grid_x = ceil_div<std::int64_t>(k.runs, k.slots);
  const std::int64_t grid_y = ceil_div<std::int64_t>(lane_vectors, k.block_vectors);
  if (plan.grid_x > INT_MAX || grid_y > 65535) {
    plan.status = Status::not_supported(no + "more blocks than a grid holds");
    return plan;
  }
  plan.grid_y = static_cast<int>(grid_y);
  plan.shared_bytes = static_cast<std::size_t>(k.taps) * k.block_vectors * kLaneVector * sizeof(float);
  plan.window_taps = vector_taps_for(static_cast<int>(ceil_div(w.filter, w.tap_step)));
  return plan;
}

template <typename T, int NDim>
struct VectorWeightPlan {
  Status status;
  VectorWeightParams<T, NDim> params{};
  WeightReduceParams<T, NDim> reduce{};
  std::size_t shared_bytes = 0;  ///< the block's sums
  std::size_t workspace = 0;     ///< the slices' fp32 partial sums
  int grid_x = 1, grid_y = 1;
  int window_taps = 1;
  LaneLayout layout = LaneLayout::kAdjacentGroups;
};

template <typename T, int NDim>
VectorWeightPlan<T, NDim> make_vector_weight_plan(const Problem<NDim>& problem, const DeviceInfo& device,
                                                  LaneLayout layout) {
  VectorWeightPlan<T, NDim> plan;
  plan.layout = layout;
  const std::string no = "algorithm direct cannot run: ";
  VectorWeightParams<T, NDim>& k = plan.params;
  set_vector_sizes(k, problem.params);
  k.x_strides = tensor_strides<NDim>(problem.input_strides);
  k.dy_strides = tensor_strides<NDim>(problem.output_strides);
  const DimWalk& w = k.dims[NDim - 1];
  const int class_taps = static_cast<int>(ceil_div(w.filter, w.tap_step));
  plan.window_taps = vector_taps_for(class_taps);
  k.outer_taps = k.taps / w.filter;
  k.tap_groups = w.tap_step * static_cast<int>(ceil_div(class_taps, plan.window_taps));
  k.combos = k.outer_taps * k.tap_groups;
  // A block: its lane vectors, then as many combinations as leave two slots each, then slots.
  const std::int64_t lane_vectors = ceil_div<std::int64_t>(k.groups, kLaneVector);
  k.block_vectors = block_lane_vectors(layout, lane_vectors, kBlockVectors);
  k.combos_per_block = balanced_tile(k.combos, std::max(1, kMaxBlockThreads / (2 * k.block_vectors)));
  k.combo_blocks = static_cast<int>(ceil_div(k.combos, k.combos_per_block));
  k.slots = std::max(1, kMaxBlockThreads / (k.block_vectors * k.combos_per_block));
  k.threads = k.block_vectors * k.combos_per_block * k.slots;
  k.w_runs = w.lattice * static_cast<int>(ceil_div(ceil_div(w.out, w.lattice), kRun));
  k.runs = vector_rows<NDim>(k.dims, k.batch, false) * k.w_runs;
  if (!set_run_digits<VectorWeightParams<T, NDim>, NDim>(k, false)) {
    plan.status = Status::not_supported(no + "more W runs than a 32-bit index holds");
    return plan;
  }
  plan.shared_bytes = static_cast<std::size_t>(k.threads) * plan.window_taps * kLaneVector * sizeof(float);
  const std::int64_t block_tiles = ceil_div<std::int64_t>(lane_vectors, k.block_vectors) * k.combo_blocks;
  if (block_tiles > 65535) {
    plan.status = Status::not_supported(no + "more blocks than a grid holds");
    return plan;
  }
  const std::int64_t sums_per_slice = static_cast<std::int64_t>(k.groups) * k.taps;
  plan.status = choose_slices<T>(problem, device, k.runs, block_tiles, k.threads, plan.shared_bytes, sums_per_slice,
                                 &k.runs_per_slice, &k.slices);
  if (!plan.status.is_ok()) return plan;
  plan.grid_x = k.slices;
  plan.grid_y = static_cast<int>(block_tiles);
  plan.workspace = static_cast<std::size_t>(k.slices) * static_cast<std::size_t>(sums_per_slice) * sizeof(float);
  plan.reduce = weight_reduce_params<T>(problem, k.slices);
  return plan;
}

/// e.g. "vector_taps3_groups128_slots8": the W window's taps, the groups of a block, its W runs.
template <typename T, int NDim>
std::string vector_data_plan_name(const VectorDataPlan<T, NDim>& plan) {
  return "vector_taps" + std::to_string(plan.window_taps) + "_groups" +
         std::to_string(plan.params.block_vectors * kLaneVector) + "_slots" + std::to_string(plan.params.slots) +
         (plan.layout == LaneLayout::kWRuns ? "_wruns" : "");
}

/// e.g. "vector_taps3_groups128_combos3x2_slices120": the W window's taps, the groups of a block,
/// its tap combinations × run slots, and the slices the reduction adds.
template <typename T, int NDim>
std::string vector_weight_plan_name(const VectorWeightPlan<T, NDim>& plan) {
  const VectorWeightParams<T, NDim>& k = plan.params;
  return "vector_taps" + std::to_string(plan.window_taps) + "_groups" + std::to_string(k.block_vectors * kLaneVector) +
         "_combos" + std::to_string(k.combos_per_block) + "x" + std::to_string(k.slots) + "_slices" +
         std::to_string(k.slices) + (plan.layout == LaneLayout::kWRuns ? "_wruns" : "");
}

}  // namespace hipgrad::conv::direct
