/// @file backward_data.hpp
/// @brief Grouped N-D convolution backward-data, dx = dy ⋆ rot180(w), for fp32, fp16 and bf16
///        with fp32 accumulation, any strides (NHWGC, GNHWC, NGCHW and any others), stride,
///        dilation and asymmetric pads; every element of dx written once by the op.
///
///   using Op = hipgrad::conv::BackwardData<hipgrad::half, 2>;
///   auto problem = hipgrad::conv::Problem<2>::packed(params, hipgrad::conv::ConvLayout::kNHWGC);
///   Op::Args args{dy, w, dx};
///   HIPGRAD_RETURN_IF_ERROR(Op::can_implement(problem, args));
///   // a workspace of Op::workspace_size(problem) bytes (the launch's sub-problem table), then
///   HIPGRAD_RETURN_IF_ERROR(Op::run(problem, args, workspace, bytes, stream));
///
/// An implicit GEMM per group and stride phase (detail/stride_phases.hpp: the dx positions of
/// one residue class per dimension meet the taps of one class only, so nothing multiplies an
/// inserted zero), all of them sub-problems of one grouped launch of the tile GEMM; phases that
/// meet no tap are written as zeros. A 1×1 filter with unit strides and no padding in one group is
/// one plain GEMM (the TMA kernel where aligned). Where dy's and w's channels are contiguous, operand vectors
/// run along them (16 bytes on the matrix paths), and on sm_90a fp16/bf16 take the box path
/// (dy and w copied by TMA boxes, detail/backward_data_tma.hpp); elsewhere elements are read one
/// at a time on the SIMT path. Each dx element is one thread's sum in a fixed order: results are bitwise
/// repeatable. Groups of few channels take the direct kernels instead (direct/, Algorithm::kDirect;
/// kAuto's rule: direct/heuristics.hpp), or, under kAuto, several of them packed into one
/// block-diagonal group on the box path (detail/packed_groups.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/conv/detail/backward_data_plan.hpp"
#include "hipgrad/ops/conv/detail/backward_data_tma.hpp"
#include "hipgrad/ops/conv/detail/direct_path.hpp"
#include "hipgrad/ops/conv/detail/op_checks.hpp"
#include "hipgrad/ops/conv/detail/packed_groups.hpp"
#include "hipgrad/ops/conv/detail/packed_groups_kernels.hpp"
#include "hipgrad/ops/conv/detail/plain_gemm.hpp"
#include "hipgrad/ops/conv/detail/plan_key.hpp"
#include "hipgrad/ops/conv/direct/launch.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/device/box_launcher.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"
#include "hipgrad/gemm/device/launcher.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::conv {

namespace detail {

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

}  // namespace detail

/// T: dy, w and dx (float, half, bfloat16). NDim: 1, 2 or 3 spatial dimensions. Cfg: the matrix
/// paths' tiles; NarrowCfg those of problems of at most NarrowCfg::kBlockN channels per group;
/// ThinCfg the box path's of at most ThinCfg::kBlockN.
template <typename T, int NDim, typename Cfg = gemm::DefaultConfigFor<T>, typename NarrowCfg = gemm::NarrowConfigFor<T>,
          typename ThinCfg = gemm::ThinConfigFor<T>>
class BackwardData {
  static_assert(is_storage_type_v<T>, "convolution data must be float, half or bfloat16");

 public:
  using Problem = conv::Problem<NDim>;

  struct Args {
    const T* dy = nullptr;  ///< [G, N, K, output spatial...] at problem.output_strides
    const T* w = nullptr;   ///< [G, K, C, filter...] at problem.weight_strides
    T* dx = nullptr;        ///< [G, N, C, input spatial...] at problem.input_strides; written whole
  };

