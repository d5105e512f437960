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
/// An implicit GEMM per group and stride phase (backward_data/stride_phases.hpp: the dx positions of
/// one residue class per dimension meet the taps of one class only, so nothing multiplies an
/// inserted zero), all of them sub-problems of one grouped launch of the tile GEMM; phases that
/// meet no tap are written as zeros. A 1×1 filter with unit strides and no padding in one group is
/// one plain GEMM (the TMA kernel where aligned). Where dy's and w's channels are contiguous, operand vectors
/// run along them (16 bytes on the matrix paths), and on sm_90a fp16/bf16 take the box path
/// (dy and w copied by TMA boxes, backward_data/boxes.hpp); elsewhere elements are read one
/// at a time on the SIMT path. Each dx element is one thread's sum in a fixed order: results are bitwise
/// repeatable. Groups of few channels take the direct kernels instead (direct/, Algorithm::kDirect;
/// kAuto's rule: direct/heuristics.hpp), or, under kAuto, several of them packed into one
/// block-diagonal group on the box path (common/packed_groups.hpp). Under kAuto a group whose C
/// no 16-byte vector holds whole (a stem's 3 channels) is unfolded: Y = dy · w's columns in one
/// dense GEMM, folded into dx (common/unfold.hpp). Under kAuto, dy and w that would take the gather
/// GEMM otherwise (NCHW, odd channel counts) are staged: copied channels-last with whole-vector
/// channels into the workspace, the op run there, dx copied back (common/staged.hpp).
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/conv/backward_data/heuristics.hpp"
#include "hipgrad/ops/conv/backward_data/launch.hpp"
#include "hipgrad/ops/conv/backward_data/plan.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/packed_groups.hpp"
#include "hipgrad/ops/conv/common/packed_groups_kernels.hpp"
#include "hipgrad/ops/conv/common/staged.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::conv {

/// T: dy, w and dx (float, half, bfloat16). NDim: 1, 2 or 3 spatial dimensions. Cfg: the matrix
/// paths' tiles; NarrowCfg those of problems of at most NarrowCfg::kBlockN channels per group;
/// ThinCfg the box path's of at most ThinCfg::kBlockN.
template <typename T, int NDim, typename Cfg = gemm::DefaultConfigFor<T>, typename NarrowCfg = gemm::NarrowConfigFor<T>,
          typename ThinCfg = gemm::ThinConfigFor<T>>
class BackwardData {
  static_assert(is_storage_type_v<T>, "convolution data must be float, half or bfloat16");
  using Tiles = detail::DataTiles<Cfg, NarrowCfg, ThinCfg>;
  using Planner = detail::DataPlanner<T, NDim, Tiles>;
  using Route = detail::DataRoute;

 public:
  using Problem = conv::Problem<NDim>;

  struct Args {
    const T* dy = nullptr;  ///< [G, N, K, output spatial...] at problem.output_strides
    const T* w = nullptr;   ///< [G, K, C, filter...] at problem.weight_strides
    T* dx = nullptr;        ///< [G, N, C, input spatial...] at problem.input_strides; written whole
  };

