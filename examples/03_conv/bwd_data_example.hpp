/// @file bwd_data_example.hpp
/// @brief The backward-data examples' entry point (one object file for both executables).
#pragma once

namespace conv_example {

/// Parses the command line (`grouped`: sizes NDim G N K C ..., else NDim N K C ...), runs
/// conv::BackwardData, verifies and times it; the exit status (0 passed, 1 mismatch or runtime
/// error, no GPU included, 2 usage error).
int run_backward_data_example(int argc, char** argv, bool grouped, const char* program);

}  // namespace conv_example
