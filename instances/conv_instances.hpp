/// @file conv_instances.hpp
/// @brief The convolution ops that hipgrad's own tests, examples and benchmarks run, declared
///        instantiated elsewhere (in this folder's object library), so that each kernel is
///        compiled once per build. Include after the op headers; user code does not need it.
#pragma once

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"

#define HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(prefix, NDim)                \
  prefix template class hipgrad::conv::BackwardData<float, NDim>;         \
  prefix template class hipgrad::conv::BackwardData<hipgrad::half, NDim>; \
  prefix template class hipgrad::conv::BackwardData<hipgrad::bfloat16, NDim>;

#define HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(prefix, NDim)                \
  prefix template class hipgrad::conv::BackwardWeight<float, NDim>;         \
  prefix template class hipgrad::conv::BackwardWeight<hipgrad::half, NDim>; \
  prefix template class hipgrad::conv::BackwardWeight<hipgrad::bfloat16, NDim>;

// The plain-GEMM path of 1×1 problems, the same for every rank.
#define HIPGRAD_CONV_PLAIN_GEMM_INSTANCES(prefix)                                                                \
  prefix template struct hipgrad::conv::detail::PlainGemmRunner<float, hipgrad::gemm::DefaultConfigFor<float>>;  \
  prefix template struct hipgrad::conv::detail::PlainGemmRunner<hipgrad::half,                                   \
                                                                hipgrad::gemm::DefaultConfigFor<hipgrad::half>>; \
  prefix template struct hipgrad::conv::detail::PlainGemmRunner<hipgrad::bfloat16,                               \
                                                                hipgrad::gemm::DefaultConfigFor<hipgrad::bfloat16>>;

HIPGRAD_CONV_PLAIN_GEMM_INSTANCES(extern)
HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(extern, 1)
HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(extern, 2)
HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(extern, 3)
HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(extern, 1)
HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(extern, 2)
HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(extern, 3)
