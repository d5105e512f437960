/// @file plan.hpp
/// @brief Host: backward-weight's plan — the route a call takes (direct kernels, packed groups,
///        unfolded windows, TMA boxes, the grouped gather GEMM), its splits, its workspace and its status, made once
///        per problem, pointer alignment and device on the calling thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/backward_weight/box_path.hpp"
#include "hipgrad/ops/conv/backward_weight/sub_problems.hpp"
#include "hipgrad/ops/conv/common/direct_path.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/packed_groups.hpp"
#include "hipgrad/ops/conv/common/plan_key.hpp"
#include "hipgrad/ops/conv/common/staged.hpp"
#include "hipgrad/ops/conv/common/unfold.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"
#include "hipgrad/gemm/device/launcher.hpp"

namespace hipgrad::conv::detail {

/// The path a backward-weight call takes.
enum class WeightRoute { kDirect, kPacked, kUnfolded, kBoxes, kStaged, kGathered };

/// A backward-weight call's plan.
template <typename DirectPlan, typename BoxGeometry>
struct WeightPlan {
  Status status;  ///< can_implement's answer, past the checks of the call's own pointers
  WeightRoute route = WeightRoute::kGathered;
  int packed_groups = 1;      ///< kPacked: groups packed into one
  bool vectors = false;       ///< kGathered: operand vectors along contiguous channels
  int splits = 1;             ///< the GEMM's splits along the output positions (kDirect: slices)
  std::size_t workspace = 0;  ///< workspace_size(problem): what any pointers need
  DirectPlan direct{};
  BoxGeometry boxes{};            ///< kBoxes
  gemm::TileGemmPlan unfolded{};  ///< kUnfolded: dw's columns = dyᵀ · x's columns
};

/// Backward-weight's planner (Cfg: the matrix paths' tiles): every decision of a call is made
/// here, once per problem, pointers' alignment and device.
template <typename T, int NDim, typename Cfg>
struct WeightPlanner {
  using Problem = conv::Problem<NDim>;
  using Direct = DirectPath<T, NDim, direct::MakeWeightPlan<T, NDim>>;
  using Boxes = WeightBoxPath<T, NDim, Cfg>;
  using Plan = WeightPlan<typename Direct::Plan, typename Boxes::Geometry>;
  template <bool kVectors>
  using GatherLauncher =
      gemm::GroupedGemmLauncher<Cfg, DyRows<T, NDim, kVectors>, XPatches<T, NDim, kVectors>, DwStore<T, NDim>>;
  /// At most this many splits: splits past the positions are empty sub-problems, and each adds
  /// its fp32 sums to the workspace.
  static constexpr int kMaxSplits = 1024;

  /// The plan of (problem, x, dy) on the current device, made once per problem, alignment of
  /// the pointers and device on this thread. The pointers' own checks are the caller's.
  static Plan find(const Problem& problem, const T* x, const T* dy, const T* dw) {
    thread_local RecentPlans<ConvPlanKey, Plan> recent;
    return recent.find_or_make(conv_call_key(problem, x, dy, dw), [&] { return make(problem, x, dy, dw); });
  }

