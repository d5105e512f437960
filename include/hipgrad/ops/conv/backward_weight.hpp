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
/// An implicit GEMM per group (backward_weight/sub_problems.hpp: M = K, N = taps × C, its K the
/// N × Π O output positions), split along those positions (problem.split_k, 0: the op's choice
/// for the problem and the GPU). All groups and splits are sub-problems of one grouped launch of
/// the tile GEMM. With one split the GEMM stores dw; with several each split stores its fp32
/// sums in the workspace and a reduction adds them in split order and converts once: no atomics,
/// no caller zeroing, the same bits on every run. Where x's and dy's channels are contiguous,
/// operand vectors run along them (16 bytes on the matrix paths), and on sm_90a fp16/bf16 and
/// TF32 take the box path (x and dy copied by TMA boxes of output positions,
/// backward_weight/boxes.hpp);
/// elsewhere elements are read one at a time on the SIMT path. Groups of few channels take the
/// direct kernels instead (direct/, Algorithm::kDirect; kAuto's rule: direct/heuristics.hpp), or,
/// under kAuto, several of them packed into one block-diagonal group on the box path, whose dw
/// diagonal blocks are copied out (common/packed_groups.hpp). Under kAuto a group whose C no
/// 16-byte vector holds whole (a stem's 3 channels) is unfolded: x's windows become the columns
/// of one dense GEMM (common/unfold.hpp). Under kAuto, x and dy that would take the gather GEMM
/// otherwise (NCHW, odd channel counts) are staged: copied channels-last with whole-vector
/// channels into the workspace, the op run there into a staged dw, copied out (common/staged.hpp).
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/conv/backward_weight/launch.hpp"
#include "hipgrad/ops/conv/backward_weight/plan.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/packed_groups.hpp"
#include "hipgrad/ops/conv/common/packed_groups_kernels.hpp"
#include "hipgrad/ops/conv/common/staged.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::conv {

/// T: x, dy and dw (float, half, bfloat16). NDim: 1, 2 or 3 spatial dimensions. Cfg: the matrix
/// paths' tiles.
template <typename T, int NDim, typename Cfg = gemm::DefaultConfigFor<T>>
class BackwardWeight {
  static_assert(is_storage_type_v<T>, "convolution data must be float, half or bfloat16");
  using Planner = detail::WeightPlanner<T, NDim, Cfg>;
  using Route = detail::WeightRoute;

 public:
  using Problem = conv::Problem<NDim>;

  struct Args {
    const T* x = nullptr;   ///< [G, N, C, input spatial...] at problem.input_strides
    const T* dy = nullptr;  ///< [G, N, K, output spatial...] at problem.output_strides
    T* dw = nullptr;        ///< [G, K, C, filter...] at problem.weight_strides; written whole
  };

