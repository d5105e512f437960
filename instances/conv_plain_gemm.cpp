/// @file conv_plain_gemm.cpp
/// @brief The convolution ops' plain-GEMM path (1×1 problems) and the unfolded route's GEMMs for
///        fp32, fp16 and bf16, instantiated once for the tests, examples and benchmarks
///        (conv_instances.hpp).

#include "conv_instances.hpp"

HIPGRAD_CONV_PLAIN_GEMM_INSTANCES()
