/// @file plan.hpp
/// @brief Host: backward-data's plan — the route a call takes (direct kernels, packed groups,
///        unfolded windows, TMA boxes, a plain GEMM, staged tensors, the grouped gather GEMM), its
///        tiles, its workspace and its status,
///        made once per problem, pointer alignment and device on the calling thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/backward_data/boxes.hpp"
#include "hipgrad/ops/conv/backward_data/heuristics.hpp"
#include "hipgrad/ops/conv/backward_data/sub_problems.hpp"
#include "hipgrad/ops/conv/common/direct_path.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/packed_groups.hpp"
#include "hipgrad/ops/conv/common/plain_gemm.hpp"
#include "hipgrad/ops/conv/common/plan_key.hpp"
#include "hipgrad/ops/conv/common/staged.hpp"
#include "hipgrad/ops/conv/common/unfold.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/device/box_launcher.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"
#include "hipgrad/gemm/device/launcher.hpp"

namespace hipgrad::conv::detail {

/// The path a backward-data call takes.
enum class DataRoute { kDirect, kPacked, kUnfolded, kBoxes, kPlainGemm, kStaged, kGathered };

/// A backward-data call's plan. `tile` indexes the configurations DataTiles lists.
template <typename DirectPlan>
struct DataPlan {
  Status status;  ///< can_implement's answer, past the checks of the call's own pointers
  DataRoute route = DataRoute::kGathered;
  int packed_groups = 1;      ///< kPacked: groups packed into one
  int tile = 0;               ///< kBoxes / kGathered: DataTiles' configuration
  bool vectors = false;       ///< kGathered: operand vectors along contiguous channels
  std::size_t workspace = 0;  ///< workspace_size(problem): what any pointers need
  DirectPlan direct{};
  gemm::TileGemmPlan plain{};     ///< kPlainGemm
  gemm::TileGemmPlan unfolded{};  ///< kUnfolded: Y = dy · w's columns
  gemm::GroupedGemmPlan gathered{};
};

/// The plain-GEMM path (1×1, unit strides, no padding, one group: plain_gemm.hpp) on the tile
/// GEMM launcher; a class template of its own, so that it is instantiated once per type and
/// configuration whatever the rank.
template <typename T, typename Cfg>
struct PlainGemmRunner {
  using Launcher = gemm::TileGemmLauncher<Cfg, gemm::DenseOperand<T, true>, gemm::DenseOperand<T, false>,
                                          gemm::LinearCombination<T>>;
  static gemm::TileGemmPlan plan(const PlainGemm<T>& g, const gemm::TileGemmRequest& request) {
    return Launcher::plan(g.a, g.b, request, current_device_info());
  }
  static Status launch(const gemm::TileGemmPlan& plan, const PlainGemm<T>& g, hipStream_t stream);
};

/// Not inline, as BackwardData::run.
template <typename T, typename Cfg>
Status PlainGemmRunner<T, Cfg>::launch(const gemm::TileGemmPlan& plan, const PlainGemm<T>& g, hipStream_t stream) {
  return Launcher::launch(plan, g.a, g.b, g.epilogue, nullptr, stream);
}

/// Backward-data's planner: Tiles (DataTiles) names the configurations, and every decision of a
/// call is made here, once per problem, pointers' alignment and device.
template <typename T, int NDim, typename Tiles>
struct DataPlanner {
  using Problem = conv::Problem<NDim>;
  using Direct = DirectPath<T, NDim, direct::MakeDataPlan<T, NDim>>;
  using Plan = DataPlan<typename Direct::Plan>;
  template <bool kVectors, typename TileCfg>
  using GatherLauncher = gemm::GroupedGemmLauncher<TileCfg, DyGather<T, NDim, kVectors>,
                                                   WeightGather<T, NDim, kVectors>, DxScatter<T, NDim>>;
  using BoxSub = BoxSubProblem<T, NDim>;

