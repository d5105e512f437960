/// @file bridge_conv.cu
/// @brief Convolution backward calls from PyTorch run through hipgrad::conv (the kernels come from
///        instances/, compiled once into the extension).
#include <vector>

#include "bridge.hpp"
#include "bridge_common.hpp"
#include "conv_instances.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"

namespace hipgrad_torch {
namespace {

namespace hc = hipgrad::conv;

template <int NDim>
hc::Problem<NDim> problem_of(const ConvCall& call) {
  hc::Problem<NDim> problem;
  hc::ConvParams<NDim>& p = problem.params;
  p.G = call.G, p.N = call.N, p.K = call.K, p.C = call.C;
  for (int d = 0; d < NDim; ++d) {
    p.filter[d] = call.filter[d], p.input[d] = call.input[d], p.strides[d] = call.stride[d];
    p.dilations[d] = call.dilation[d], p.left_pads[d] = call.pad_left[d], p.right_pads[d] = call.pad_right[d];
  }
  problem.input_strides.assign(call.input_strides, call.input_strides + NDim + 3);
  problem.weight_strides.assign(call.weight_strides, call.weight_strides + NDim + 3);
  problem.output_strides.assign(call.output_strides, call.output_strides + NDim + 3);
  problem.allow_tf32 = call.allow_tf32 && call.dtype == DType::kFloat32;
  return problem;
}

/// visit(T{}, std::integral_constant<int, NDim>{}) for the call's type and rank.
template <typename Visit>
hipgrad::Status with_type_and_rank(const ConvCall& call, Visit&& visit) {
  return with_dtype(call.dtype, [&](auto t) {
    switch (call.ndim) {
      case 1: return visit(t, std::integral_constant<int, 1>{});
      case 2: return visit(t, std::integral_constant<int, 2>{});
      case 3: return visit(t, std::integral_constant<int, 3>{});
    }
    return hipgrad::Status::not_supported("hipgrad convolutions have 1, 2 or 3 spatial dimensions");
  });
}

/// Op::name of the call, Op = op_of(T{}, rank) for its type and rank (or why there is none).
template <typename OpOf>
std::string name_of(const ConvCall& call, OpOf&& op_of) {
  std::string name;
  const hipgrad::Status status = with_type_and_rank(call, [&](auto t, auto rank) {
    name = decltype(op_of(t, rank))::name(problem_of<decltype(rank)::value>(call));
    return hipgrad::Status::ok();
  });
  return status.is_ok() ? name : status.to_string();
}

}  // namespace

std::string conv_backward_data(const ConvCall& call, const void* dy, const void* w, void* dx, Workspace workspace,
                               void* stream) {
  return message(with_type_and_rank(call, [&](auto t, auto rank) {
    using T = decltype(t);
    using Op = hc::BackwardData<T, decltype(rank)::value>;
    const typename Op::Args args{static_cast<const T*>(dy), static_cast<const T*>(w), static_cast<T*>(dx)};
    return run_with_workspace<Op>(problem_of<decltype(rank)::value>(call), args, workspace, stream);
  }));
}

std::string conv_backward_weight(const ConvCall& call, const void* x, const void* dy, void* dw, Workspace workspace,
                                 void* stream) {
  return message(with_type_and_rank(call, [&](auto t, auto rank) {
    using T = decltype(t);
    using Op = hc::BackwardWeight<T, decltype(rank)::value>;
    const typename Op::Args args{static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dw)};
    return run_with_workspace<Op>(problem_of<decltype(rank)::value>(call), args, workspace, stream);
  }));
}

std::string conv_backward_data_name(const ConvCall& call) {
  return name_of(call, [](auto t, auto rank) { return hc::BackwardData<decltype(t), decltype(rank)::value>{}; });
}

std::string conv_backward_weight_name(const ConvCall& call) {
  return name_of(call, [](auto t, auto rank) { return hc::BackwardWeight<decltype(t), decltype(rank)::value>{}; });
}

}  // namespace hipgrad_torch