  static Status can_implement(const Problem& problem, const Args& args) {
    bool direct = false;
    HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args, &direct));
    if (direct || packed_groups(problem, args) > 1) return Status::ok();
    bool boxes = false;
    HIPGRAD_RETURN_IF_ERROR(box_choice(problem, args, &boxes));
    if (boxes) return Status::ok();
    if (detail::is_plain_gemm(problem)) return plain_plan(problem, args).status;
    return with_plan(problem, args, [](auto, const auto&, const gemm::GroupedGemmPlan& plan) { return plan.status; });
  }

  /// The launch's table of sub-problems (one per group and stride phase with dx positions), and
  /// for the box path its tensor maps: where kAuto may take the box path, the larger of the two;
  /// where it may pack groups, the packed weight and the packed problem's, if larger.
  static std::size_t workspace_size(const Problem& problem) {
    if (!problem.validate().is_ok()) return 0;
    return detail::workspace_with_packing<T>(problem, unpacked_workspace_size(problem),
                                             [](const Problem& packed) { return workspace_size(packed); });
  }

  /// Defined after the class (not inline), so that an `extern template` declaration of the op
  /// keeps its kernels out of the translation units that only call it.
  static Status run(const Problem& problem, const Args& args, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream);

  /// e.g. "conv2d_bwd_data_fp16_vectors_grouped_wgmma_128x256x64_w2x4_s4": the operands' reads
  /// (vectors along contiguous channels, elements, or a plain GEMM of a 1×1 problem) and the
  /// kernel run() takes.
  static std::string name(const Problem& problem, const Args& args = Args{}) {
    if (!problem.validate().is_ok()) return "conv_bwd_data_invalid";
    const std::string op =
        "conv" + std::to_string(NDim) + "d_bwd_data_" + type_name<T>() + (problem.allow_tf32 ? "_tf32" : "");
    if (const int groups = packed_groups(problem, args); groups > 1) {
      const std::string packed = name(detail::packed_problem(problem, groups), packed_args(args));
      return op + "_packed" + std::to_string(groups) + packed.substr(op.size());
    }
    if (takes_direct(problem)) return op + "_direct_" + direct::data_plan_name(direct_plan(problem));
    if (runs_boxes(problem, args)) {
      return with_box_config(problem, [&](auto cfg) {
        gemm::TileGemmPlan plan;
        plan.path = gemm::Path::kTma;
        plan.wgmma = true;
        return op + "_boxes_grouped_" + gemm::tile_gemm_kernel_name<decltype(cfg)>(plan);
      });
    }
    if (detail::is_plain_gemm(problem))
      return op + "_gemm_" + gemm::tile_gemm_kernel_name<Cfg>(plain_plan(problem, args));
    return with_plan(problem, args, [&](auto launcher, const auto&, const gemm::GroupedGemmPlan& plan) {
      using Launcher = decltype(launcher);
      return op + (channels_contiguous(problem) ? "_vectors_" : "_elements_") + Launcher::kernel_name(plan);
    });
  }

 private:
  template <bool kVectors, typename TileCfg = Cfg>
  using LauncherOf = gemm::GroupedGemmLauncher<TileCfg, detail::DyGather<T, NDim, kVectors>,
                                               detail::WeightGather<T, NDim, kVectors>, detail::DxScatter<T, NDim>>;

  static gemm::TileGemmRequest request_of(const Problem& problem) { return detail::gemm_request<T>(problem); }

  static gemm::TileGemmPlan plain_plan(const Problem& problem, const Args& args) {
    return detail::PlainGemmRunner<T, Cfg>::plan(detail::plain_gemm(problem, args.dy, args.w, args.dx),
                                                 request_of(problem));
  }

  /// Vectors run along the channels where dy's k and w's c are contiguous.
  static bool channels_contiguous(const Problem& problem) {
    return problem.output_strides[2] == 1 && problem.weight_strides[2] == 1;
  }

  /// workspace_size without packed groups.
  static std::size_t unpacked_workspace_size(const Problem& problem) {
    if (takes_direct(problem) || !check_index_space(problem).is_ok()) return 0;
    const auto phases = static_cast<int>(detail::backward_data_phases(problem).size());
    const auto count = static_cast<int>(problem.params.G * phases);
    const std::size_t boxes = box_workspace_bytes(count, phases);
    if (problem.algorithm == Algorithm::kTmaBoxes) return boxes;
    const std::size_t grouped = channels_contiguous(problem) ? LauncherOf<true>::workspace_bytes(count)
                                                             : LauncherOf<false>::workspace_bytes(count);
    return auto_may_run_boxes(problem) && boxes > grouped ? boxes : grouped;
  }

  // ---- kDirect: the direct kernels (direct/) --------------------------------------------------

  using Direct = detail::DirectPath<T, NDim, direct::MakeDataPlan<T, NDim>>;
  static auto direct_plan(const Problem& problem) { return Direct::plan(problem); }
  static bool takes_direct(const Problem& problem) { return Direct::takes(problem, channels_contiguous(problem)); }

  /// The arguments' checks; *direct: whether the call takes the direct kernels (whose 64-bit
  /// offsets need none of the tile GEMM's index limits), their plan into *direct_plan_taken.
  static Status check_arguments(const Problem& problem, const Args& args, bool* direct,
                                typename Direct::Plan* direct_plan_taken = nullptr) {
    const ConvParams<NDim>& p = problem.params;
    HIPGRAD_RETURN_IF_ERROR(
        (detail::check_op_arguments<T, NDim>(problem, {args.dy, p.output_lengths(), problem.output_strides, "dy"},
                                             {args.w, p.weight_lengths(), problem.weight_strides, "w"},
                                             {args.dx, p.input_lengths(), problem.input_strides, "dx"})));
    HIPGRAD_RETURN_IF_ERROR(Direct::choose(problem, channels_contiguous(problem), direct, direct_plan_taken));
    return *direct ? Status::ok() : check_index_space(problem);
  }

  /// not_supported where a phase's GEMM does not fit the tile GEMM's 32-bit extents.
  static Status check_index_space(const Problem& problem) {
    constexpr Index kLimit = (Index{1} << 31) - 1;
    const Index kp = detail::padded_channels<T, true>(problem.params.K);
    if (problem.params.C > kLimit) return Status::not_supported("more than 2^31 - 1 channels per group (C)");
    HIPGRAD_RETURN_IF_ERROR(detail::check_sub_problem_count(
        problem.params.G * static_cast<Index>(detail::backward_data_phases(problem).size())));
    for (const detail::Phase<NDim>& phase : detail::backward_data_phases(problem)) {
      const detail::PhaseExtents e = detail::phase_extents<NDim>(problem, phase);
      if (e.m > kLimit) {
        return Status::not_supported("a stride phase has " + std::to_string(e.m) +
                                     " dx positions (N times its positions), more than 2^31 - 1");
      }
      if (e.taps * kp > kLimit) return Status::not_supported("K times the filter taps exceeds 2^31 - 1");
    }
    return Status::ok();
  }

  /// Calls visit(Launcher{}, sub_problems, plan) with the launcher of the problem's operand reads,
  /// its sub-problems and its plan.
  template <typename Visit>
  static auto with_plan(const Problem& problem, const Args& args, Visit&& visit) {
    // Element reads run SIMT, whose tiles do not depend on the configuration.
    if (!channels_contiguous(problem)) return visit_plan<false, Cfg>(problem, args, visit);
    if constexpr (!std::is_same_v<Cfg, NarrowCfg>) {
      if (problem.params.C <= NarrowCfg::kBlockN) return visit_plan<true, NarrowCfg>(problem, args, visit);
    }
    return visit_plan<true, Cfg>(problem, args, visit);
  }

  // ---- kAuto's packed groups: P groups as one block-diagonal group (detail/packed_groups.hpp) -

  /// The packed problem's arguments before the workspace is known (the packed weight's stand-in).
  static Args packed_args(const Args& args) { return {args.dy, detail::packed_weight_stand_in<T>(), args.dx}; }

  /// The groups run() packs into one (1: none): kAuto's count where the box path runs the packed
  /// problem here.
  static int packed_groups(const Problem& problem, const Args& args) {
    const int groups = detail::packed_group_count<T>(problem);
    if (groups < 2) return 1;
    const Problem packed = detail::packed_problem(problem, groups);
    bool boxes = false;
    return check_index_space(packed).is_ok() && box_choice(packed, packed_args(args), &boxes).is_ok() && boxes ? groups
                                                                                                               : 1;
  }

  /// The packed weight spread into the workspace, then the packed problem on the rest of it.
  static Status run_packed(const Problem& problem, const Args& args, int groups, void* workspace, std::size_t bytes,
                           hipStream_t stream) {
    const std::size_t weight_bytes = detail::packed_weight_bytes<T>(problem, groups);
    detail::PackedWeightParams<T, NDim> spread = detail::packed_weight_params<T, NDim>(problem, groups, true);
    T* w = detail::packed_weight_in<T>(workspace);
    spread.from = args.w, spread.to = w;
    HIPGRAD_RETURN_IF_ERROR(detail::launch_packed_weight_copy(spread, stream));
    return run(detail::packed_problem(problem, groups), Args{args.dy, w, args.dx},
               static_cast<unsigned char*>(workspace) + weight_bytes, bytes - weight_bytes, stream);
  }

  // ---- kTmaBoxes: dy and w by TMA boxes (backward_data_tma.hpp, box_producer.hpp) ----------

  using BoxSubProblem = detail::BoxSubProblem<T, NDim>;
  static constexpr std::size_t kTensorMapBytes = detail::kTensorMapBytes;

  /// The sub-problem table, then the maps (w's, and dy's: one per phase at most), 128-byte aligned.
  static std::size_t box_workspace_bytes(int count, int phases) {
    return gemm::grouped_tail_workspace_bytes<BoxSubProblem>(count,
                                                             static_cast<std::size_t>(phases + 1) * kTensorMapBytes);
  }

  /// visit(TileCfg{}) with the configuration the box path runs: the narrowest of ThinCfg,
  /// NarrowCfg and Cfg that is as wide as C.
  template <typename Visit>
  static auto with_box_config(const Problem& problem, Visit&& visit) {
    if constexpr (!std::is_same_v<ThinCfg, NarrowCfg>) {
      if (problem.params.C <= ThinCfg::kBlockN) return visit(ThinCfg{});
    }
    if constexpr (!std::is_same_v<Cfg, NarrowCfg>) {
      if (problem.params.C <= NarrowCfg::kBlockN) return visit(NarrowCfg{});
    }
    return visit(Cfg{});
  }

  /// Whether kAuto may take the box path for `problem` (before what the pointers and the device
  /// allow): fp16/bf16 only (TF32's swapped product gives up the gather path's operand order and
  /// loses to it: bench/log/conv.md), and not the plain GEMM of a 1×1 problem.
  static bool auto_may_run_boxes(const Problem& problem) {
    return problem.algorithm == Algorithm::kAuto && sizeof(T) == 2 && !detail::is_plain_gemm(problem) &&
           channels_contiguous(problem);
  }

  /// Whether run() takes the box path: forced, or chosen by kAuto where it can run.
  static bool runs_boxes(const Problem& problem, const Args& args) {
    bool boxes = false;
    return box_choice(problem, args, &boxes).is_ok() && boxes;
  }

  /// One evaluation of box_status for a call: *boxes where the call takes the box path; not ok
  /// (the reason) where it is forced and cannot run.
  static Status box_choice(const Problem& problem, const Args& args, bool* boxes) {
    const bool forced = problem.algorithm == Algorithm::kTmaBoxes;
    return detail::choose_path(
        forced || auto_may_run_boxes(problem), forced,
        [&] { return with_box_config(problem, [&](auto cfg) { return box_status<decltype(cfg)>(problem, args); }); },
        boxes);
  }

  /// ok where the box path runs `problem` here with configuration TileCfg.
  template <typename TileCfg>
  static Status box_status(const Problem& problem, const Args& args) {
    const std::string no = "algorithm tma_boxes cannot run: ";
    // What the problem allows first, so that every backend gives these reasons.
    if (std::is_same_v<T, float> && !problem.allow_tf32)
      return Status::not_supported(no + "exact fp32 has no matrix path");
    if (const char* b = detail::backward_data_tma_blocker(problem, args.dy, args.w, sizeof(T)))
      return Status::not_supported(no + b);
    for (const detail::PositionBoxes<NDim>& boxes : detail::phase_boxes(problem, TileCfg::kBlockM)) {
      if (boxes.tiles() * TileCfg::kBlockM > (Index{1} << 31) - 1)
        return Status::not_supported(no + "a phase's boxed rows exceed 2^31 - 1");
    }
    if (TileCfg::kBlockK * sizeof(T) != detail::kTmaRowBytes) {
      return Status::not_supported(no + "its tiles are not 128-byte rows the TMA kernel runs");
    }
    if (const char* b = gemm::box_kernel_blocker<TileCfg, detail::DyBoxes<T, NDim>, detail::WBoxes<T, NDim>>())
      return Status::not_supported(no + b);
    return Status::ok();
  }

  template <typename TileCfg>
  static Status run_boxes(const Problem& problem, const Args& args, void* workspace, std::size_t bytes,
                          hipStream_t stream);

  template <bool kVectors, typename TileCfg, typename Visit>
  static auto visit_plan(const Problem& problem, const Args& args, Visit& visit) {
    using Launcher = LauncherOf<kVectors, TileCfg>;
    const auto problems = detail::backward_data_sub_problems<T, NDim, kVectors>(problem, args.dy, args.w, args.dx);
    const gemm::GroupedGemmPlan plan =
        Launcher::plan(problems.data(), static_cast<int>(problems.size()), request_of(problem), current_device_info());
    return visit(Launcher{}, problems, plan);
  }
};