  /// The plan of (problem, dy, w, dx) on the current device, made once per problem, alignment
  /// of the pointers and device on this thread. The pointers' own checks are the caller's.
  static Plan find(const Problem& problem, const T* dy, const T* w, const T* dx) {
    thread_local RecentPlans<ConvPlanKey, Plan> recent;
    return recent.find_or_make(conv_call_key(problem, dy, w, dx), [&] { return make(problem, dy, w, dx); });
  }

  static Plan make(const Problem& problem, const T* dy, const T* w, const T* dx) {
    Plan plan;
    plan.workspace = workspace_size(problem);
    bool direct = false;
    plan.status = Direct::choose(problem, data_channels_contiguous(problem), &direct, &plan.direct);
    bool unfold = false;
    const auto unfold_gemm = [&] { return unfolded_plan(problem, dy); };
    // Stems the direct kernels would take, kAuto unfolds where that runs.
    if (plan.status.is_ok() && direct && unfolds_before_direct<T>(problem) &&
        choose_unfold<T>(problem, unfold_gemm, &plan.unfolded, &unfold).is_ok() && unfold)
      return plan.route = DataRoute::kUnfolded, plan;
    if (!plan.status.is_ok() || (!direct && !(plan.status = check_index_space(problem)).is_ok())) return plan;
    // Groups of whole vectors in NCHW: staged, they pack onto the tensor cores.
    bool staged = false;
    if (direct && stages_before_direct<T>(problem) &&
        staged_choice(problem, dy, w, dx, data_channels_contiguous(problem), &staged, true).is_ok() && staged)
      return plan.route = DataRoute::kStaged, plan;
    // Packing groups goes before the direct kernels kAuto would take.
    if ((plan.packed_groups = packed_groups(problem, dy)) > 1) return plan.route = DataRoute::kPacked, plan;
    if (direct) return plan.route = DataRoute::kDirect, plan;
    if (!(plan.status = choose_unfold<T>(problem, unfold_gemm, &plan.unfolded, &unfold)).is_ok()) return plan;
    if (unfold) return plan.route = DataRoute::kUnfolded, plan;
    bool boxes = false;
    if (!(plan.status = box_choice(problem, dy, w, &boxes)).is_ok()) return plan;
    if (boxes) return plan.route = DataRoute::kBoxes, plan.tile = Tiles::box_tile(problem.params.C), plan;
    const gemm::TileGemmRequest request = gemm_request<T>(problem);
    if (problem.algorithm != Algorithm::kStaged && is_plain_gemm(problem)) {
      plan.route = DataRoute::kPlainGemm;
      plan.plain =
          PlainGemmRunner<T, typename Tiles::Wide>::plan(plain_gemm(problem, dy, w, const_cast<T*>(dx)), request);
      plan.status = plan.plain.status;
      return plan;
    }
    plan.vectors = data_channels_contiguous(problem);
    if (!(plan.status = staged_choice(problem, dy, w, dx, plan.vectors, &staged)).is_ok()) return plan;
    if (staged) return plan.route = DataRoute::kStaged, plan;
    plan.tile = plan.vectors ? Tiles::gather_tile(problem.params.C) : Tiles::kWideTile;
    with_gather_launcher(plan, [&](auto vectors, auto launcher) {
      using Launcher = decltype(launcher);
      const auto problems =
          backward_data_sub_problems<T, NDim, decltype(vectors)::value>(problem, dy, w, const_cast<T*>(dx));
      plan.gathered =
          Launcher::plan(problems.data(), static_cast<int>(problems.size()), request, current_device_info());
    });
    plan.status = plan.gathered.status;
    return plan;
  }

