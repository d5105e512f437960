/// @file example_grouped_conv_bwd_weight.cpp
/// @brief Grouped convolution backward-weight, CK's command line:
///
///   example_grouped_conv_bwd_weight [verify init time [NDim G N K C [Z] Y X [Di] Hi Wi [Sz] Sy Sx
///       [Dz] Dy Dx [LeftPz] LeftPy LeftPx [RightPz] RightPy RightPx]] [--dtype --tf32 --layout
///       --split-k=N|auto --algorithm --repeats --help]
///
/// Default: NDim 3, G 4, N 1, K 128, C 256, 3×3×3 filter, 14³ input, stride 1, dilation 1, pads 1.
/// Exit status: 0 passed, 1 mismatch or runtime error (no GPU included), 2 usage error.

#include "bwd_weight_example.hpp"

int main(int argc, char** argv) {
  return conv_example::run_backward_weight_example(argc, argv, "example_grouped_conv_bwd_weight");
}
