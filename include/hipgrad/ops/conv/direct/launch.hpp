/// @file launch.hpp
/// @brief Host: launches the direct kernels of a plan (plan.hpp) on a stream, with the kernel
///        compiled for the plan's W window taps.
#pragma once

#include <type_traits>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/direct/backward_data_kernel.hpp"
#include "hipgrad/ops/conv/direct/backward_weight_kernel.hpp"
#include "hipgrad/ops/conv/direct/plan.hpp"
#include "hipgrad/ops/conv/direct/vector_data_kernel.hpp"
#include "hipgrad/ops/conv/direct/vector_weight_kernel.hpp"

namespace hipgrad::conv::direct {

/// visit(std::integral_constant<int, kTaps>{}) for the compiled tap count `taps` (window_taps_for).
template <typename Visit>
Status with_window_taps(int taps, Visit&& visit) {
  switch (taps) {
    case 1: return visit(std::integral_constant<int, 1>{});
    case 2: return visit(std::integral_constant<int, 2>{});
    case 3: return visit(std::integral_constant<int, 3>{});
    case 4: return visit(std::integral_constant<int, 4>{});
    case 5: return visit(std::integral_constant<int, 5>{});
    default: return visit(std::integral_constant<int, kMaxWindowTaps>{});
  }
}

/// visit(std::integral_constant<int, kTaps>{}) for the vector kernels' tap count (vector_taps_for).
template <typename Visit>
Status with_vector_taps(int taps, Visit&& visit) {
  switch (taps) {
    case 1: return visit(std::integral_constant<int, 1>{});
    case 3: return visit(std::integral_constant<int, 3>{});
    case 5: return visit(std::integral_constant<int, 5>{});
    default: return visit(std::integral_constant<int, kMaxWindowTaps>{});
  }
}

template <typename T, int NDim>
Status launch_vector_data(const VectorDataPlan<T, NDim>& plan, const T* dy, const T* w, T* dx, hipStream_t stream) {
  VectorDataParams<T, NDim> params = plan.params;
  params.dy = dy, params.w = w, params.dx = dx;
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y));
  return with_vector_taps(plan.window_taps, [&](auto taps) {
    vector_backward_data_kernel<T, NDim, decltype(taps)::value>
        <<<grid, static_cast<unsigned>(params.threads), plan.shared_bytes, stream>>>(params);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("vector_backward_data_kernel");
    return Status::ok();
  });
}

/// The slices' sums of the vector kernel into `partials` (plan.workspace bytes).
template <typename T, int NDim>
Status launch_vector_weight(const VectorWeightPlan<T, NDim>& plan, const T* x, const T* dy, float* partials,
                            hipStream_t stream) {
  VectorWeightParams<T, NDim> params = plan.params;
  params.x = x, params.dy = dy, params.partials = partials;
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y));
  return with_vector_taps(plan.window_taps, [&](auto taps) {
    vector_backward_weight_kernel<T, NDim, decltype(taps)::value>
        <<<grid, static_cast<unsigned>(params.threads), plan.shared_bytes, stream>>>(params);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("vector_backward_weight_kernel");
    return Status::ok();
  });
}

template <typename T, int NDim>
Status launch_backward_data(const DataPlan<T, NDim>& plan, const T* dy, const T* w, T* dx, hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  if (plan.vectors) return launch_vector_data(plan.vector, dy, w, dx, stream);
  DataKernelParams<T, NDim> params = plan.params;
  params.dy = dy, params.w = w, params.dx = dx;
  return with_window_taps(plan.window_taps, [&](auto taps) {
    direct_backward_data_kernel<T, NDim, decltype(taps)::value>
        <<<static_cast<unsigned>(plan.blocks), static_cast<unsigned>(params.threads), plan.shared_bytes, stream>>>(
            params);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("direct_backward_data_kernel");
    return Status::ok();
  });
}

/// The slices' sums into `partials` (plan.workspace bytes), then their reduction into dw.
template <typename T, int NDim>
Status launch_backward_weight(const WeightPlan<T, NDim>& plan, const T* x, const T* dy, T* dw, float* partials,
                              hipStream_t stream) {
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  WeightReduceParams<T, NDim> reduce = plan.vectors ? plan.vector.reduce : plan.reduce;
  if (plan.vectors) {
    HIPGRAD_RETURN_IF_ERROR(launch_vector_weight(plan.vector, x, dy, partials, stream));
  } else {
    WeightKernelParams<T, NDim> params = plan.params;
    params.x = x, params.dy = dy, params.partials = partials;
    HIPGRAD_RETURN_IF_ERROR(with_window_taps(plan.window_taps, [&](auto taps) {
      direct_backward_weight_kernel<T, NDim, decltype(taps)::value>
          <<<static_cast<unsigned>(plan.blocks), static_cast<unsigned>(params.threads), plan.shared_bytes, stream>>>(
              params);
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("direct_backward_weight_kernel");
      return Status::ok();
    }));
  }
  reduce.partials = partials, reduce.dw = dw;
  std::int64_t elements = static_cast<std::int64_t>(reduce.groups) * reduce.k * reduce.c;
  for (int d = 0; d < NDim; ++d) elements *= reduce.filter[d];
  const std::int64_t blocks = std::min<std::int64_t>(ceil_div<std::int64_t>(elements, 256), 65536);
  direct_weight_reduce_kernel<T, NDim><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(reduce);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("direct_weight_reduce_kernel");
  return Status::ok();
}

}  // namespace hipgrad::conv::direct