  /// visit(std::bool_constant<kVectors>{}, GatherLauncher<kVectors, …>{}) with a kGathered plan's
  /// operand reads and launcher.
  template <typename Visit>
  static auto with_gather_launcher(const Plan& plan, Visit&& visit) {
    if (!plan.vectors) return visit(std::false_type{}, GatherLauncher<false, typename Tiles::Wide>{});
    return Tiles::with_gather_tile(
        plan.tile, [&](auto cfg) { return visit(std::true_type{}, GatherLauncher<true, decltype(cfg)>{}); });
  }

  /// workspace_size without packed groups: the launch's sub-problem table, and for the box path
  /// its tensor maps; where kAuto may take the box path, the larger of the two.
  static std::size_t unpacked_workspace_size(const Problem& problem) {
    if (Direct::takes(problem, data_channels_contiguous(problem)) || !check_index_space(problem).is_ok()) return 0;
    const auto phases = static_cast<int>(backward_data_phases(problem).size());
    const auto count = static_cast<int>(problem.params.G * phases);
    const std::size_t boxes = box_workspace_bytes(count, phases);
    if (problem.algorithm == Algorithm::kTmaBoxes) return boxes;
    const std::size_t grouped = data_channels_contiguous(problem)
                                    ? GatherLauncher<true, typename Tiles::Wide>::workspace_bytes(count)
                                    : GatherLauncher<false, typename Tiles::Wide>::workspace_bytes(count);
    return auto_may_run_data_boxes<T>(problem) && boxes > grouped ? boxes : grouped;
  }

  /// The launch's table, and on the box path the maps; where kAuto may pack groups, the packed
  /// weight and the packed problem's, where it may unfold, w's columns and Y, and where it may
  /// stage, the staged tensors and the staged problem's, if larger.
  static std::size_t workspace_size(const Problem& problem) {
    const std::size_t own = workspace_with_packing<T>(problem, unpacked_workspace_size(problem),
                                                      [](const Problem& packed) { return workspace_size(packed); });
    const std::size_t unfolded = may_unfold<T>(problem) ? unfold_data_workspace<T>(problem).total : 0;
    const std::size_t staged = staged_workspace_size(problem);
    return std::max({own, unfolded, staged});
  }

  /// may_stage (staged.hpp) with this op's choice of the direct kernels.
  static bool may_stage(const Problem& problem) {
    return conv::detail::may_stage<T>(problem, Direct::takes(problem, data_channels_contiguous(problem)));
  }
  /// The copies and the staged problem's workspace, where the call may stage.
  static std::size_t staged_workspace_size(const Problem& problem) {
    if (!may_stage(problem)) return 0;
    const StagedLayout<NDim> at = staged_layout<T>(problem);
    return staged_workspace(at, workspace_size(at.problem));
  }

  /// *staged where the call takes the staged route (choose_staged), its plan found with the
  /// caller's pointers for the tensors not copied.
  static Status staged_choice(const Problem& problem, const T* dy, const T* w, const T* dx, bool vectors, bool* staged,
                              bool packed_only = false) {
    const auto find_staged = [&](const StagedLayout<NDim>& at) {
      void* const workspace = const_cast<unsigned char*>(workspace_stand_in<unsigned char>());
      return find(at.problem, staged_tensor(at, StagedTensor::kOutput, dy, workspace),
                  staged_tensor(at, StagedTensor::kWeight, w, workspace),
                  staged_tensor(at, StagedTensor::kInput, dx, workspace));
    };
    return choose_staged<T>(problem, may_stage(problem), vectors, find_staged, staged, packed_only);
  }

  using UnfoldedGemms = UnfoldGemms<T, typename Tiles::Wide>;
  /// The unfolded route's GEMM for dy (w's columns and Y in the workspace).
  static gemm::TileGemmPlan unfolded_plan(const Problem& problem, const T* dy) {
    const UnfoldShape s = unfold_shape<T>(problem);
    const auto g = UnfoldedGemms::data(s, s.dy_packed ? workspace_stand_in<T>() : dy, workspace_stand_in<T>(),
                                       const_cast<float*>(workspace_stand_in<float>()));
    return UnfoldedGemms::plan_data(g, gemm_request<T>(problem));
  }

