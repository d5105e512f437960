/// @file conv_instances.hpp
/// @brief The convolution ops that hipgrad's own tests, examples and benchmarks run, declared
///        instantiated elsewhere (in this folder's object library), so that each kernel is
///        compiled once per build. Include after the op headers; user code does not need it.
#pragma once

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"

// The direct kernels' launchers, which the tests and bench_conv --direct=vector call on plans of
// their own.
#define HIPGRAD_CONV_DIRECT_DATA_LAUNCH(prefix, T, NDim)                                \
  prefix template hipgrad::Status hipgrad::conv::direct::launch_backward_data<T, NDim>( \
      const hipgrad::conv::direct::DataPlan<T, NDim>&, const T*, const T*, T*, hipStream_t);
#define HIPGRAD_CONV_DIRECT_WEIGHT_LAUNCH(prefix, T, NDim)                                \
  prefix template hipgrad::Status hipgrad::conv::direct::launch_backward_weight<T, NDim>( \
      const hipgrad::conv::direct::WeightPlan<T, NDim>&, const T*, const T*, T*, float*, hipStream_t);

#define HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(prefix, NDim)                    \
  prefix template class hipgrad::conv::BackwardData<float, NDim>;             \
  prefix template class hipgrad::conv::BackwardData<hipgrad::half, NDim>;     \
  prefix template class hipgrad::conv::BackwardData<hipgrad::bfloat16, NDim>; \
  HIPGRAD_CONV_DIRECT_DATA_LAUNCH(prefix, float, NDim)                        \
  HIPGRAD_CONV_DIRECT_DATA_LAUNCH(prefix, hipgrad::half, NDim)                \
  HIPGRAD_CONV_DIRECT_DATA_LAUNCH(prefix, hipgrad::bfloat16, NDim)

#define HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(prefix, NDim)                    \
  prefix template class hipgrad::conv::BackwardWeight<float, NDim>;             \
  prefix template class hipgrad::conv::BackwardWeight<hipgrad::half, NDim>;     \
  prefix template class hipgrad::conv::BackwardWeight<hipgrad::bfloat16, NDim>; \
  HIPGRAD_CONV_DIRECT_WEIGHT_LAUNCH(prefix, float, NDim)                        \
  HIPGRAD_CONV_DIRECT_WEIGHT_LAUNCH(prefix, hipgrad::half, NDim)                \
  HIPGRAD_CONV_DIRECT_WEIGHT_LAUNCH(prefix, hipgrad::bfloat16, NDim)

// The plain-GEMM path of 1×1 problems and the unfolded route's GEMMs, the same for every rank.
#define HIPGRAD_CONV_GEMM_RUNNERS(prefix, T)                                                            \
  prefix template struct hipgrad::conv::detail::PlainGemmRunner<T, hipgrad::gemm::DefaultConfigFor<T>>; \
  prefix template struct hipgrad::conv::detail::UnfoldGemms<T, hipgrad::gemm::DefaultConfigFor<T>>;
#define HIPGRAD_CONV_PLAIN_GEMM_INSTANCES(prefix)  \
  HIPGRAD_CONV_GEMM_RUNNERS(prefix, float)         \
  HIPGRAD_CONV_GEMM_RUNNERS(prefix, hipgrad::half) \
  HIPGRAD_CONV_GEMM_RUNNERS(prefix, hipgrad::bfloat16)

HIPGRAD_CONV_PLAIN_GEMM_INSTANCES(extern)
HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(extern, 1)
HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(extern, 2)
HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(extern, 3)
HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(extern, 1)
HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(extern, 2)
HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(extern, 3)