template <typename T, int NDim, typename Cfg, typename NarrowCfg, typename ThinCfg>
Status BackwardData<T, NDim, Cfg, NarrowCfg, ThinCfg>::run(const Problem& problem, const Args& args, void* workspace,
                                                           std::size_t workspace_bytes, hipStream_t stream) {
  bool direct = false;
  typename Direct::Plan plan;
  HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args, &direct, &plan));
  if (const int groups = packed_groups(problem, args); groups > 1) {
    HIPGRAD_RETURN_IF_ERROR(check_workspace(workspace_size(problem), workspace, workspace_bytes));
    return run_packed(problem, args, groups, workspace, workspace_bytes, stream);
  }
  if (direct) return direct::launch_backward_data(plan, args.dy, args.w, args.dx, stream);
  HIPGRAD_RETURN_IF_ERROR(check_workspace(workspace_size(problem), workspace, workspace_bytes));
  bool boxes = false;
  HIPGRAD_RETURN_IF_ERROR(box_choice(problem, args, &boxes));
  if (boxes) {
    return with_box_config(
        problem, [&](auto cfg) { return run_boxes<decltype(cfg)>(problem, args, workspace, workspace_bytes, stream); });
  }
  if (detail::is_plain_gemm(problem)) {
    const gemm::TileGemmPlan plan = plain_plan(problem, args);
    HIPGRAD_RETURN_IF_ERROR(plan.status);
    return detail::PlainGemmRunner<T, Cfg>::launch(plan, detail::plain_gemm(problem, args.dy, args.w, args.dx), stream);
  }
  return with_plan(problem, args, [&](auto launcher, const auto& problems, const gemm::GroupedGemmPlan& plan) {
    using Launcher = decltype(launcher);
    HIPGRAD_RETURN_IF_ERROR(plan.status);
    return Launcher::launch(plan, problems.data(), static_cast<int>(problems.size()), workspace, workspace_bytes,
                            stream);
  });
}

