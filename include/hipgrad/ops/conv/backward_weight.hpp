/// @file backward_weight.hpp
/// @brief Grouped N-D convolution backward-weight, dw = x ⋆ dy per group, for fp32, fp16 and
///        bf16 with fp32 accumulation, any strides (NHWGC, GNHWC, NGCHW and any others), stride,
///        dilation and asymmetric pads; every element of dw written once by the op, bitwise the
///        same from run to run.
///
///   using Op = hipgrad::conv::BackwardWeight<hipgrad::half, 2>;
///   auto problem = hipgrad::conv::Problem<2>::packed(params, hipgrad::conv::ConvLayout::kNHWGC);
///   Op::Args args{x, dy, dw};
///   HIPGRAD_RETURN_IF_ERROR(Op::can_implement(problem, args));
///   // a workspace of Op::workspace_size(problem) bytes (the sub-problem table and the splits'
///   // fp32 sums), then
///   HIPGRAD_RETURN_IF_ERROR(Op::run(problem, args, workspace, bytes, stream));
///
/// An implicit GEMM per group (detail/backward_weight_plan.hpp: M = K, N = taps × C, its K the
/// N × Π O output positions), split along those positions (problem.split_k, 0: the op's choice
/// for the problem and the GPU). All groups and splits are sub-problems of one grouped launch of
/// the tile GEMM. With one split the GEMM stores dw; with several each split stores its fp32
/// sums in the workspace and a reduction adds them in split order and converts once: no atomics,
/// no caller zeroing, the same bits on every run. Where x's and dy's channels are contiguous,
/// operand vectors run along them (16 bytes on the matrix paths), and on sm_90a fp16/bf16 and
/// TF32 take the box path (x and dy copied by TMA boxes of output positions,
/// detail/backward_weight_tma.hpp);
/// elsewhere elements are read one at a time on the SIMT path. Groups of few channels take the
/// direct kernels instead (direct/, Algorithm::kDirect; kAuto's rule: direct/heuristics.hpp), or,
/// under kAuto, several of them packed into one block-diagonal group on the box path, whose dw
/// diagonal blocks are copied out (detail/packed_groups.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/conv/detail/backward_weight_box_path.hpp"
#include "hipgrad/ops/conv/detail/backward_weight_plan.hpp"
#include "hipgrad/ops/conv/detail/direct_path.hpp"
#include "hipgrad/ops/conv/detail/op_checks.hpp"
#include "hipgrad/ops/conv/detail/packed_groups.hpp"
#include "hipgrad/ops/conv/detail/packed_groups_kernels.hpp"
#include "hipgrad/ops/conv/detail/plan_key.hpp"
#include "hipgrad/ops/conv/direct/launch.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"
#include "hipgrad/gemm/device/launcher.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::conv {

/// T: x, dy and dw (float, half, bfloat16). NDim: 1, 2 or 3 spatial dimensions. Cfg: the matrix
/// paths' tiles.
template <typename T, int NDim, typename Cfg = gemm::DefaultConfigFor<T>>
class BackwardWeight {
  static_assert(is_storage_type_v<T>, "convolution data must be float, half or bfloat16");

 public:
  using Problem = conv::Problem<NDim>;

  struct Args {
    const T* x = nullptr;   ///< [G, N, C, input spatial...] at problem.input_strides
    const T* dy = nullptr;  ///< [G, N, K, output spatial...] at problem.output_strides
    T* dw = nullptr;        ///< [G, K, C, filter...] at problem.weight_strides; written whole
  };

