/// @file bridge_groupnorm.cu
/// @brief GroupNorm calls from PyTorch run through hipgrad::groupnorm (the kernels come from
///        instances/, compiled once into the extension).
#include <vector>

#include "bridge.hpp"
#include "bridge_common.hpp"
#include "groupnorm_instances.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"

namespace hipgrad_torch {
namespace {

namespace gn = hipgrad::groupnorm;

hipgrad::Status shape_of(const GroupNormCall& call, const std::int64_t* strides, const char* name,
                         gn::TensorShape* shape) {
  const std::vector<hipgrad::Index> lengths(call.lengths, call.lengths + call.rank);
  const std::vector<hipgrad::Index> at(strides, strides + call.rank);
  return gn::make_tensor_shape(lengths, at, name, shape);
}

/// visit(T{}, TParam{}) for the call's pair of types; not_supported for pairs hipgrad has none of.
template <typename Visit>
hipgrad::Status with_types(const GroupNormCall& call, Visit&& visit) {
  const bool same = call.param == call.data, fp32_param = call.param == DType::kFloat32;
  if (!same && !fp32_param)
    return hipgrad::Status::not_supported("GroupNorm's weight and bias must be float32 or the input's type");
  return with_dtype(call.data, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>)
      return visit(T{}, float{});
    else if (same)
      return visit(T{}, T{});
    else
      return visit(T{}, float{});
  });
}

}  // namespace

std::string group_norm_forward(const GroupNormCall& call, const void* x, const void* gamma, const void* beta, void* y,
                               float* mean, float* rstd, Workspace workspace, void* stream) {
  gn::ForwardProblem problem;
  hipgrad::Status status = shape_of(call, call.x_strides, "x", &problem.x);
  if (status.is_ok()) status = shape_of(call, call.y_strides, "y", &problem.y);
  if (!status.is_ok()) return status.to_string();
  problem.groups = call.groups;
  problem.epsilon = call.epsilon;
  problem.activation = call.silu ? gn::Activation::kSwish : gn::Activation::kIdentity;
  return message(with_types(call, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    using Op = gn::Forward<T, P>;
    const typename Op::Args args{static_cast<const T*>(x),
                                 static_cast<const P*>(gamma),
                                 static_cast<const P*>(beta),
                                 static_cast<T*>(y),
                                 mean,
                                 rstd};
    return run_with_workspace<Op>(problem, args, workspace, stream);
  }));
}

std::string group_norm_backward(const GroupNormCall& call, const void* dy, const void* x, const void* gamma,
                                const void* beta, const float* mean, const float* rstd, void* dx, void* dgamma,
                                void* dbeta, Workspace workspace, void* stream) {
  gn::BackwardProblem problem;
  hipgrad::Status status = shape_of(call, call.x_strides, "x", &problem.x);
  if (status.is_ok()) status = shape_of(call, call.y_strides, "dy", &problem.dy);
  if (status.is_ok()) status = shape_of(call, call.dx_strides, "dx", &problem.dx);
  if (!status.is_ok()) return status.to_string();
  problem.groups = call.groups;
  problem.activation = call.silu ? gn::Activation::kSwish : gn::Activation::kIdentity;
  return message(with_types(call, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    using Op = gn::Backward<T, P>;
    const typename Op::Args args{static_cast<const T*>(dy),
                                 static_cast<const T*>(x),
                                 static_cast<const P*>(gamma),
                                 static_cast<const P*>(beta),
                                 mean,
                                 rstd,
                                 static_cast<T*>(dx),
                                 static_cast<P*>(dgamma),
                                 static_cast<P*>(dbeta)};
    return run_with_workspace<Op>(problem, args, workspace, stream);
  }));
}

}  // namespace hipgrad_torch