template <typename T, int NDim, typename Cfg, typename NarrowCfg, typename ThinCfg>
template <typename TileCfg>
Status BackwardData<T, NDim, Cfg, NarrowCfg, ThinCfg>::run_boxes(const Problem& problem, const Args& args,
                                                                 void* workspace, std::size_t bytes,
                                                                 hipStream_t stream) {
  if constexpr (TileCfg::kBlockK * sizeof(T) == detail::kTmaRowBytes) {
    using Plan = gemm::WgmmaPlan<TileCfg, detail::DyBoxes<T, NDim>, detail::WBoxes<T, NDim>>;
    const int count =
        static_cast<int>(problem.params.G * static_cast<Index>(detail::backward_data_phases(problem).size()));
    auto* maps_on_device = static_cast<unsigned char*>(workspace) + gemm::grouped_tail_offset<BoxSubProblem>(count);
    const detail::BoxPlan<T, NDim> plan = detail::box_plan<T, NDim>(problem, args.dx, maps_on_device, TileCfg::kBlockM,
                                                                    TileCfg::kBlockN, Plan::TileB::Layout::kPanelBytes);
    static_assert(sizeof(gemm::TensorMap) == detail::kTensorMapBytes, "the workspace holds 128-byte tensor maps");
    std::vector<gemm::TensorMap> maps(plan.maps.size());
    for (std::size_t i = 0; i < maps.size(); ++i) {
      const void* base = i == 0 ? static_cast<const void*>(args.w) : static_cast<const void*>(args.dy);
      HIPGRAD_RETURN_IF_ERROR(gemm::encode_tensor_map_shape<T>(plan.maps[i], base, &maps[i]));
    }
    return gemm::launch_grouped_box_gemm<TileCfg>(plan.problems.data(), count, maps.data(),
                                                  static_cast<int>(maps.size()), workspace, bytes,
                                                  current_device_info(), stream);
  } else {
    (void)problem, (void)args, (void)workspace, (void)bytes, (void)stream;
    return Status::not_supported("algorithm tma_boxes: tiles that are not 128-byte rows");
  }
}

}  // namespace hipgrad::conv
