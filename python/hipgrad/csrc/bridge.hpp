/// @file bridge.hpp
/// @brief The seam between PyTorch and hipgrad: plain descriptions of a call (sizes, element
///        strides, data types, raw pointers) that ops.cpp fills from tensors and the bridge_*.cu
///        files run through hipgrad's ops. The two sides compile apart: ops.cpp with PyTorch's
///        headers by the host compiler, the bridge with hipgrad's device headers by nvcc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hipgrad_torch {

enum class DType { kFloat32, kFloat16, kBFloat16 };

/// Gives a call's workspace: `bytes` of device memory, alive until the call's kernels have run on
/// its stream (PyTorch's caching allocator on the current stream), or null where bytes is 0.
struct Workspace {
  void* (*allocate)(std::size_t bytes, void* context) = nullptr;
  void* context = nullptr;
};

/// A GroupNorm call: x, and the other activations, of `rank` dimensions [N, C, spatial...].
struct GroupNormCall {
  DType data = DType::kFloat32;   ///< x, y, dy, dx
  DType param = DType::kFloat32;  ///< gamma, beta, dgamma, dbeta
  int rank = 0;
  std::int64_t lengths[5] = {};
  std::int64_t x_strides[5] = {};
  std::int64_t y_strides[5] = {};   ///< forward: y; backward: dy
  std::int64_t dx_strides[5] = {};  ///< backward: dx (x's lengths)
  std::int64_t groups = 1;
  float epsilon = 1e-5f;
  bool silu = false;
};

/// Empty where the op ran, else hipgrad's reason.
std::string group_norm_forward(const GroupNormCall& call, const void* x, const void* gamma, const void* beta, void* y,
                               float* mean, float* rstd, Workspace workspace, void* stream);

/// dx and (dgamma, dbeta) may be null, not all three.
std::string group_norm_backward(const GroupNormCall& call, const void* dy, const void* x, const void* gamma,
                                const void* beta, const float* mean, const float* rstd, void* dx, void* dgamma,
                                void* dbeta, Workspace workspace, void* stream);

/// A convolution in hipgrad's terms: G groups of C → K channels; strides of the logical tensors
/// [G, N, C, spatial...] (input), [G, K, C, filter...] (weight), [G, N, K, spatial...] (output).
struct ConvCall {
  DType dtype = DType::kFloat32;
  int ndim = 2;
  std::int64_t G = 1, N = 1, K = 1, C = 1;
  std::int64_t filter[3] = {}, input[3] = {}, stride[3] = {}, dilation[3] = {}, pad_left[3] = {}, pad_right[3] = {};
  std::int64_t input_strides[6] = {}, weight_strides[6] = {}, output_strides[6] = {};
  bool allow_tf32 = false;
};

std::string conv_backward_data(const ConvCall& call, const void* dy, const void* w, void* dx, Workspace workspace,
                               void* stream);
std::string conv_backward_weight(const ConvCall& call, const void* x, const void* dy, void* dw, Workspace workspace,
                                 void* stream);
/// The path a call takes (hipgrad's name()), for tests and the profiler's readers.
std::string conv_backward_data_name(const ConvCall& call);
std::string conv_backward_weight_name(const ConvCall& call);

}  // namespace hipgrad_torch