  static Status can_implement(const Problem& problem, const Args& args) {
    HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args));
    return plan_of(problem, args).status;
  }

  /// The launch's table of sub-problems (one per group and stride phase with dx positions), and
  /// for the box path its tensor maps: where kAuto may take the box path, the larger of the two;
  /// where it may pack groups, the packed weight and the packed problem's, if larger.
  static std::size_t workspace_size(const Problem& problem) {
    return problem.validate().is_ok() ? plan_of(problem, Args{}).workspace : 0;
  }

  /// Defined after the class (not inline), so that an `extern template` declaration of the op
  /// keeps its kernels out of the translation units that only call it.
  static Status run(const Problem& problem, const Args& args, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream);

  /// e.g. "conv2d_bwd_data_fp16_vectors_grouped_wgmma_128x256x64_w2x4_s4": the operands' reads
  /// (vectors along contiguous channels, elements, TMA boxes, packed groups, the direct kernels,
  /// or a plain GEMM of a 1×1 problem) and the kernel run() takes.
  static std::string name(const Problem& problem, const Args& args = Args{}) {
    if (!problem.validate().is_ok()) return "conv_bwd_data_invalid";
    const std::string op =
        "conv" + std::to_string(NDim) + "d_bwd_data_" + type_name<T>() + (problem.allow_tf32 ? "_tf32" : "");
    const typename Planner::Plan plan = plan_of(problem, args);
    switch (plan.route) {
      case Route::kPacked: {
        const std::string packed = name(detail::packed_problem(problem, plan.packed_groups), packed_args(args));
        return op + "_packed" + std::to_string(plan.packed_groups) + packed.substr(op.size());
      }
      case Route::kStaged: {
        const detail::StagedLayout<NDim> at = detail::staged_layout<T>(problem);
        const std::string staged = name(at.problem, staged_args(at, args));
        return op + "_staged" + staged.substr(op.size());
      }
      case Route::kDirect: return op + "_direct_" + direct::data_plan_name(plan.direct);
      case Route::kUnfolded: return op + "_unfolded_gemm_" + gemm::tile_gemm_kernel_name<Cfg>(plan.unfolded);
      case Route::kBoxes:
        return Tiles::with_box_tile(plan.tile, [&](auto cfg) {
          gemm::TileGemmPlan tma;
          tma.path = gemm::Path::kTma;
          tma.wgmma = true;
          return op + "_boxes_grouped_" + gemm::tile_gemm_kernel_name<decltype(cfg)>(tma);
        });
      case Route::kPlainGemm: return op + "_gemm_" + gemm::tile_gemm_kernel_name<Cfg>(plan.plain);
      case Route::kGathered: break;
    }
    return Planner::with_gather_launcher(plan, [&](auto vectors, auto launcher) {
      return op + (vectors ? "_vectors_" : "_elements_") + decltype(launcher)::kernel_name(plan.gathered);
    });
  }

 private:
  static typename Planner::Plan plan_of(const Problem& problem, const Args& args) {
    return Planner::find(problem, args.dy, args.w, args.dx);
  }

  static Status check_arguments(const Problem& problem, const Args& args) {
    const ConvParams<NDim>& p = problem.params;
    return detail::check_op_arguments<T, NDim>(problem, {args.dy, p.output_lengths(), problem.output_strides, "dy"},
                                               {args.w, p.weight_lengths(), problem.weight_strides, "w"},
                                               {args.dx, p.input_lengths(), problem.input_strides, "dx"});
  }

  /// The packed problem's arguments before the workspace is known (the packed weight's stand-in).
  static Args packed_args(const Args& args) { return {args.dy, detail::packed_weight_stand_in<T>(), args.dx}; }

  /// The staged problem's arguments in `workspace` (the caller's where a tensor is not copied).
  static Args staged_args(const detail::StagedLayout<NDim>& at, const Args& args, void* workspace) {
    using detail::StagedTensor;
    return {detail::staged_tensor(at, StagedTensor::kOutput, args.dy, workspace),
            detail::staged_tensor(at, StagedTensor::kWeight, args.w, workspace),
            detail::staged_tensor(at, StagedTensor::kInput, args.dx, workspace)};
  }
  /// The same before the workspace is known.
  static Args staged_args(const detail::StagedLayout<NDim>& at, const Args& args) {
    return staged_args(at, args, const_cast<unsigned char*>(detail::workspace_stand_in<unsigned char>()));
  }

  /// dy and w staged in the workspace, the op on the staged problem, then dx copied out of its
  /// staged form.
  static Status run_staged(const Problem& problem, const Args& args, void* workspace, std::size_t bytes,
                           hipStream_t stream) {
    using detail::StagedTensor;
    const detail::StagedLayout<NDim> at = detail::staged_layout<T>(problem);
    const Args staged = staged_args(at, args, workspace);
    const detail::StagedCopy<T> in[2] = {{StagedTensor::kOutput, args.dy, const_cast<T*>(staged.dy)},
                                         {StagedTensor::kWeight, args.w, const_cast<T*>(staged.w)}};
    return detail::run_staged<T>(
        problem, at, in, {StagedTensor::kInput, staged.dx, args.dx}, workspace, bytes, stream,
        [&](void* inner, std::size_t inner_bytes) { return run(at.problem, staged, inner, inner_bytes, stream); });
  }

  /// The packed weight spread into the workspace, then the op on the packed problem.
  static Status run_packed(const Problem& problem, const Args& args, int groups, void* workspace, std::size_t bytes,
                           hipStream_t stream) {
    const std::size_t weight_bytes = detail::packed_weight_bytes<T>(problem, groups);
    detail::PackedWeightParams<T, NDim> spread = detail::packed_weight_params<T, NDim>(problem, groups, true);
    T* w = detail::packed_weight_in<T>(workspace);
    spread.from = args.w, spread.to = w;
    HIPGRAD_RETURN_IF_ERROR(detail::launch_mapped_copy(spread, stream));
    return run(detail::packed_problem(problem, groups), Args{args.dy, w, args.dx},
               static_cast<unsigned char*>(workspace) + weight_bytes, bytes - weight_bytes, stream);
  }
};

template <typename T, int NDim, typename Cfg, typename NarrowCfg, typename ThinCfg>
Status BackwardData<T, NDim, Cfg, NarrowCfg, ThinCfg>::run(const Problem& problem, const Args& args, void* workspace,
                                                           std::size_t workspace_bytes, hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args));
  const typename Planner::Plan plan = plan_of(problem, args);
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  if (plan.route == Route::kDirect)
    return detail::launch_data_plan<T, NDim, Tiles>(plan, problem, args.dy, args.w, args.dx, nullptr, 0, stream);
  HIPGRAD_RETURN_IF_ERROR(check_workspace(plan.workspace, workspace, workspace_bytes));
  if (plan.route == Route::kPacked)
    return run_packed(problem, args, plan.packed_groups, workspace, workspace_bytes, stream);
  if (plan.route == Route::kStaged) return run_staged(problem, args, workspace, workspace_bytes, stream);
  return detail::launch_data_plan<T, NDim, Tiles>(plan, problem, args.dy, args.w, args.dx, workspace, workspace_bytes,
                                                  stream);
}

}  // namespace hipgrad::conv