  static Status can_implement(const Problem& problem, const Args& args) {
    bool direct = false;
    HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args, &direct));
    if (direct || packed_groups(problem, args) > 1) return Status::ok();
    bool boxes = false;
    HIPGRAD_RETURN_IF_ERROR(box_choice(problem, args, box_geometry(problem), &boxes));
    if (boxes) return Status::ok();
    return with_plan(problem, args, nullptr,
                     [](auto, const auto&, const gemm::GroupedGemmPlan& plan) { return plan.status; });
  }

  /// The launch's table of sub-problems (one per group and split), and with several splits their
  /// fp32 sums (splits × G × K × taps × C, C padded to the vector, or to a 128-byte panel on the
  /// box path, whose tensor maps the workspace holds too): where kAuto may take the box path, the
  /// larger of the two; where it may pack groups, the packed dw and the packed problem's, if larger.
  static std::size_t workspace_size(const Problem& problem) {
    if (!problem.validate().is_ok()) return 0;
    return detail::workspace_with_packing<T>(problem, unpacked_workspace_size(problem),
                                             [](const Problem& packed) { return workspace_size(packed); });
  }

  /// Defined after the class (not inline), so that an `extern template` declaration of the op
  /// keeps its kernels out of the translation units that only call it.
  static Status run(const Problem& problem, const Args& args, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream);

  /// e.g. "conv2d_bwd_weight_fp16_vectors_grouped_wgmma_gather_128x256x64_w2x4_s4_split4": the
  /// operands' reads (TMA boxes, vectors along contiguous channels, or elements), the kernel,
  /// the splits.
  static std::string name(const Problem& problem, const Args& args = Args{}) {
    if (!problem.validate().is_ok()) return "conv_bwd_weight_invalid";
    const std::string op =
        "conv" + std::to_string(NDim) + "d_bwd_weight_" + type_name<T>() + (problem.allow_tf32 ? "_tf32" : "");
    if (const int groups = packed_groups(problem, args); groups > 1) {
      const std::string packed = name(detail::packed_problem(problem, groups), packed_args(args));
      return op + "_packed" + std::to_string(groups) + packed.substr(op.size());
    }
    if (takes_direct(problem)) return op + "_direct_" + direct::weight_plan_name(direct_plan(problem));
    const BoxGeometry geometry = box_geometry(problem);
    if (runs_boxes(problem, args, geometry)) {
      gemm::TileGemmPlan plan;
      plan.path = gemm::Path::kTma;
      plan.wgmma = true;
      return Boxes::with_config(problem, [&](auto config) {
        return op + "_boxes_grouped_" + gemm::tile_gemm_kernel_name<decltype(config)>(plan) + "_split" +
               std::to_string(geometry.splits);
      });
    }
    return with_plan(problem, args, nullptr, [&](auto launcher, const auto&, const gemm::GroupedGemmPlan& plan) {
      using Launcher = decltype(launcher);
      return op + (channels_contiguous(problem) ? "_vectors_" : "_elements_") + Launcher::kernel_name(plan) + "_split" +
             std::to_string(splits_of(problem));
    });
  }

  /// The splits run() takes for `problem` and `args` on the current device: problem.split_k, or
  /// the op's choice (the output tiles over all groups against the multiprocessors,
  /// detail::auto_splits); 0 for a problem that does not validate.
  static int splits_of(const Problem& problem, const Args& args = Args{}) {
    if (!problem.validate().is_ok()) return 0;
    if (const int groups = packed_groups(problem, args); groups > 1)
      return splits_of(detail::packed_problem(problem, groups), packed_args(args));
    if (takes_direct(problem)) return direct_plan(problem).slices();
    const BoxGeometry geometry = box_geometry(problem);
    if (runs_boxes(problem, args, geometry)) return geometry.splits;
    return channels_contiguous(problem) ? splits_for<true>(problem) : splits_for<false>(problem);
  }

 private:
  template <bool kVectors>
  using LauncherOf = gemm::GroupedGemmLauncher<Cfg, detail::DyRows<T, NDim, kVectors>,
                                               detail::XPatches<T, NDim, kVectors>, detail::DwStore<T, NDim>>;

  static bool channels_contiguous(const Problem& problem) { return detail::weight_channels_contiguous(problem); }

  template <bool kVectors>
  static int splits_for(const Problem& problem) {
    return detail::weight_splits<Cfg>(problem, detail::weight_extents<T, NDim, kVectors>(problem));
  }

  /// The table, then (several splits) the splits' sums, 256-byte aligned.
  template <bool kVectors>
  static std::size_t split_sums_offset(const Problem& problem) {
    return round_up(
        LauncherOf<kVectors>::workspace_bytes(static_cast<int>(problem.params.G * splits_for<kVectors>(problem))),
        std::size_t{256});
  }
  template <bool kVectors>
  static std::size_t workspace_of(const Problem& problem) {
    const int splits = splits_for<kVectors>(problem);
    if (splits == 1) return LauncherOf<kVectors>::workspace_bytes(static_cast<int>(problem.params.G));
    const detail::WeightExtents e = detail::weight_extents<T, NDim, kVectors>(problem);
    return split_sums_offset<kVectors>(problem) +
           static_cast<std::size_t>(splits) * static_cast<std::size_t>(problem.params.G * e.m * e.n) * sizeof(float);
  }

  static gemm::TileGemmRequest request_of(const Problem& problem) { return detail::gemm_request<T>(problem); }

  /// workspace_size without packed groups.
  static std::size_t unpacked_workspace_size(const Problem& problem) {
    if (takes_direct(problem)) return direct_plan(problem).workspace;
    if (!check_index_space(problem).is_ok()) return 0;
    return required_workspace(problem, box_geometry(problem));
  }

  // ---- kAuto's packed groups: P groups as one block-diagonal group (detail/packed_groups.hpp) -

  /// The packed problem's arguments before the workspace is known (the packed dw's stand-in).
  static Args packed_args(const Args& args) {
    return {args.x, args.dy, const_cast<T*>(detail::packed_weight_stand_in<T>())};
  }

  /// The groups run() packs into one (1: none): kAuto's count where the box path runs the packed
  /// problem here.
  static int packed_groups(const Problem& problem, const Args& args) {
    const int groups = detail::packed_group_count<T>(problem);
    if (groups < 2) return 1;
    const Problem packed = detail::packed_problem(problem, groups);
    bool boxes = false;
    return check_index_space(packed).is_ok() &&
                   box_choice(packed, packed_args(args), box_geometry(packed), &boxes).is_ok() && boxes
               ? groups
               : 1;
  }

  /// The packed problem into a packed dw in the workspace, then dw gathered from its diagonal blocks.
  static Status run_packed(const Problem& problem, const Args& args, int groups, void* workspace, std::size_t bytes,
                           hipStream_t stream) {
    const std::size_t weight_bytes = detail::packed_weight_bytes<T>(problem, groups);
    T* packed_dw = detail::packed_weight_in<T>(workspace);
    HIPGRAD_RETURN_IF_ERROR(run(detail::packed_problem(problem, groups), Args{args.x, args.dy, packed_dw},
                                static_cast<unsigned char*>(workspace) + weight_bytes, bytes - weight_bytes, stream));
    detail::PackedWeightParams<T, NDim> gather = detail::packed_weight_params<T, NDim>(problem, groups, false);
    gather.from = packed_dw, gather.to = args.dw;
    return detail::launch_packed_weight_copy(gather, stream);
  }

  // ---- kDirect: the direct kernels (direct/) --------------------------------------------------

  using Direct = detail::DirectPath<T, NDim, direct::MakeWeightPlan<T, NDim>>;
  static auto direct_plan(const Problem& problem) { return Direct::plan(problem); }
  static bool takes_direct(const Problem& problem) { return Direct::takes(problem, channels_contiguous(problem)); }

  /// The arguments' checks; *direct: whether the call takes the direct kernels (whose 64-bit
  /// offsets need none of the tile GEMM's index limits), their plan into *direct_plan_taken.
  static Status check_arguments(const Problem& problem, const Args& args, bool* direct,
                                typename Direct::Plan* direct_plan_taken = nullptr) {
    const ConvParams<NDim>& p = problem.params;
    HIPGRAD_RETURN_IF_ERROR(
        (detail::check_op_arguments<T, NDim>(problem, {args.x, p.input_lengths(), problem.input_strides, "x"},
                                             {args.dy, p.output_lengths(), problem.output_strides, "dy"},
                                             {args.dw, p.weight_lengths(), problem.weight_strides, "dw"})));
    HIPGRAD_RETURN_IF_ERROR(Direct::choose(problem, channels_contiguous(problem), direct, direct_plan_taken));
    return *direct ? Status::ok() : check_index_space(problem);
  }

  /// not_supported where the GEMM does not fit the tile GEMM's 32-bit extents.
  static constexpr int kMaxSplits = 1024;

  static Status check_index_space(const Problem& problem) {
    constexpr Index kLimit = (Index{1} << 31) - 1;
    const detail::WeightExtents e = detail::weight_extents<T, NDim, true>(problem);
    if (problem.params.G * e.m > kLimit) return Status::not_supported("more than 2^31 - 1 groups times K");
    if (e.n > kLimit) return Status::not_supported("filter taps times C exceed 2^31 - 1");
    if (e.positions > kLimit) {
      return Status::not_supported("N times the output positions is " + std::to_string(e.positions) +
                                   ", more than 2^31 - 1");
    }
    // At most kMaxSplits: splits past the positions are empty sub-problems, and each adds its
    // fp32 sums to the workspace.
    if (problem.split_k > kMaxSplits) {
      return Status::not_supported("split_k " + std::to_string(problem.split_k) + " is more than " +
                                   std::to_string(kMaxSplits));
    }
    // The gather paths' splits (the box path checks its own: WeightBoxPath::status).
    const int splits = channels_contiguous(problem) ? splits_for<true>(problem) : splits_for<false>(problem);
    return detail::check_split_sums(problem.params.G, splits, e.m * e.n);
  }

  /// Calls visit(Launcher{}, sub_problems, plan) with the launcher of the problem's operand reads,
  /// its sub-problems (their split sums at `split_sums`) and its plan.
  template <typename Visit>
  static auto with_plan(const Problem& problem, const Args& args, float* split_sums, Visit&& visit) {
    if (channels_contiguous(problem)) return visit_plan<true>(problem, args, split_sums, visit);
    return visit_plan<false>(problem, args, split_sums, visit);
  }

  template <bool kVectors, typename Visit>
  static auto visit_plan(const Problem& problem, const Args& args, float* split_sums, Visit& visit) {
    using Launcher = LauncherOf<kVectors>;
    const auto problems = detail::backward_weight_sub_problems<T, NDim, kVectors>(
        problem, args.x, args.dy, args.dw, splits_for<kVectors>(problem), split_sums);
    const gemm::GroupedGemmPlan plan =
        Launcher::plan(problems.data(), static_cast<int>(problems.size()), request_of(problem), current_device_info());
    return visit(Launcher{}, problems, plan);
  }

  template <bool kVectors>
  static Status run_splits(const Problem& problem, const Args& args, void* workspace, std::size_t workspace_bytes,
                           hipStream_t stream);

  // ---- kTmaBoxes: x and dy by TMA boxes (detail/backward_weight_box_path.hpp) ----------------

  using Boxes = detail::WeightBoxPath<T, NDim, Cfg>;
  using BoxGeometry = typename Boxes::Geometry;
  static BoxGeometry box_geometry(const Problem& problem) { return Boxes::geometry(problem); }

  /// workspace_size of a checked problem whose box geometry is `geometry`.
  static std::size_t required_workspace(const Problem& problem, const BoxGeometry& geometry) {
    const std::size_t boxes = Boxes::may_run(problem) ? geometry.layout.total : 0;
    if (problem.algorithm == Algorithm::kTmaBoxes) return boxes;
    const std::size_t other = channels_contiguous(problem) ? workspace_of<true>(problem) : workspace_of<false>(problem);
    return boxes > other ? boxes : other;
  }

  /// Whether run() takes the box path: forced, or chosen by kAuto where it can run.
  static bool runs_boxes(const Problem& problem, const Args& args, const BoxGeometry& geometry) {
    bool boxes = false;
    return box_choice(problem, args, geometry, &boxes).is_ok() && boxes;
  }
  static Status box_choice(const Problem& problem, const Args& args, const BoxGeometry& geometry, bool* boxes) {
    return Boxes::choose(problem, args.x, args.dy, geometry, boxes);
  }
};

