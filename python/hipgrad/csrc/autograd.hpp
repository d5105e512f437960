/// @file autograd.hpp
/// @brief What ops.cpp's Python module needs of autograd.cpp: the eager entries of hipgrad::conv and
///        hipgrad::group_norm, benchmark mode's kept choices.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace hipgrad_torch {

/// Which backward `hipgrad::conv` runs (its last argument).
enum class BackwardChoice : std::int64_t {
  kHipgrad = 0,  ///< hipgrad's, PyTorch's where hipgrad refuses the problem
  kTorch = 1,    ///< PyTorch's
  kFaster = 2,   ///< benchmark mode: the faster of the two, timed on a problem's first call
};

/// hipgrad::conv through the dispatcher, for Python's eager calls (no schema matching of Python
/// arguments, as torch.ops does): PyTorch's allow_tf32 switch for convolutions decides TF32.
at::Tensor conv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& left,
                const std::vector<std::int64_t>& right, const std::vector<std::int64_t>& dilation, std::int64_t groups,
                std::int64_t choice);

/// hipgrad::group_norm's first output (y) the same way.
at::Tensor group_norm(const at::Tensor& input, std::int64_t groups, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, double eps, bool silu);

/// Benchmark mode's kept choices: each problem's key (numbers) and whether hipgrad won.
std::vector<std::pair<std::vector<std::int64_t>, bool>> conv_choices();
void clear_conv_choices();

}  // namespace hipgrad_torch