  static Plan make(const Problem& problem, const T* x, const T* dy, const T* dw) {
    Plan plan;
    plan.workspace = workspace_size(problem);
    bool direct = false;
    plan.status = Direct::choose(problem, weight_channels_contiguous(problem), &direct, &plan.direct);
    bool unfold = false;
    const auto unfold_gemm = [&] { return unfolded_plan(problem, dy); };
    // Stems the direct kernels would take, kAuto unfolds where that runs.
    if (plan.status.is_ok() && direct && unfolds_before_direct<T>(problem) &&
        choose_unfold<T>(problem, unfold_gemm, &plan.unfolded, &unfold).is_ok() && unfold)
      return plan.route = WeightRoute::kUnfolded, plan.splits = unfolded_splits(problem), plan;
    if (!plan.status.is_ok() || (!direct && !(plan.status = check_index_space(problem)).is_ok())) return plan;
    // Groups of whole vectors in NCHW: staged, they pack onto the tensor cores.
    bool staged = false;
    if (direct && stages_before_direct<T>(problem) &&
        staged_choice(problem, x, dy, dw, weight_channels_contiguous(problem), &staged, true).is_ok() && staged)
      return plan.route = WeightRoute::kStaged, plan;
    // Packing groups goes before the direct kernels kAuto would take.
    if ((plan.packed_groups = packed_groups(problem, x, dy)) > 1) return plan.route = WeightRoute::kPacked, plan;
    if (direct) return plan.route = WeightRoute::kDirect, plan.splits = plan.direct.slices(), plan;
    if (!(plan.status = choose_unfold<T>(problem, unfold_gemm, &plan.unfolded, &unfold)).is_ok()) return plan;
    if (unfold) return plan.route = WeightRoute::kUnfolded, plan.splits = unfolded_splits(problem), plan;
    plan.boxes = Boxes::geometry(problem);
    bool boxes = false;
    if (!(plan.status = Boxes::choose(problem, x, dy, plan.boxes, &boxes)).is_ok()) return plan;
    if (boxes) return plan.route = WeightRoute::kBoxes, plan.splits = plan.boxes.splits, plan;
    plan.vectors = weight_channels_contiguous(problem);
    if (!(plan.status = staged_choice(problem, x, dy, dw, plan.vectors, &staged)).is_ok()) return plan;
    if (staged) return plan.route = WeightRoute::kStaged, plan;
    plan.splits = plan.vectors ? splits_for<true>(problem) : splits_for<false>(problem);
    with_gather_launcher(plan, [&](auto vectors, auto launcher) {
      using Launcher = decltype(launcher);
      const auto problems = backward_weight_sub_problems<T, NDim, decltype(vectors)::value>(
          problem, x, dy, const_cast<T*>(dw), plan.splits, nullptr);
      plan.status = Launcher::plan(problems.data(), static_cast<int>(problems.size()), gemm_request<T>(problem),
                                   current_device_info())
                        .status;
    });
    return plan;
  }

  /// visit(std::bool_constant<kVectors>{}, GatherLauncher<kVectors>{}) with a kGathered plan's
  /// operand reads and launcher.
  template <typename Visit>
  static auto with_gather_launcher(const Plan& plan, Visit&& visit) {
    if (plan.vectors) return visit(std::true_type{}, GatherLauncher<true>{});
    return visit(std::false_type{}, GatherLauncher<false>{});
  }

  template <bool kVectors>
  static int splits_for(const Problem& problem) {
    return weight_splits<Cfg>(problem, weight_extents<T, NDim, kVectors>(problem));
  }

  /// The gather paths' workspace: the table, then (several splits) the splits' sums, 256-byte aligned.
  template <bool kVectors>
  static std::size_t split_sums_offset(const Problem& problem) {
    return round_up(
        GatherLauncher<kVectors>::workspace_bytes(static_cast<int>(problem.params.G * splits_for<kVectors>(problem))),
        std::size_t{256});
  }
  template <bool kVectors>
  static std::size_t gather_workspace(const Problem& problem) {
    const int splits = splits_for<kVectors>(problem);
    if (splits == 1) return GatherLauncher<kVectors>::workspace_bytes(static_cast<int>(problem.params.G));
    const WeightExtents e = weight_extents<T, NDim, kVectors>(problem);
    return split_sums_offset<kVectors>(problem) +
           static_cast<std::size_t>(splits) * static_cast<std::size_t>(problem.params.G * e.m * e.n) * sizeof(float);
  }

  /// workspace_size without packed groups: the direct kernels', or where kAuto may take the box
  /// path the larger of its and the gather path's.
  static std::size_t unpacked_workspace_size(const Problem& problem) {
    if (Direct::takes(problem, weight_channels_contiguous(problem))) return Direct::plan(problem).workspace;
    if (!check_index_space(problem).is_ok()) return 0;
    const std::size_t boxes = Boxes::may_run(problem) ? Boxes::geometry(problem).layout.total : 0;
    if (problem.algorithm == Algorithm::kTmaBoxes) return boxes;
    const std::size_t other =
        weight_channels_contiguous(problem) ? gather_workspace<true>(problem) : gather_workspace<false>(problem);
    return boxes > other ? boxes : other;
  }

  /// The above; where kAuto may pack groups, the packed dw and the packed problem's, where it
  /// may unfold, the columns, dw's columns and their splits' partials, and where it may stage,
  /// the staged tensors and the staged problem's, if larger.
  static std::size_t workspace_size(const Problem& problem) {
    const std::size_t own = workspace_with_packing<T>(problem, unpacked_workspace_size(problem),
                                                      [](const Problem& packed) { return workspace_size(packed); });
    const std::size_t unfolded =
        may_unfold<T>(problem) ? unfold_weight_workspace<T>(problem, unfolded_splits(problem)).total : 0;
    return std::max({own, unfolded, staged_workspace_size(problem)});
  }

