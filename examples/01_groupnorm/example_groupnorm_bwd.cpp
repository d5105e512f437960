/// @file example_groupnorm_bwd.cpp
/// @brief GroupNorm backward, fused: dx, dγ and dβ in one op,
///        checked against the CPU reference and timed; the command line is in groupnorm_example.hpp.
#include "groupnorm_example.hpp"

int main(int argc, char** argv) {
  return groupnorm_example::example_main<groupnorm_example::Op::kBackward>(argc, argv);
}
