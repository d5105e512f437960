/// @file groupnorm_instances.hpp
/// @brief The GroupNorm ops that hipgrad's own tests, examples and benchmarks run, declared
///        instantiated elsewhere (in this folder's object library), so that each kernel is
///        compiled once per build. Include after the op headers; user code does not need it.
///        BackwardData and BackwardGammaBeta have no kernels of their own: they call Backward.
#pragma once

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"

// Op: Forward or Backward. Every (data, γ/β) pair the ops take: γ/β of the data type or fp32.
#define HIPGRAD_GROUPNORM_FP32_INSTANCES(prefix, Op) prefix template class hipgrad::groupnorm::Op<float, float>;

#define HIPGRAD_GROUPNORM_16BIT_INSTANCES(prefix, Op, T) \
  prefix template class hipgrad::groupnorm::Op<T, T>;    \
  prefix template class hipgrad::groupnorm::Op<T, float>;

#define HIPGRAD_GROUPNORM_INSTANCES(prefix, Op)                \
  HIPGRAD_GROUPNORM_FP32_INSTANCES(prefix, Op)                 \
  HIPGRAD_GROUPNORM_16BIT_INSTANCES(prefix, Op, hipgrad::half) \
  HIPGRAD_GROUPNORM_16BIT_INSTANCES(prefix, Op, hipgrad::bfloat16)

HIPGRAD_GROUPNORM_INSTANCES(extern, Forward)
HIPGRAD_GROUPNORM_INSTANCES(extern, Backward)