  /// may_stage (staged.hpp) with this op's choice of the direct kernels.
  static bool may_stage(const Problem& problem) {
    return conv::detail::may_stage<T>(problem, Direct::takes(problem, weight_channels_contiguous(problem)));
  }
  /// The copies and the staged problem's workspace, where the call may stage.
  static std::size_t staged_workspace_size(const Problem& problem) {
    if (!may_stage(problem)) return 0;
    const StagedLayout<NDim> at = staged_layout<T>(problem);
    return staged_workspace(at, workspace_size(at.problem));
  }

  /// *staged where the call takes the staged route (choose_staged), its plan found with the
  /// caller's pointers for the tensors not copied.
  static Status staged_choice(const Problem& problem, const T* x, const T* dy, const T* dw, bool vectors, bool* staged,
                              bool packed_only = false) {
    const auto find_staged = [&](const StagedLayout<NDim>& at) {
      void* const workspace = const_cast<unsigned char*>(workspace_stand_in<unsigned char>());
      return find(at.problem, staged_tensor(at, StagedTensor::kInput, x, workspace),
                  staged_tensor(at, StagedTensor::kOutput, dy, workspace),
                  staged_tensor(at, StagedTensor::kWeight, dw, workspace));
    };
    return choose_staged<T>(problem, may_stage(problem), vectors, find_staged, staged, packed_only);
  }

  using UnfoldedGemms = UnfoldGemms<T, Cfg>;
  /// The unfolded GEMM's splits along the rows: problem.split_k, or auto_splits of its tiles.
  static int unfolded_splits(const Problem& problem) {
    if (problem.split_k > 0) return problem.split_k;
    const UnfoldShape s = unfold_shape<T>(problem);
    const Index tiles = ceil_div(problem.params.K, static_cast<Index>(Cfg::kBlockM)) *
                        ceil_div(static_cast<Index>(s.row_columns), static_cast<Index>(Cfg::kBlockN));
    const DeviceInfo& device = current_device_info();
    const int splits = auto_splits(tiles, s.rows, problem.params.K * s.row_columns, Cfg::kBlockK,
                                   device.known ? device.multiprocessors : 1);
    return splits < kMaxSplits ? splits : kMaxSplits;
  }
  /// The unfolded route's GEMM for dy (the columns and dw's columns in the workspace).
  static gemm::TileGemmPlan unfolded_plan(const Problem& problem, const T* dy) {
    const UnfoldShape s = unfold_shape<T>(problem);
    const auto g = UnfoldedGemms::weight(s, s.dy_packed ? workspace_stand_in<T>() : dy, workspace_stand_in<T>(),
                                         const_cast<T*>(workspace_stand_in<T>()));
    gemm::TileGemmRequest request = gemm_request<T>(problem);
    request.split_k = unfolded_splits(problem);
    return UnfoldedGemms::plan_weight(g, request);
  }

  /// not_supported where the GEMM does not fit the tile GEMM's 32-bit extents.
  static Status check_index_space(const Problem& problem) {
    constexpr Index kLimit = (Index{1} << 31) - 1;
    const WeightExtents e = weight_extents<T, NDim, true>(problem);
    if (problem.params.G * e.m > kLimit) return Status::not_supported("more than 2^31 - 1 groups times K");
    if (e.n > kLimit) return Status::not_supported("filter taps times C exceed 2^31 - 1");
    if (e.positions > kLimit) {
      return Status::not_supported("N times the output positions is " + std::to_string(e.positions) +
                                   ", more than 2^31 - 1");
    }
    if (problem.split_k > kMaxSplits) {
      return Status::not_supported("split_k " + std::to_string(problem.split_k) + " is more than " +
                                   std::to_string(kMaxSplits));
    }
    // The gather paths' splits (the box path checks its own: WeightBoxPath::status).
    const int splits = weight_channels_contiguous(problem) ? splits_for<true>(problem) : splits_for<false>(problem);
    return check_split_sums(problem.params.G, splits, e.m * e.n);
  }

  /// The groups kAuto packs into one (1: none), where the box path runs the packed problem here.
  static int packed_groups(const Problem& problem, const T* x, const T* dy) {
    const int groups = packed_group_count<T>(problem);
    if (groups < 2) return 1;
    const Problem packed = packed_problem(problem, groups);
    bool boxes = false;
    return check_index_space(packed).is_ok() && Boxes::choose(packed, x, dy, Boxes::geometry(packed), &boxes).is_ok() &&
                   boxes
               ? groups
               : 1;
  }
};

}  // namespace hipgrad::conv::detail
