/// @file bridge_common.hpp
/// @brief What the bridge_*.cu files share: the data type switch and one op call with its
///        workspace (nvcc only: includes hipgrad's types).
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "bridge.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"

namespace hipgrad_torch {

/// visit(T{}) with hipgrad's element type of `dtype`.
template <typename Visit>
hipgrad::Status with_dtype(DType dtype, Visit&& visit) {
  switch (dtype) {
    case DType::kFloat32: return visit(float{});
    case DType::kFloat16: return visit(hipgrad::half{});
    case DType::kBFloat16: return visit(hipgrad::bfloat16{});
  }
  return hipgrad::Status::not_supported("hipgrad takes float32, float16 and bfloat16 tensors");
}

/// Op::run(problem, args) with the workspace it asks for (run checks the call first).
template <typename Op, typename Problem, typename Args>
hipgrad::Status run_with_workspace(const Problem& problem, const Args& args, Workspace workspace, void* stream) {
  const std::size_t bytes = Op::workspace_size(problem);
  void* memory = bytes > 0 ? workspace.allocate(bytes, workspace.context) : nullptr;
  if (bytes > 0 && memory == nullptr) return hipgrad::Status::runtime_error("no workspace");
  return Op::run(problem, args, memory, bytes, static_cast<hipStream_t>(stream));
}

inline std::string message(const hipgrad::Status& status) {
  return status.is_ok() ? std::string() : status.to_string();
}

}  // namespace hipgrad_torch
