/// @file conv_backward_weight_2d.cpp
/// @brief conv::BackwardWeight of rank 2 for fp32, fp16 and bf16, instantiated once for the tests,
///        examples and benchmarks (conv_instances.hpp).

#include "conv_instances.hpp"

HIPGRAD_CONV_BACKWARD_WEIGHT_INSTANCES(, 2)
