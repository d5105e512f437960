/// @file autograd.hpp
/// @brief What ops.cpp's Python module needs of autograd.cpp: benchmark mode's kept choices.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace hipgrad_torch {

/// Which backward `hipgrad::conv` runs (its last argument).
enum class BackwardChoice : std::int64_t {
  kHipgrad = 0,  ///< hipgrad's, PyTorch's where hipgrad refuses the problem
  kTorch = 1,    ///< PyTorch's
  kFaster = 2,   ///< benchmark mode: the faster of the two, timed on a problem's first call
};

/// Benchmark mode's kept choice (a BackwardChoice) for the backward of a convolution of `input`
/// by `weight` (in autocast's type where `autocast` casts them) with these gradients asked for, or -1
/// where none is kept yet: lets a module run PyTorch's own convolution where PyTorch won.
std::int64_t conv_choice(const at::Tensor& input, const at::Tensor& weight, const std::vector<std::int64_t>& stride,
                         const std::vector<std::int64_t>& left, const std::vector<std::int64_t>& right,
                         const std::vector<std::int64_t>& dilation, std::int64_t groups, bool allow_tf32, bool autocast,
                         bool input_grad, bool weight_grad);

/// Benchmark mode's kept choices: each problem's key (numbers) and whether hipgrad won.
std::vector<std::pair<std::vector<std::int64_t>, bool>> conv_choices();
void clear_conv_choices();

}  // namespace hipgrad_torch
