/// @file ops.cpp
/// @brief hipgrad's ops as PyTorch operators (TORCH_LIBRARY "hipgrad"): tensors checked and
///        described for the bridge, outputs and workspace from PyTorch's caching allocator on the
///        current stream of the tensors' device. Fake (meta) kernels live in hipgrad/_ops.py and
///        follow the output layouts chosen here; autograd in autograd.cpp.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "autograd.hpp"
#include "bridge.hpp"
#include "layout.hpp"

namespace hipgrad_torch {
namespace {

constexpr const char* kPrefix = "hipgrad: ";

DType dtype_of(const at::Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    default: break;
  }
  TORCH_CHECK(false, kPrefix, name, " is ", t.scalar_type(), "; hipgrad takes float32, float16 and bfloat16");
}

void check_cuda(const at::Tensor& t, const at::Tensor& first, const char* name) {
  TORCH_CHECK(t.is_cuda(), kPrefix, name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK(t.device() == first.device(), kPrefix, name, " is on ", t.device(), ", the other tensors on ",
              first.device());
}

void check_ran(const std::string& error) { TORCH_CHECK(error.empty(), kPrefix, error); }

/// The workspace of one call: a byte tensor on the call's device, held until the call returns
/// (the caching allocator keeps it for the current stream's kernels after that).
struct WorkspaceTensor {
  at::TensorOptions options;
  at::Tensor tensor;
  Workspace workspace() {
    return {[](std::size_t bytes, void* self) -> void* {
              auto* w = static_cast<WorkspaceTensor*>(self);
              w->tensor = at::empty({static_cast<std::int64_t>(bytes)}, w->options.dtype(at::kByte));
              return w->tensor.data_ptr();
            },
            this};
  }
};

void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

/// Whether PyTorch keeps `t` channels-last (and not also contiguous): outputs follow it.
bool channels_last(const at::Tensor& t) {
  if (t.is_contiguous()) return false;
  if (t.dim() == 4) return t.is_contiguous(at::MemoryFormat::ChannelsLast);
  if (t.dim() == 5) return t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
  return t.dim() == 3 && t.stride(1) == 1 && t.stride(2) == t.size(1) && t.stride(0) == t.size(1) * t.size(2);
}

/// An uninitialised tensor of `sizes`, channels-last (N, spatial..., C) or contiguous.
at::Tensor empty_in_layout(at::IntArrayRef sizes, bool last, const at::TensorOptions& options) {
  if (!last) return at::empty(sizes, options);
  return at::empty_strided(sizes, channels_last_strides(sizes.vec()), options);
}

// ---- GroupNorm -------------------------------------------------------------------------------

/// `param` as a dense [C] tensor, or `fill` in `like`'s options where it is absent.
at::Tensor param_or(const std::optional<at::Tensor>& param, std::int64_t channels, double fill, const at::Tensor& input,
                    const at::TensorOptions& like, const char* name) {
  if (!param.has_value() || !param->defined()) return at::full({channels}, fill, like);
  check_cuda(*param, input, name);
  TORCH_CHECK(param->dim() == 1 && param->size(0) == channels, kPrefix, name, " must have ", channels,
              " elements (the input's channels), got sizes ", param->sizes());
  return param->contiguous();
}

GroupNormCall group_norm_call(const at::Tensor& input, std::int64_t groups, const at::Tensor& gamma, bool silu) {
  TORCH_CHECK(input.dim() >= 2 && input.dim() <= 5, kPrefix,
              "GroupNorm takes [N, C] and 1 to 3 spatial dimensions, got sizes ", input.sizes());
  GroupNormCall call;
  call.data = dtype_of(input, "input");
  call.param = dtype_of(gamma, "weight");
  call.rank = static_cast<int>(input.dim());
  for (int d = 0; d < call.rank; ++d) call.lengths[d] = input.size(d), call.x_strides[d] = input.stride(d);
  call.groups = groups;
  call.silu = silu;
  return call;
}

void set_strides(std::int64_t* to, const at::Tensor& t) {
  for (std::int64_t d = 0; d < t.dim(); ++d) to[d] = t.stride(d);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm_op(const at::Tensor& input, std::int64_t num_groups,
                                                             const std::optional<at::Tensor>& weight,
                                                             const std::optional<at::Tensor>& bias, double eps,
                                                             bool silu) {
  check_cuda(input, input, "input");
  TORCH_CHECK(input.dim() >= 2, kPrefix, "GroupNorm's input needs [N, C, ...], got sizes ", input.sizes());
  TORCH_CHECK(num_groups > 0 && input.size(1) % num_groups == 0, kPrefix, "num_groups ", num_groups,
              " must divide the input's ", input.size(1), " channels");
  const c10::cuda::CUDAGuard guard(input.device());
  const std::int64_t channels = input.size(1);
  const at::TensorOptions param_options = weight.has_value() && weight->defined() ? weight->options() : input.options();
  const at::Tensor gamma = param_or(weight, channels, 1.0, input, param_options, "weight");
  const at::Tensor beta = param_or(bias, channels, 0.0, input, gamma.options(), "bias");
  TORCH_CHECK(beta.scalar_type() == gamma.scalar_type(), kPrefix, "weight is ", gamma.scalar_type(), ", bias ",
              beta.scalar_type());
  at::Tensor y = at::empty_like(input);
  at::Tensor mean = at::empty({input.size(0), num_groups}, input.options().dtype(at::kFloat));
  at::Tensor rstd = at::empty_like(mean);
  if (input.numel() == 0) return {y, mean, rstd};
  GroupNormCall call = group_norm_call(input, num_groups, gamma, silu);
  set_strides(call.y_strides, y);
  call.epsilon = static_cast<float>(eps);
  WorkspaceTensor workspace{input.options()};
  check_ran(group_norm_forward(call, input.data_ptr(), gamma.data_ptr(), beta.data_ptr(), y.data_ptr(),
                               mean.data_ptr<float>(), rstd.data_ptr<float>(), workspace.workspace(),
                               current_stream()));
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> group_norm_backward_op(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, std::int64_t num_groups, bool silu,
    std::array<bool, 3> output_mask) {
  check_cuda(input, input, "input");
  for (const auto& [t, name] : {std::pair{&grad_output, "grad_output"}, {&mean, "mean"}, {&rstd, "rstd"}})
    check_cuda(*t, input, name);
  TORCH_CHECK(grad_output.sizes() == input.sizes(), kPrefix, "grad_output has sizes ", grad_output.sizes(),
              ", the input ", input.sizes());
  TORCH_CHECK(input.dim() >= 2 && num_groups > 0 && input.size(1) % num_groups == 0, kPrefix, "num_groups ", num_groups,
              " must divide the input's channels, sizes ", input.sizes());
  for (const at::Tensor* stat : {&mean, &rstd})
    TORCH_CHECK(stat->scalar_type() == at::kFloat && stat->numel() == input.size(0) * num_groups, kPrefix,
                "mean and rstd must be float32 [N, num_groups] (group_norm's outputs)");
  const c10::cuda::CUDAGuard guard(input.device());
  const std::int64_t channels = input.size(1);
  const bool params = output_mask[1] || output_mask[2];
  const bool affine = weight.has_value() && weight->defined();
  TORCH_CHECK(!params || affine, kPrefix, "the gradients of weight and bias need the weight");
  const at::TensorOptions param_options = affine ? weight->options() : input.options();
  const at::Tensor gamma = param_or(weight, channels, 1.0, input, param_options, "weight");
  const at::Tensor beta = param_or(bias, channels, 0.0, input, gamma.options(), "bias");
  at::Tensor dx = output_mask[0] ? at::empty_like(input) : at::empty({0}, input.options());
  at::Tensor dgamma = params ? at::empty({channels}, gamma.options()) : at::empty({0}, gamma.options());
  at::Tensor dbeta = params ? at::empty({channels}, gamma.options()) : at::empty({0}, gamma.options());
  if (input.numel() == 0 || !(output_mask[0] || params)) {
    if (params) dgamma.zero_(), dbeta.zero_();
    return {dx, output_mask[1] ? dgamma : dgamma.narrow(0, 0, 0), output_mask[2] ? dbeta : dbeta.narrow(0, 0, 0)};
  }
  GroupNormCall call = group_norm_call(input, num_groups, gamma, silu);
  set_strides(call.y_strides, grad_output);
  if (output_mask[0]) {
    set_strides(call.dx_strides, dx);
  } else {  // no dx: any one-to-one strides describe it
    const auto dense = hipgrad::packed_strides(input.sizes().vec());
    std::copy(dense.begin(), dense.end(), call.dx_strides);
  }
  const at::Tensor mean_dense = mean.contiguous(), rstd_dense = rstd.contiguous();
  WorkspaceTensor workspace{input.options()};
  check_ran(group_norm_backward(call, grad_output.data_ptr(), input.data_ptr(), gamma.data_ptr(), beta.data_ptr(),
                                mean_dense.data_ptr<float>(), rstd_dense.data_ptr<float>(),
                                output_mask[0] ? dx.data_ptr() : nullptr, params ? dgamma.data_ptr() : nullptr,
                                params ? dbeta.data_ptr() : nullptr, workspace.workspace(), current_stream()));
  if (!output_mask[1]) dgamma = dgamma.narrow(0, 0, 0);
  if (!output_mask[2]) dbeta = dbeta.narrow(0, 0, 0);
  return {dx, dgamma, dbeta};
}

// ---- Convolutions ----------------------------------------------------------------------------

/// One per spatial dimension: `values` of that many, or one for all.
std::array<std::int64_t, 3> per_dim(at::IntArrayRef values, int ndim, const char* name, at::IntArrayRef fallback) {
  if (values.empty()) values = fallback;
  TORCH_CHECK(values.size() == 1 || static_cast<int>(values.size()) == ndim, kPrefix, name, " has ", values.size(),
              " entries for ", ndim, " spatial dimensions");
  std::array<std::int64_t, 3> out{};
  for (int d = 0; d < ndim; ++d) out[d] = values[values.size() == 1 ? 0 : d];
  return out;
}

/// What both conv ops check and describe: the call (its strides set by conv_output) and the
/// output's sizes. `other` is the weight (backward-data) or the input (backward-weight); `size`
/// the output's: the input's sizes or the weight's.
ConvCall conv_call(const at::Tensor& grad_output, const at::Tensor& other, at::IntArrayRef size, bool weight_grad,
                   at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef padding_right,
                   at::IntArrayRef dilation, std::int64_t groups, bool allow_tf32) {
  check_cuda(grad_output, grad_output, "grad_output");
  check_cuda(other, grad_output, weight_grad ? "input" : "weight");
  const int ndim = static_cast<int>(size.size()) - 2;
  TORCH_CHECK(ndim >= 1 && ndim <= 3, kPrefix, "hipgrad convolutions have 1, 2 or 3 spatial dimensions, got sizes ",
              size);
  TORCH_CHECK(grad_output.dim() == ndim + 2 && other.dim() == ndim + 2, kPrefix, "grad_output ", grad_output.sizes(),
              " and ", weight_grad ? "input " : "weight ", other.sizes(), " must have ", ndim + 2, " dimensions");
  TORCH_CHECK(grad_output.scalar_type() == other.scalar_type(), kPrefix, "grad_output is ", grad_output.scalar_type(),
              ", ", weight_grad ? "input " : "weight ", other.scalar_type());
  const at::IntArrayRef x = weight_grad ? other.sizes() : size, w = weight_grad ? size : other.sizes();
  TORCH_CHECK(groups > 0 && x[1] % groups == 0 && w[0] % groups == 0 && w[1] * groups == x[1], kPrefix, "groups ",
              groups, " do not fit input channels ", x[1], " and weight sizes ", w);
  ConvCall call;
  call.dtype = dtype_of(grad_output, "grad_output");
  call.ndim = ndim;
  call.G = groups, call.N = x[0], call.C = x[1] / groups, call.K = w[0] / groups;
  const auto s = per_dim(stride, ndim, "stride", {1}), d = per_dim(dilation, ndim, "dilation", {1});
  const auto left = per_dim(padding, ndim, "padding", {0}),
             right = per_dim(padding_right, ndim, "padding_right", padding);
  for (int i = 0; i < ndim; ++i) {
    call.filter[i] = w[i + 2], call.input[i] = x[i + 2], call.stride[i] = s[i], call.dilation[i] = d[i];
    call.pad_left[i] = left[i], call.pad_right[i] = right[i];
    TORCH_CHECK(s[i] > 0 && d[i] > 0 && left[i] >= 0 && right[i] >= 0, kPrefix,
                "stride and dilation must be positive, padding not negative");
    const std::int64_t out = conv_output_length(x[i + 2], w[i + 2], s[i], d[i], left[i], right[i]);
    TORCH_CHECK(out > 0 && out == grad_output.size(i + 2) && grad_output.size(0) == x[0] && grad_output.size(1) == w[0],
                kPrefix, "grad_output has sizes ", grad_output.sizes(), "; the convolution of input ", x, " by weight ",
                w, " gives other sizes");
  }
  call.allow_tf32 = allow_tf32;
  return call;
}

/// The output of a conv call, dx in grad_output's layout, dw in the input's; the call's strides.
at::Tensor conv_output(ConvCall& call, const at::Tensor& grad_output, const at::Tensor& other, at::IntArrayRef size,
                       bool weight_grad) {
  at::Tensor out = empty_in_layout(size, channels_last(weight_grad ? other : grad_output), grad_output.options());
  const at::Tensor &x = weight_grad ? other : out, &w = weight_grad ? out : other;
  set_conv_strides(&call, x.strides().data(), w.strides().data(), grad_output.strides().data());
  return out;
}

at::Tensor conv_backward(const at::Tensor& grad_output, const at::Tensor& other, at::IntArrayRef size, bool weight_grad,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef padding_right,
                         at::IntArrayRef dilation, std::int64_t groups, bool allow_tf32) {
  ConvCall call =
      conv_call(grad_output, other, size, weight_grad, stride, padding, padding_right, dilation, groups, allow_tf32);
  const c10::cuda::CUDAGuard guard(grad_output.device());
  at::Tensor out = conv_output(call, grad_output, other, size, weight_grad);
  if (out.numel() == 0) return out;
  if (grad_output.numel() == 0 || other.numel() == 0) return out.zero_();
  WorkspaceTensor workspace{grad_output.options()};
  check_ran(weight_grad ? conv_backward_weight(call, other.data_ptr(), grad_output.data_ptr(), out.data_ptr(),
                                               workspace.workspace(), current_stream())
                        : conv_backward_data(call, grad_output.data_ptr(), other.data_ptr(), out.data_ptr(),
                                             workspace.workspace(), current_stream()));
  return out;
}

at::Tensor conv_backward_data_op(const at::Tensor& grad_output, const at::Tensor& weight,
                                 c10::SymIntArrayRef input_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                 at::IntArrayRef padding_right, at::IntArrayRef dilation, std::int64_t groups,
                                 bool allow_tf32) {
  return conv_backward(grad_output, weight, C10_AS_INTARRAYREF_SLOW(input_size), false, stride, padding, padding_right,
                       dilation, groups, allow_tf32);
}

at::Tensor conv_backward_weight_op(const at::Tensor& grad_output, const at::Tensor& input,
                                   c10::SymIntArrayRef weight_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                   at::IntArrayRef padding_right, at::IntArrayRef dilation, std::int64_t groups,
                                   bool allow_tf32) {
  return conv_backward(grad_output, input, C10_AS_INTARRAYREF_SLOW(weight_size), true, stride, padding, padding_right,
                       dilation, groups, allow_tf32);
}

/// The path hipgrad takes for a conv call (its name()), pointers taken as 16-byte aligned.
std::string conv_backward_path(const at::Tensor& grad_output, const at::Tensor& other, at::IntArrayRef size,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef padding_right,
                               at::IntArrayRef dilation, std::int64_t groups, bool allow_tf32, bool weight_grad) {
  ConvCall call =
      conv_call(grad_output, other, size, weight_grad, stride, padding, padding_right, dilation, groups, allow_tf32);
  const c10::cuda::CUDAGuard guard(grad_output.device());
  conv_output(call, grad_output, other, size, weight_grad);
  return weight_grad ? conv_backward_weight_name(call) : conv_backward_data_name(call);
}

}  // namespace
}  // namespace hipgrad_torch

TORCH_LIBRARY(hipgrad, m) {
  m.def(
      "group_norm(Tensor input, int num_groups, Tensor? weight, Tensor? bias, float eps, bool silu) -> (Tensor, "
      "Tensor, Tensor)");
  m.def(
      "group_norm_backward(Tensor grad_output, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, "
      "int num_groups, bool silu, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  m.def(
      "conv_backward_data(Tensor grad_output, Tensor weight, SymInt[] input_size, int[] stride, int[] padding, "
      "int[] padding_right, int[] dilation, int groups, bool allow_tf32) -> Tensor");
  m.def(
      "conv_backward_weight(Tensor grad_output, Tensor input, SymInt[] weight_size, int[] stride, int[] padding, "
      "int[] padding_right, int[] dilation, int groups, bool allow_tf32) -> Tensor");
  // A convolution, forward by PyTorch, backward by hipgrad (autograd.cpp); `backward` is a
  // BackwardChoice.
  m.def(
      "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] padding_right, "
      "int[] dilation, int groups, bool allow_tf32, int backward) -> Tensor");
  m.def(
      "conv_backward_path(Tensor grad_output, Tensor other, int[] size, int[] stride, int[] padding, "
      "int[] padding_right, int[] dilation, int groups, bool allow_tf32, bool weight_grad) -> str");
}

TORCH_LIBRARY_IMPL(hipgrad, CUDA, m) {
  m.impl("group_norm", &hipgrad_torch::group_norm_op);
  m.impl("group_norm_backward", &hipgrad_torch::group_norm_backward_op);
  m.impl("conv_backward_data", &hipgrad_torch::conv_backward_data_op);
  m.impl("conv_backward_weight", &hipgrad_torch::conv_backward_weight_op);
  m.impl("conv_backward_path", &hipgrad_torch::conv_backward_path);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, module) {
  module.doc() = "hipgrad's operators (torch.ops.hipgrad)";
  module.def("conv_choices", &hipgrad_torch::conv_choices,
             "benchmark mode's kept convolution choices: (problem key, hipgrad won)");
  module.def("conv", &hipgrad_torch::conv, "torch.ops.hipgrad.conv for eager calls (TF32 as cuDNN's switch says)",
             pybind11::call_guard<pybind11::gil_scoped_release>());
  module.def("group_norm", &hipgrad_torch::group_norm, "torch.ops.hipgrad.group_norm's y for eager calls",
             pybind11::call_guard<pybind11::gil_scoped_release>());
  module.def("clear_conv_choices", &hipgrad_torch::clear_conv_choices, "forgets benchmark mode's convolution choices");
}
