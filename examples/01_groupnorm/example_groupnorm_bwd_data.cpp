/// @file example_groupnorm_bwd_data.cpp
/// @brief GroupNorm backward data: dx from dy, x and the forward's mean and rstd,
///        checked against the CPU reference and timed; the command line is in groupnorm_example.hpp.
#include "groupnorm_example.hpp"

int main(int argc, char** argv) {
  return groupnorm_example::example_main<groupnorm_example::Op::kBackwardData>(argc, argv);
}
