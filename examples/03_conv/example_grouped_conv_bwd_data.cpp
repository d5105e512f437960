/// @file example_grouped_conv_bwd_data.cpp
/// @brief Grouped convolution backward-data, the seed's command line with G after NDim:
///
///   example_grouped_conv_bwd_data [verify init time [NDim G N K C [Z] Y X [Di] Hi Wi [Sz] Sy Sx
///       [Dz] Dy Dx [LeftPz] LeftPy LeftPx [RightPz] RightPy RightPx]] [options as
///       example_convnd_bwd_data]
///
/// Exit status: 0 passed, 1 mismatch or runtime error (no GPU included), 2 usage error.

#include "bwd_data_example.hpp"

int main(int argc, char** argv) {
  return conv_example::run_backward_data_example(argc, argv, true, "example_grouped_conv_bwd_data");
}
