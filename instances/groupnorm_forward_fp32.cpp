/// @file groupnorm_forward_fp32.cpp
/// @brief groupnorm::Forward for fp32 data, instantiated once for the tests, examples and benchmarks
///        (groupnorm_instances.hpp).

#include "groupnorm_instances.hpp"

HIPGRAD_GROUPNORM_FP32_INSTANCES(, Forward)
