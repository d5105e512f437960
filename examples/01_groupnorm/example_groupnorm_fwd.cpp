/// @file example_groupnorm_fwd.cpp
/// @brief GroupNorm forward, y = act(γ·(x − μ)·rstd + β) with the saved mean and rstd,
///        checked against the CPU reference and timed; the command line is in groupnorm_example.hpp.
#include "groupnorm_example.hpp"

int main(int argc, char** argv) { return groupnorm_example::example_main<groupnorm_example::Op::kForward>(argc, argv); }
