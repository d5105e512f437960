/// @file groupnorm_backward_bf16.cpp
/// @brief groupnorm::Backward for bf16 data with bf16 or fp32 γ/β, instantiated once for the tests,
///        examples and benchmarks (groupnorm_instances.hpp).

#include "groupnorm_instances.hpp"

HIPGRAD_GROUPNORM_16BIT_INSTANCES(, Backward, hipgrad::bfloat16)