  /// The sub-problem table, then the maps (w's, and dy's: one per phase at most), 128-byte aligned.
  static std::size_t box_workspace_bytes(int count, int phases) {
    return gemm::grouped_tail_workspace_bytes<BoxSub>(count, static_cast<std::size_t>(phases + 1) * kTensorMapBytes);
  }

  /// not_supported where a phase's GEMM does not fit the tile GEMM's 32-bit extents.
  static Status check_index_space(const Problem& problem) {
    constexpr Index kLimit = (Index{1} << 31) - 1;
    const Index kp = padded_channels<T, true>(problem.params.K);
    if (problem.params.C > kLimit) return Status::not_supported("more than 2^31 - 1 channels per group (C)");
    const std::vector<Phase<NDim>> phases = backward_data_phases(problem);
    HIPGRAD_RETURN_IF_ERROR(check_sub_problem_count(problem.params.G * static_cast<Index>(phases.size())));
    for (const Phase<NDim>& phase : phases) {
      const PhaseExtents e = phase_extents<NDim>(problem, phase);
      if (e.m > kLimit) {
        return Status::not_supported("a stride phase has " + std::to_string(e.m) +
                                     " dx positions (N times its positions), more than 2^31 - 1");
      }
      if (e.taps * kp > kLimit) return Status::not_supported("K times the filter taps exceeds 2^31 - 1");
    }
    return Status::ok();
  }

  /// The groups kAuto packs into one (1: none), where the box path runs the packed problem here.
  static int packed_groups(const Problem& problem, const T* dy) {
    const int groups = packed_group_count<T>(problem);
    if (groups < 2) return 1;
    const Problem packed = packed_problem(problem, groups);
    bool boxes = false;
    return check_index_space(packed).is_ok() && box_choice(packed, dy, packed_weight_stand_in<T>(), &boxes).is_ok() &&
                   boxes
               ? groups
               : 1;
  }

  /// *boxes where the call takes the box path; not ok (the reason) where it is forced and cannot.
  static Status box_choice(const Problem& problem, const T* dy, const T* w, bool* boxes) {
    const bool forced = problem.algorithm == Algorithm::kTmaBoxes;
    return choose_path(
        forced || auto_may_run_data_boxes<T>(problem), forced,
        [&] {
          return Tiles::with_box_tile(Tiles::box_tile(problem.params.C),
                                      [&](auto cfg) { return box_status<decltype(cfg)>(problem, dy, w); });
        },
        boxes);
  }

  /// ok where the box path runs `problem` here with configuration TileCfg.
  template <typename TileCfg>
  static Status box_status(const Problem& problem, const T* dy, const T* w) {
    const std::string no = "algorithm tma_boxes cannot run: ";
    // What the problem allows first, so that every backend gives these reasons.
    if (std::is_same_v<T, float> && !problem.allow_tf32)
      return Status::not_supported(no + "exact fp32 has no matrix path");
    if (const char* b = backward_data_tma_blocker(problem, dy, w, sizeof(T))) return Status::not_supported(no + b);
    for (const PositionBoxes<NDim>& boxes : phase_boxes(problem, TileCfg::kBlockM)) {
      if (boxes.tiles() * TileCfg::kBlockM > (Index{1} << 31) - 1)
        return Status::not_supported(no + "a phase's boxed rows exceed 2^31 - 1");
    }
    if (TileCfg::kBlockK * sizeof(T) != kTmaRowBytes) {
      return Status::not_supported(no + "its tiles are not 128-byte rows the TMA kernel runs");
    }
    if (const char* b = gemm::box_kernel_blocker<TileCfg, DyBoxes<T, NDim>, WBoxes<T, NDim>>())
      return Status::not_supported(no + b);
    return Status::ok();
  }
};

}  // namespace hipgrad::conv::detail
