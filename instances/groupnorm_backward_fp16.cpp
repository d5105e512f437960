/// @file groupnorm_backward_fp16.cpp
/// @brief groupnorm::Backward for fp16 data with fp16 or fp32 γ/β, instantiated once for the tests,
///        examples and benchmarks (groupnorm_instances.hpp).

#include "groupnorm_instances.hpp"

HIPGRAD_GROUPNORM_16BIT_INSTANCES(, Backward, hipgrad::half)