template <typename T, int NDim, typename Cfg>
Status BackwardWeight<T, NDim, Cfg>::run(const Problem& problem, const Args& args, void* workspace,
                                         std::size_t workspace_bytes, hipStream_t stream) {
  bool direct = false;
  typename Direct::Plan plan;
  HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args, &direct, &plan));
  if (const int groups = packed_groups(problem, args); groups > 1) {
    HIPGRAD_RETURN_IF_ERROR(check_workspace(workspace_size(problem), workspace, workspace_bytes));
    return run_packed(problem, args, groups, workspace, workspace_bytes, stream);
  }
  if (direct) {
    HIPGRAD_RETURN_IF_ERROR(check_workspace(plan.workspace, workspace, workspace_bytes));
    if (reinterpret_cast<std::uintptr_t>(workspace) % alignof(float) != 0)
      return Status::invalid_argument("the workspace must be aligned to 4 bytes (it holds fp32 sums)");
    return direct::launch_backward_weight(plan, args.x, args.dy, args.dw, static_cast<float*>(workspace), stream);
  }
  const BoxGeometry geometry = box_geometry(problem);
  HIPGRAD_RETURN_IF_ERROR(check_workspace(required_workspace(problem, geometry), workspace, workspace_bytes));
  bool boxes = false;
  HIPGRAD_RETURN_IF_ERROR(box_choice(problem, args, geometry, &boxes));
  if (boxes) return Boxes::run(problem, args.x, args.dy, args.dw, geometry, workspace, stream);
  return channels_contiguous(problem) ? run_splits<true>(problem, args, workspace, workspace_bytes, stream)
                                      : run_splits<false>(problem, args, workspace, workspace_bytes, stream);
}

template <typename T, int NDim, typename Cfg>
template <bool kVectors>
Status BackwardWeight<T, NDim, Cfg>::run_splits(const Problem& problem, const Args& args, void* workspace,
                                                std::size_t workspace_bytes, hipStream_t stream) {
  const int splits = splits_for<kVectors>(problem);
  float* split_sums =
      splits > 1
          ? reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + split_sums_offset<kVectors>(problem))
          : nullptr;
  using Launcher = LauncherOf<kVectors>;
  const auto problems =
      detail::backward_weight_sub_problems<T, NDim, kVectors>(problem, args.x, args.dy, args.dw, splits, split_sums);
  const gemm::GroupedGemmPlan plan =
      Launcher::plan(problems.data(), static_cast<int>(problems.size()), request_of(problem), current_device_info());
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  HIPGRAD_RETURN_IF_ERROR(
      Launcher::launch(plan, problems.data(), static_cast<int>(problems.size()), workspace, workspace_bytes, stream));
  if (splits == 1) return Status::ok();
  return gemm::launch_split_k_reduction(split_sums, splits, detail::dw_store<T, NDim, kVectors>(problem, args.dw),
                                        stream);
}

}  // namespace hipgrad::conv
