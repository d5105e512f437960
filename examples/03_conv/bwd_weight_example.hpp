/// @file bwd_weight_example.hpp
/// @brief The backward-weight example's entry point.
#pragma once

namespace conv_example {

/// Parses the command line (sizes NDim G N K C ...), runs conv::BackwardWeight, verifies and
/// times it; the exit status (0 passed, 1 mismatch or runtime error, no GPU included, 2 usage
/// error).
int run_backward_weight_example(int argc, char** argv, const char* program);

}  // namespace conv_example
