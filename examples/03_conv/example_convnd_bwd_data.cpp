/// @file example_convnd_bwd_data.cpp
/// @brief Convolution backward-data (one group), the seed's command line:
///
///   example_convnd_bwd_data [verify init time [NDim N K C [Z] Y X [Di] Hi Wi [Sz] Sy Sx [Dz] Dy Dx
///       [LeftPz] LeftPy LeftPx [RightPz] RightPy RightPx]] [--dtype=fp16|bf16|fp32] [--tf32=0|1]
///       [--layout=nhwgc|gnhwc|ngchw] [--algorithm=auto] [--repeats=20]
///
/// Default: N 128, K 256, C 128, 3×3 filter, 71×71 input, stride 2, dilation 1, pads 1. Exit
/// status: 0 passed, 1 mismatch or runtime error (no GPU included), 2 usage error.

#include "bwd_data_example.hpp"

int main(int argc, char** argv) {
  return conv_example::run_backward_data_example(argc, argv, false, "example_convnd_bwd_data");
}
