/// @file conv_backward_data_2d.cpp
/// @brief conv::BackwardData of rank 2 for fp32, fp16 and bf16, instantiated once for the tests,
///        examples and benchmarks (conv_instances.hpp).

#include "conv_instances.hpp"

HIPGRAD_CONV_BACKWARD_DATA_INSTANCES(, 2)
