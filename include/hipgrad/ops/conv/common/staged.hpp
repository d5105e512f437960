/// @file staged.hpp
/// @brief Host: the staged route, for problems whose tensors the fast paths cannot read as given
///        (PyTorch's NCHW, channel counts no 16-byte vector divides): the operands are copied
///        into the workspace channels-last (NHWGC, GKYXC) with C and K padded with zeros to whole
///        vectors, the op runs there on the tensor cores, and the result is copied back, its
///        padding dropped (stage_kernels.hpp copies). The copies cost two passes over each
///        activation; the gather GEMM they replace reads elements one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/packed_groups.hpp"
#include "hipgrad/ops/conv/common/plain_gemm.hpp"
#include "hipgrad/ops/conv/common/stage_kernels.hpp"
#include "hipgrad/ops/conv/common/unfold.hpp"
#include "hipgrad/ops/conv/common/workspace_piece.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::detail {

/// The tensors of a convolution, as Problem names their strides.
enum class StagedTensor { kInput, kWeight, kOutput };

/// Why the staged route cannot run `problem` (null where it can): the matrix paths' types (16-bit
/// data or TF32) and spatial dimensions that merge into one stride in each tensor.
template <typename T, int NDim>
const char* stage_blocker(const Problem<NDim>& problem) {
  if (sizeof(T) == 4 && !problem.allow_tf32) return "exact fp32 runs no matrix path to stage for";
  const ConvParams<NDim>& p = problem.params;
  if (!merged_position_stride(p.input_lengths(), problem.input_strides) ||
      !merged_position_stride(p.output_lengths(), problem.output_strides) ||
      !merged_position_stride(p.weight_lengths(), problem.weight_strides)) {
    return "a tensor's spatial dimensions do not follow each other at one stride";
  }
  return nullptr;
}

/// Whether a tensor of `problem` is copied (else the staged problem reads or writes it where the
/// caller has it: channels-last, whole vectors, nothing padded).
template <typename T, int NDim>
bool is_staged(const Problem<NDim>& problem, StagedTensor tensor) {
  const bool c = problem.params.C % kVector16<T> == 0, k = problem.params.K % kVector16<T> == 0;
  switch (tensor) {
    case StagedTensor::kInput: return !(problem.input_strides[2] == 1 && c);
    case StagedTensor::kOutput: return !(problem.output_strides[2] == 1 && k);
    case StagedTensor::kWeight: break;
  }
  return !(problem.weight_strides[2] == 1 && c && k);
}

/// Whether `problem`'s tensors are channels-last in whole 16-byte vectors of T (the box path's
/// and the vector reads' form): none is copied. Where they are not, kAuto may stage them.
template <typename T, int NDim>
bool channels_in_whole_vectors(const Problem<NDim>& problem) {
  return !is_staged<T>(problem, StagedTensor::kInput) && !is_staged<T>(problem, StagedTensor::kOutput) &&
         !is_staged<T>(problem, StagedTensor::kWeight);
}

/// The staged problem: C and K rounded up to whole vectors, each copied tensor channels-last
/// packed (NHWGC, GKYXC), the others at the caller's strides; kAuto routes it.
template <typename T, int NDim>
Problem<NDim> staged_problem(const Problem<NDim>& problem) {
  ConvParams<NDim> p = problem.params;
  p.C = padded_channels<T, true>(p.C), p.K = padded_channels<T, true>(p.K);
  Problem<NDim> staged = Problem<NDim>::packed(p, ConvLayout::kNHWGC);
  if (!is_staged<T>(problem, StagedTensor::kInput)) staged.input_strides = problem.input_strides;
  if (!is_staged<T>(problem, StagedTensor::kOutput)) staged.output_strides = problem.output_strides;
  if (!is_staged<T>(problem, StagedTensor::kWeight)) staged.weight_strides = problem.weight_strides;
  staged.allow_tf32 = problem.allow_tf32;
  staged.split_k = problem.split_k;
  return staged;
}

/// Where the copied tensors lie in the workspace, from its first 256-byte-aligned byte (each
/// 256-byte aligned; none for a tensor not copied), and the staged problem's own workspace after
/// them.
template <int NDim>
struct StagedLayout {
  Problem<NDim> problem;
  bool input_staged = true, weight_staged = true, output_staged = true;
  std::size_t input = 0, weight = 0, output = 0, inner = 0;
};

