/// @file groupnorm_backward_fp32.cpp
/// @brief groupnorm::Backward for fp32 data, instantiated once for the tests, examples and benchmarks
///        (groupnorm_instances.hpp).

#include "groupnorm_instances.hpp"

HIPGRAD_GROUPNORM_FP32_INSTANCES(, Backward)
