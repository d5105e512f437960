/// @file layout.hpp
/// @brief PyTorch's tensor layouts in hipgrad's terms, host-only and free of PyTorch (so that
///        CTest checks them on the CPU: tests/python/test_torch_layout.cpp): the logical strides
///        of a grouped convolution's tensors, channels-last strides, a convolution's output length.
#pragma once

#include <cstdint>
#include <vector>

#include "bridge.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad_torch {

/// An activation [N, G·C, spatial...] of `rank` strides as hipgrad's [G, N, C, spatial...]:
/// group g starts C channels (`per_group`) further along dimension 1.
inline void activation_strides(std::int64_t* to, const std::int64_t* strides, int rank, std::int64_t per_group) {
  to[0] = per_group * strides[1], to[1] = strides[0], to[2] = strides[1];
  for (int d = 2; d < rank; ++d) to[d + 1] = strides[d];
}

/// A weight [G·K, C, filter...] of `rank` strides as hipgrad's [G, K, C, filter...]: group g starts
/// K rows (`per_group`) further along dimension 0.
inline void weight_strides(std::int64_t* to, const std::int64_t* strides, int rank, std::int64_t per_group) {
  to[0] = per_group * strides[0], to[1] = strides[0];
  for (int d = 1; d < rank; ++d) to[d + 1] = strides[d];
}

/// A convolution call's logical strides from PyTorch's strides of x (or dx), w (or dw) and dy,
/// each of call->ndim + 2 dimensions: the activations' groups step C and K channels, the weight's K rows.
inline void set_conv_strides(ConvCall* call, const std::int64_t* x, const std::int64_t* w, const std::int64_t* dy) {
  const int rank = call->ndim + 2;
  activation_strides(call->input_strides, x, rank, call->C);
  weight_strides(call->weight_strides, w, rank, call->K);
  activation_strides(call->output_strides, dy, rank, call->K);
}

/// The strides of a dense tensor of `sizes` laid out (N, spatial..., C): dimension 1 fastest.
/// (Row-major ones: hipgrad::packed_strides.)
inline std::vector<std::int64_t> channels_last_strides(const std::vector<std::int64_t>& sizes) {
  std::vector<int> order{0};
  for (int d = 2; d < static_cast<int>(sizes.size()); ++d) order.push_back(d);
  order.push_back(1);
  return hipgrad::strides_for_order(sizes, order);
}

/// The output length of one spatial dimension of a convolution, or 0 where it has none.
inline std::int64_t conv_output_length(std::int64_t input, std::int64_t filter, std::int64_t stride,
                                       std::int64_t dilation, std::int64_t left, std::int64_t right) {
  const std::int64_t span = input + left + right - dilation * (filter - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace hipgrad_torch