template <typename T, int NDim>
StagedLayout<NDim> staged_layout(const Problem<NDim>& problem) {
  StagedLayout<NDim> at;
  at.problem = staged_problem<T>(problem);
  at.input_staged = is_staged<T>(problem, StagedTensor::kInput);
  at.weight_staged = is_staged<T>(problem, StagedTensor::kWeight);
  at.output_staged = is_staged<T>(problem, StagedTensor::kOutput);
  const ConvParams<NDim>& p = at.problem.params;
  const auto bytes = [](bool staged, const std::vector<Index>& lengths) {
    std::size_t n = staged ? sizeof(T) : 0;
    for (Index l : lengths) n *= static_cast<std::size_t>(l);
    return round_up(n, std::size_t{256});
  };
  at.weight = bytes(at.input_staged, p.input_lengths());
  at.output = at.weight + bytes(at.weight_staged, p.weight_lengths());
  at.inner = at.output + bytes(at.output_staged, p.output_lengths());
  return at;
}

/// Workspace bytes of the staged route around a staged problem's own `inner` bytes.
template <int NDim>
std::size_t staged_workspace(const StagedLayout<NDim>& at, std::size_t inner) {
  return at.inner + inner + 256;
}

/// The copy of one tensor between the caller's strides and its staged form (from and to unset).
template <typename T, int NDim>
StageParams<T> stage_params(const Problem<NDim>& problem, const Problem<NDim>& staged, StagedTensor tensor,
                            bool spread) {
  const ConvParams<NDim>& p = problem.params;
  const ConvParams<NDim>& s = staged.params;
  const bool input = tensor == StagedTensor::kInput, weight = tensor == StagedTensor::kWeight;
  const std::vector<Index> lengths = input ? p.input_lengths() : weight ? p.weight_lengths() : p.output_lengths();
  const std::vector<Index> staged_lengths = input    ? s.input_lengths()
                                            : weight ? s.weight_lengths()
                                                     : s.output_lengths();
  const std::vector<Index>& strides = input    ? problem.input_strides
                                      : weight ? problem.weight_strides
                                               : problem.output_strides;
  const std::vector<Index>& staged_strides = input    ? staged.input_strides
                                             : weight ? staged.weight_strides
                                                      : staged.output_strides;
  StageParams<T> c;
  c.spread = spread;
  c.a = staged_lengths[0], c.b = staged_lengths[1], c.channels = staged_lengths[2];
  c.b_used = lengths[1], c.channels_used = lengths[2];
  for (std::size_t d = 3; d < lengths.size(); ++d) c.positions *= lengths[d];
  c.caller[0] = strides[0], c.caller[1] = strides[1], c.caller[2] = strides[2];
  c.caller[3] = *merged_position_stride(lengths, strides);
  c.staged[0] = staged_strides[0], c.staged[1] = staged_strides[1];
  c.staged[2] = *merged_position_stride(staged_lengths, staged_strides);
  c.caller_along_channels = c.positions == 1 || c.caller[2] <= c.caller[3];
  // Vectors along the walked dimension where it is contiguous and every other stride keeps a
  // run's start on a whole vector (the pointer's alignment is the launch's to check).
  const std::int64_t run = kVector16<T>;
  const std::int64_t across = c.caller_along_channels ? c.caller[3] : c.caller[2];
  c.caller_vectors = (c.caller_along_channels ? c.caller[2] : c.caller[3]) == 1 && across % run == 0 &&
                     c.caller[0] % run == 0 && c.caller[1] % run == 0;
  c.channel_shift = c.channels >= 32 ? 5 : c.channels >= 16 ? 4 : 3;
  c.channel_tiles = ceil_div<std::int64_t>(c.channels, std::int64_t{1} << c.channel_shift);
  c.position_tiles = ceil_div<std::int64_t>(c.positions, std::int64_t{kStageTile} >> c.channel_shift);
  c.tiles = c.a * c.b * c.channel_tiles * c.position_tiles;
  return c;
}

/// The tensor the staged problem takes for the caller's `caller`: its copy in the workspace, or
/// `caller` where it is not copied.
template <typename P, int NDim>
P* staged_tensor(const StagedLayout<NDim>& at, StagedTensor tensor, P* caller, void* workspace) {
  using T = std::remove_const_t<P>;
  switch (tensor) {
    case StagedTensor::kInput: return at.input_staged ? workspace_piece<T>(workspace, at.input) : caller;
    case StagedTensor::kOutput: return at.output_staged ? workspace_piece<T>(workspace, at.output) : caller;
    case StagedTensor::kWeight: break;
  }
  return at.weight_staged ? workspace_piece<T>(workspace, at.weight) : caller;
}