  static Status can_implement(const Problem& problem, const Args& args) {
    HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args));
    return plan_of(problem, args).status;
  }

  /// The launch's table of sub-problems (one per group and split), and with several splits their
  /// fp32 sums (splits × G × K × taps × C, C padded to the vector, or to a 128-byte panel on the
  /// box path, whose tensor maps the workspace holds too): where kAuto may take the box path, the
  /// larger of the two; where it may pack groups, the packed dw and the packed problem's, if larger.
  static std::size_t workspace_size(const Problem& problem) {
    return problem.validate().is_ok() ? plan_of(problem, Args{}).workspace : 0;
  }

  /// Defined after the class (not inline), so that an `extern template` declaration of the op
  /// keeps its kernels out of the translation units that only call it.
  static Status run(const Problem& problem, const Args& args, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream);

  /// e.g. "conv2d_bwd_weight_fp16_vectors_grouped_wgmma_gather_128x256x64_w2x4_s4_split4": the
  /// operands' reads (TMA boxes, vectors along contiguous channels, elements, packed groups, the
  /// direct kernels), the kernel, the splits.
  static std::string name(const Problem& problem, const Args& args = Args{}) {
    if (!problem.validate().is_ok()) return "conv_bwd_weight_invalid";
    const std::string op =
        "conv" + std::to_string(NDim) + "d_bwd_weight_" + type_name<T>() + (problem.allow_tf32 ? "_tf32" : "");
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
      case Route::kDirect: return op + "_direct_" + direct::weight_plan_name(plan.direct);
      case Route::kUnfolded:
        return op + "_unfolded_gemm_" + gemm::tile_gemm_kernel_name<Cfg>(plan.unfolded) + "_split" +
               std::to_string(plan.splits);
      case Route::kBoxes:
        return Planner::Boxes::with_config(problem, [&](auto config) {
          gemm::TileGemmPlan tma;
          tma.path = gemm::Path::kTma;
          tma.wgmma = true;
          return op + "_boxes_grouped_" + gemm::tile_gemm_kernel_name<decltype(config)>(tma) + "_split" +
                 std::to_string(plan.splits);
        });
      case Route::kGathered: break;
    }
    return Planner::with_gather_launcher(plan, [&](auto vectors, auto launcher) {
      using Launcher = decltype(launcher);
      const auto problems = detail::backward_weight_sub_problems<T, NDim, decltype(vectors)::value>(
          problem, args.x, args.dy, args.dw, plan.splits, nullptr);
      const gemm::GroupedGemmPlan gathered = Launcher::plan(problems.data(), static_cast<int>(problems.size()),
                                                            detail::gemm_request<T>(problem), current_device_info());
      return op + (vectors ? "_vectors_" : "_elements_") + Launcher::kernel_name(gathered) + "_split" +
             std::to_string(plan.splits);
    });
  }

  /// The splits run() takes for `problem` and `args` on the current device: problem.split_k, or
  /// the op's choice (the output tiles over all groups against the multiprocessors,
  /// detail::auto_splits); 0 for a problem that does not validate.
  static int splits_of(const Problem& problem, const Args& args = Args{}) {
    if (!problem.validate().is_ok()) return 0;
    const typename Planner::Plan plan = plan_of(problem, args);
    if (plan.route == Route::kStaged) {
      const detail::StagedLayout<NDim> at = detail::staged_layout<T>(problem);
      return splits_of(at.problem, staged_args(at, args));
    }
    if (plan.route != Route::kPacked) return plan.splits;
    return splits_of(detail::packed_problem(problem, plan.packed_groups), packed_args(args));
  }

 private:
  static typename Planner::Plan plan_of(const Problem& problem, const Args& args) {
    return Planner::find(problem, args.x, args.dy, args.dw);
  }

  static Status check_arguments(const Problem& problem, const Args& args) {
    const ConvParams<NDim>& p = problem.params;
    return detail::check_op_arguments<T, NDim>(problem, {args.x, p.input_lengths(), problem.input_strides, "x"},
                                               {args.dy, p.output_lengths(), problem.output_strides, "dy"},
                                               {args.dw, p.weight_lengths(), problem.weight_strides, "dw"});
  }

  /// The packed problem's arguments before the workspace is known (the packed dw's stand-in).
  static Args packed_args(const Args& args) {
    return {args.x, args.dy, const_cast<T*>(detail::packed_weight_stand_in<T>())};
  }

  /// The staged problem's arguments in `workspace` (the caller's where a tensor is not copied).
  static Args staged_args(const detail::StagedLayout<NDim>& at, const Args& args, void* workspace) {
    using detail::StagedTensor;
    return {detail::staged_tensor(at, StagedTensor::kInput, args.x, workspace),
            detail::staged_tensor(at, StagedTensor::kOutput, args.dy, workspace),
            detail::staged_tensor(at, StagedTensor::kWeight, args.dw, workspace)};
  }
  /// The same before the workspace is known.
  static Args staged_args(const detail::StagedLayout<NDim>& at, const Args& args) {
    return staged_args(at, args, const_cast<unsigned char*>(detail::workspace_stand_in<unsigned char>()));
  }

  /// x and dy staged in the workspace, the op on the staged problem into a staged dw, then dw
  /// copied out of it.
  static Status run_staged(const Problem& problem, const Args& args, void* workspace, std::size_t bytes,
                           hipStream_t stream) {
    using detail::StagedTensor;
    const detail::StagedLayout<NDim> at = detail::staged_layout<T>(problem);
    const Args staged = staged_args(at, args, workspace);
    const detail::StagedCopy<T> in[2] = {{StagedTensor::kInput, args.x, const_cast<T*>(staged.x)},
                                         {StagedTensor::kOutput, args.dy, const_cast<T*>(staged.dy)}};
    return detail::run_staged<T>(
        problem, at, in, {StagedTensor::kWeight, staged.dw, args.dw}, workspace, bytes, stream,
        [&](void* inner, std::size_t inner_bytes) { return run(at.problem, staged, inner, inner_bytes, stream); });
  }

  /// The op on the packed problem into a packed dw in the workspace, then dw gathered from its
  /// diagonal blocks.
  static Status run_packed(const Problem& problem, const Args& args, int groups, void* workspace, std::size_t bytes,
                           hipStream_t stream) {
    const std::size_t weight_bytes = detail::packed_weight_bytes<T>(problem, groups);
    T* packed_dw = detail::packed_weight_in<T>(workspace);
    HIPGRAD_RETURN_IF_ERROR(run(detail::packed_problem(problem, groups), Args{args.x, args.dy, packed_dw},
                                static_cast<unsigned char*>(workspace) + weight_bytes, bytes - weight_bytes, stream));
    detail::PackedWeightParams<T, NDim> gather = detail::packed_weight_params<T, NDim>(problem, groups, false);
    gather.from = packed_dw, gather.to = args.dw;
    return detail::launch_mapped_copy(gather, stream);
  }
};

template <typename T, int NDim, typename Cfg>
Status BackwardWeight<T, NDim, Cfg>::run(const Problem& problem, const Args& args, void* workspace,
                                         std::size_t workspace_bytes, hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args));
  const typename Planner::Plan plan = plan_of(problem, args);
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  const std::size_t needed = plan.route == Route::kDirect ? plan.direct.workspace : plan.workspace;
  HIPGRAD_RETURN_IF_ERROR(check_workspace(needed, workspace, workspace_bytes));
  if (plan.route == Route::kPacked)
    return run_packed(problem, args, plan.packed_groups, workspace, workspace_bytes, stream);
  if (plan.route == Route::kStaged) return run_staged(problem, args, workspace, workspace_bytes, stream);
  return detail::launch_weight_plan<T, NDim, Cfg>(plan, problem, args.x, args.dy, args.dw, workspace, workspace_bytes,
                                                  stream);
}

}  // namespace hipgrad::conv
