/// @file op_checks.hpp
/// @brief What the convolution ops check and ask of the tile GEMM alike: the arguments (the
///        problem, null pointers, TF32 on fp32 only, an output whose strides alias or that
///        overlaps an input), the GEMM request of the problem's types and algorithm, and the channels a
///        tap takes in the GEMM.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/direct/heuristics.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/device/launcher.hpp"

namespace hipgrad::conv::detail {

/// One tensor of an op's arguments: its pointer, lengths and strides (logical order), and name.
struct ArgumentTensor {
  const void* data;
  std::vector<Index> lengths;
  const std::vector<Index>& strides;
  const char* name;
};

/// Bytes a tensor of T spans from its pointer (Problem::validate() bounds them).
template <typename T, int NDim>
std::size_t tensor_bytes(const ArgumentTensor& t) {
  return static_cast<std::size_t>(Problem<NDim>::element_space(t.lengths, t.strides)) * sizeof(T);
}

/// ok, or invalid_argument naming what is wrong with `problem` and the tensors: `output` written
/// whole by the op, `first` and `second` read.
template <typename T, int NDim>
Status check_op_arguments(const Problem<NDim>& problem, const ArgumentTensor& first, const ArgumentTensor& second,
                          const ArgumentTensor& output) {
  HIPGRAD_RETURN_IF_ERROR(problem.validate());
  if (!first.data || !second.data || !output.data) {
    return Status::invalid_argument(std::string(first.name) + ", " + second.name + " and " + output.name +
                                    " must not be null");
  }
  if (problem.allow_tf32 && !std::is_same_v<T, float>) {
    return Status::invalid_argument(std::string("allow_tf32 applies to fp32 only, the data are ") + type_name<T>());
  }
  if (strides_alias(output.lengths, output.strides)) {
    return Status::invalid_argument(std::string(output.name) + "'s strides " + lengths_to_string(output.strides) +
                                    " make two of its elements share memory");
  }
  const MemoryRange outputs[] = {{output.data, tensor_bytes<T, NDim>(output), output.name, sizeof(T)}};
  const MemoryRange inputs[] = {{first.data, tensor_bytes<T, NDim>(first), first.name, sizeof(T)},
                                {second.data, tensor_bytes<T, NDim>(second), second.name, sizeof(T)}};
  return check_memory_ranges(outputs, inputs);
}

/// not_supported where a launch would have more sub-problems than the host table of an op may
/// hold (2^24: a few GB of host memory), so that an absurd group count is a status, not an
/// allocation failure.
inline Status check_sub_problem_count(Index count) {
  constexpr Index kLimit = Index{1} << 24;
  if (count > kLimit) {
    return Status::not_supported(std::to_string(count) +
                                 " sub-problems (groups times phases or splits), more than 2^24");
  }
  return Status::ok();
}

/// not_supported where `groups` × `splits` sub-problems exceed check_sub_problem_count's limit or
/// the splits' fp32 sums (splits × groups × `elements` each) would pass 2^62 bytes.
inline Status check_split_sums(Index groups, int splits, Index elements) {
  HIPGRAD_RETURN_IF_ERROR(check_sub_problem_count(groups * splits));
  if (splits > 1 && groups * elements > (Index{1} << 60) / splits) {
    return Status::not_supported("the splits' fp32 sums would take more than 2^62 bytes");
  }
  return Status::ok();
}

/// The tile GEMM's forced path for an algorithm (none for kAuto, nor for kTmaBoxes and kDirect,
/// which no tile GEMM launcher runs, nor for kUnfold and kStaged, whose GEMMs take the launcher's
/// choice).
inline std::optional<gemm::Path> forced_gemm_path(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kGather: return gemm::Path::kGather;
    case Algorithm::kMatrix: return gemm::Path::kMatrix;
    case Algorithm::kSimt: return gemm::Path::kSimt;
    case Algorithm::kTmaBoxes:
    case Algorithm::kDirect:
    case Algorithm::kUnfold:
    case Algorithm::kStaged:
    case Algorithm::kAuto: break;
  }
  return std::nullopt;
}

/// The GEMM request of a problem of T: matrix units for 16-bit data and TF32, the forced path.
template <typename T, int NDim>
gemm::TileGemmRequest gemm_request(const Problem<NDim>& problem) {
  gemm::TileGemmRequest request;
  request.matrix_units = !std::is_same_v<T, float> || problem.allow_tf32;
  request.forced = forced_gemm_path(problem.algorithm);
  return request;
}

/// Channels per tap in either op's GEMM (backward-data's K, backward-weight's C): rounded up to a
/// 16-byte vector where vectors run.
template <typename T, bool kVectors>
Index padded_channels(Index channels) {
  return kVectors ? round_up(channels, static_cast<Index>(16 / sizeof(T))) : channels;
}

/// A call's choice of a path (the box path, the direct kernels) from one evaluation of
/// `path_status()`: where it `may` run, *takes is whether it does; where it is `forced` and
/// cannot, the reason (kAuto then takes another path).
template <typename PathStatus>
Status choose_path(bool may, bool forced, PathStatus&& path_status, bool* takes) {
  *takes = false;
  if (!may) return Status::ok();
  const Status status = path_status();
  if (forced) HIPGRAD_RETURN_IF_ERROR(status);
  *takes = status.is_ok();
  return Status::ok();
}

/// A call's choice of the direct kernels (forced, or kAuto's direct::auto_takes_direct for T)
/// from one evaluation of `plan_status()`, as choose_path.
template <typename T, int NDim, typename PlanStatus>
Status choose_direct_path(const Problem<NDim>& problem, bool channels_contiguous, PlanStatus&& plan_status,
                          bool* direct) {
  const bool forced = problem.algorithm == Algorithm::kDirect;
  return choose_path(forced || direct::auto_takes_direct<T>(problem, channels_contiguous), forced, plan_status, direct);
}

}  // namespace hipgrad::conv::detail