/// Copies `tensor` between the caller's `from` and the staged `to` (spread), or back; nothing
/// where the tensor is not copied.
template <typename T, int NDim>
Status stage_tensor(const StagedLayout<NDim>& at, const Problem<NDim>& problem, StagedTensor tensor, bool spread,
                    const T* from, T* to, int multiprocessors, hipStream_t stream) {
  if (static_cast<const void*>(from) == static_cast<const void*>(to)) return Status::ok();
  StageParams<T> c = stage_params<T>(problem, at.problem, tensor, spread);
  c.from = from, c.to = to;
  c.caller_vectors = c.caller_vectors && reinterpret_cast<std::uintptr_t>(spread ? from : to) % 16 == 0;
  return launch_stage(c, multiprocessors, stream);
}

/// Whether kAuto stages `problem` ahead of the direct kernels: copied tensors whose groups of at
/// least one whole vector of channels each the staged problem packs onto the tensor cores
/// (ResNeXt's and RegNet's groups in NCHW). Fewer channels would pad the groups' work to twice
/// and more, and stay with the direct kernels.
template <typename T, int NDim>
bool stages_before_direct(const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  return problem.algorithm == Algorithm::kAuto && stage_blocker<T>(problem) == nullptr &&
         !channels_in_whole_vectors<T>(problem) && p.C >= kVector16<T> && p.K >= kVector16<T> &&
         packed_group_count<T>(staged_problem<T>(problem)) > 1;
}

/// Whether a call may take the staged route: forced where it runs, or kAuto's rule for tensors not
/// channels-last in whole vectors that neither the direct kernels (`direct`: whether they take
/// it; stages_before_direct overrides them), packed groups nor unfolded windows take.
template <typename T, int NDim>
bool may_stage(const Problem<NDim>& problem, bool direct) {
  if (stage_blocker<T>(problem) != nullptr) return false;
  return problem.algorithm == Algorithm::kStaged ||
         (problem.algorithm == Algorithm::kAuto && !channels_in_whole_vectors<T>(problem) &&
          (!direct || stages_before_direct<T>(problem)) && packed_group_count<T>(problem) < 2 && !unfolds<T>(problem));
}

/// A call's choice of the staged route (`may`: may_stage), *staged where it takes it: forced, or
/// under kAuto where the staged problem's plan, find(staged layout), takes a faster path than the
/// gather GEMM (reading vectors where `vectors`) the problem would — packed groups where
/// `packed_only` (ahead of the direct kernels); not ok (the reason) where it is forced and cannot run.
template <typename T, int NDim, typename Find>
Status choose_staged(const Problem<NDim>& problem, bool may, bool vectors, Find&& find, bool* staged,
                     bool packed_only = false) {
  const bool forced = problem.algorithm == Algorithm::kStaged;
  const auto status = [&] {
    if (const char* blocker = stage_blocker<T>(problem))
      return Status::not_supported(std::string("algorithm staged cannot run: ") + blocker);
    const auto inner = find(staged_layout<T>(problem));
    HIPGRAD_RETURN_IF_ERROR(inner.status);
    using Route = decltype(inner.route);
    const bool vector_gather_pays = forced || (!vectors && inner.vectors);
    if (inner.route == Route::kGathered && !vector_gather_pays)
      return Status::not_supported("the staged problem takes the same gather GEMM");
    if (packed_only && !forced && inner.route != Route::kPacked)
      return Status::not_supported("the staged problem packs no groups");
    return Status::ok();
  };
  return choose_path(forced || may, forced, status, staged);
}

/// A tensor an op copies: the caller's `from` into the staged `to`, or (the output) back.
template <typename T>
struct StagedCopy {
  StagedTensor tensor;
  const T* from;
  T* to;
};

/// The staged route's launches: `in` copied into the workspace, run(the staged problem's
/// workspace, its bytes) on the staged problem, `out` copied back.
template <typename T, int NDim, typename Run>
Status run_staged(const Problem<NDim>& problem, const StagedLayout<NDim>& at, const StagedCopy<T> (&in)[2],
                  const StagedCopy<T>& out, void* workspace, std::size_t bytes, hipStream_t stream, Run&& run) {
  const int sms = current_device_info().multiprocessors;
  for (const StagedCopy<T>& c : in)
    HIPGRAD_RETURN_IF_ERROR(stage_tensor(at, problem, c.tensor, true, c.from, c.to, sms, stream));
  auto* inner = workspace_piece<unsigned char>(workspace, at.inner);
  const auto used = static_cast<std::size_t>(inner - static_cast<unsigned char*>(workspace));
  HIPGRAD_RETURN_IF_ERROR(run(inner, bytes - used));
  return stage_tensor(at, problem, out.tensor, false, out.from, out.to, sms, stream);
}

}  // namespace hipgrad::conv::detail
