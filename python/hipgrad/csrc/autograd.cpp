/// @file autograd.cpp
/// @brief Autograd of hipgrad's operators in C++ (the Autograd dispatch key), so that a module's
///        call costs the host no Python beyond its own forward: `hipgrad::conv` (forward by
///        PyTorch, backward by hipgrad, PyTorch's backward where hipgrad refuses the problem or
///        benchmark mode timed it faster) and `hipgrad::group_norm`.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "autograd.hpp"

namespace hipgrad_torch {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Whether an optional tensor argument is given (autograd counts only those as inputs).
bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// ---- Convolution -----------------------------------------------------------------------------

/// The forward of a convolution with pads `left` and `right` (asymmetric ones by padding first).
at::Tensor conv_forward(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef left, at::IntArrayRef right, at::IntArrayRef dilation,
                        std::int64_t groups, bool /*allow_tf32*/, std::int64_t /*backward*/) {
  const std::size_t ndim = static_cast<std::size_t>(std::max<std::int64_t>(input.dim() - 2, 0));
  const std::vector<std::int64_t> zeros(ndim, 0);
  if (left == right) return at::convolution(input, weight, bias, stride, left, dilation, false, zeros, groups);
  std::vector<std::int64_t> pads;  // constant_pad_nd takes (left, right) pairs from the last dimension
  for (std::size_t d = ndim; d-- > 0;) pads.push_back(left[d]), pads.push_back(right[d]);
  return at::convolution(at::constant_pad_nd(input, pads, 0), weight, bias, stride, zeros, dilation, false, zeros,
                         groups);
}

/// What a conv backward needs besides the tensors.
struct ConvArgs {
  std::vector<std::int64_t> stride, left, right, dilation;
  std::int64_t groups = 1;
  bool allow_tf32 = false;
  BackwardChoice choice = BackwardChoice::kHipgrad;
};

using Grads = std::tuple<at::Tensor, at::Tensor>;

/// PyTorch's backward of the convolution (asymmetric pads by padding the input and narrowing dx).
Grads torch_backward(const at::Tensor& dy, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                     std::array<bool, 2> mask) {
  const std::size_t ndim = a.stride.size();
  const std::vector<std::int64_t> zeros(ndim, 0);
  const bool symmetric = a.left == a.right;
  at::Tensor padded = input;
  if (!symmetric) {
    std::vector<std::int64_t> pads;
    for (std::size_t d = ndim; d-- > 0;) pads.push_back(a.left[d]), pads.push_back(a.right[d]);
    padded = at::constant_pad_nd(input, pads, 0);
  }
  auto [dx, dw, db] = at::convolution_backward(dy, padded, weight, std::nullopt, a.stride, symmetric ? a.left : zeros,
                                               a.dilation, false, zeros, a.groups, {mask[0], mask[1], false});
  if (dx.defined() && !symmetric)
    for (std::size_t d = 0; d < ndim; ++d) dx = dx.narrow(2 + d, a.left[d], input.size(2 + d));
  return {dx, dw};
}

/// hipgrad::conv_backward_data (`other` the weight, `size` the input's) or _weight (`other` the
/// input, `size` the weight's): one signature.
at::Tensor hipgrad_op(bool weight_grad, const at::Tensor& dy, const at::Tensor& other, c10::SymIntArrayRef size,
                      const ConvArgs& a) {
  using Signature = at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymIntArrayRef, at::IntArrayRef,
                               at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, std::int64_t, bool);
  const auto find = [](const char* name) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
  };
  static const auto data = find("hipgrad::conv_backward_data"), weight = find("hipgrad::conv_backward_weight");
  return (weight_grad ? weight : data)
      .call(dy, other, size, a.stride, a.left, a.right, a.dilation, a.groups, a.allow_tf32);
}

Grads hipgrad_backward(const at::Tensor& dy, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                       std::array<bool, 2> mask) {
  at::Tensor dx, dw;
  if (mask[0]) dx = hipgrad_op(false, dy, weight, input.sym_sizes(), a);
  if (mask[1]) dw = hipgrad_op(true, dy, input, weight.sym_sizes(), a);
  return {dx, dw};
}

/// Whether the tensors hold data that kernels can run on now (not fakes or a trace's proxies).
bool concrete(std::initializer_list<const at::Tensor*> tensors) {
  if (c10::impl::dispatch_mode_enabled()) return false;
  for (const at::Tensor* t : tensors)
    if (t->key_set().has_any(c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::Functionalize})) ||
        t->unsafeGetTensorImpl()->has_symbolic_sizes_strides())
      return false;
  return true;
}

bool hipgrad_takes(const at::Tensor& t) {
  const auto type = t.scalar_type();
  return t.is_cuda() && (type == at::kFloat || type == at::kHalf || type == at::kBFloat16);
}

// Benchmark mode's choices: per problem (sizes, strides, type, device, options, mask), whether
// hipgrad's backward was the faster.
std::mutex choices_mutex;
std::map<std::vector<std::int64_t>, bool>& choices() {
  static std::map<std::vector<std::int64_t>, bool> kept;
  return kept;
}

/// A problem's key: x and w (sizes, strides), the type, device, options and mask. dy is left out:
/// the backward brings it into x's memory format, so x decides its layout (and a forward can ask
/// for the choice before any dy exists).
std::vector<std::int64_t> problem_key(const at::Tensor& input, const at::Tensor& weight, at::ScalarType type,
                                      const ConvArgs& a, std::array<bool, 2> mask) {
  std::vector<std::int64_t> key{
      static_cast<std::int64_t>(type), input.get_device(), a.groups, a.allow_tf32, mask[0], mask[1]};
  for (const at::Tensor* t : {&input, &weight}) {
    key.insert(key.end(), t->sizes().begin(), t->sizes().end());
    key.insert(key.end(), t->strides().begin(), t->strides().end());
  }
  for (const auto* v : {&a.stride, &a.left, &a.right, &a.dilation}) key.insert(key.end(), v->begin(), v->end());
  return key;
}

bool capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(at::cuda::getCurrentCUDAStream(), &status) != cudaSuccess ||
         status != cudaStreamCaptureStatusNone;
}

template <typename Run>
float time_ms(Run run, int repeats) {
  run();  // warm: plans, workspace, lazy loading
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  const auto stream = at::cuda::getCurrentCUDAStream();
  start.record(stream);
  for (int i = 0; i < repeats; ++i) run();
  stop.record(stream);
  stop.synchronize();
  return start.elapsed_time(stop) / static_cast<float>(repeats);
}

/// Whether this call runs hipgrad's backward: the caller's choice, or in benchmark mode the kept
/// choice of the problem, timed now where there is none and the tensors are concrete.
bool run_hipgrad(const at::Tensor& dy, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                 std::array<bool, 2> mask) {
  if (a.choice != BackwardChoice::kFaster) return a.choice == BackwardChoice::kHipgrad;
  if (!concrete({&dy, &input, &weight})) return true;
  const std::vector<std::int64_t> key = problem_key(input, weight, dy.scalar_type(), a, mask);
  {
    const std::lock_guard<std::mutex> lock(choices_mutex);
    const auto kept = choices().find(key);
    if (kept != choices().end()) return kept->second;
  }
  if (capturing()) return true;
  constexpr int kRepeats = 5;
  bool ours = false;
  try {
    const float hipgrad_ms = time_ms([&] { hipgrad_backward(dy, input, weight, a, mask); }, kRepeats);
    ours = hipgrad_ms <= time_ms([&] { torch_backward(dy, input, weight, a, mask); }, kRepeats);
  } catch (const c10::Error&) {  // hipgrad refused: PyTorch's from now on
  }
  const std::lock_guard<std::mutex> lock(choices_mutex);
  choices()[key] = ours;
  return ours;
}

Grads conv_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                    std::array<bool, 2> mask) {
  if (!(hipgrad_takes(grad_output) && hipgrad_takes(input) && hipgrad_takes(weight)))
    return torch_backward(grad_output, input, weight, a, mask);
  // dy in x's memory format, as PyTorch's own backward does: a cat, an upsample or a residual's
  // backward hands dy over contiguous while x is channels-last, and mixed layouts run slower.
  const at::Tensor dy = grad_output.contiguous(input.suggest_memory_format());
  if (!run_hipgrad(dy, input, weight, a, mask)) return torch_backward(dy, input, weight, a, mask);
  try {
    return hipgrad_backward(dy, input, weight, a, mask);
  } catch (const c10::Error& error) {
    const std::string what = error.what_without_backtrace();
    if (what.rfind("hipgrad: ", 0) != 0 || !concrete({&dy, &input, &weight})) throw;
    TORCH_WARN_ONCE("hipgrad refused a convolution backward, PyTorch runs it (warned once): ", what);
    return torch_backward(dy, input, weight, a, mask);
  }
}

/// `grad` with `like`'s strides, as PyTorch's own gradients have their parameter's (which
/// DistributedDataParallel's buckets expect): the same memory viewed again where only strides of
/// one-element dimensions differ, else a copy (a weight's gradient is small).
at::Tensor with_strides_of(const at::Tensor& grad, const at::Tensor& like) {
  if (!grad.defined() || grad.strides() == like.strides() || !like.is_non_overlapping_and_dense()) return grad;
  bool same_memory = true;
  for (std::int64_t d = 0; d < grad.dim(); ++d) same_memory &= grad.size(d) == 1 || grad.stride(d) == like.stride(d);
  if (same_memory) return grad.as_strided(like.sizes(), like.strides());
  return at::empty_strided(like.sizes(), like.strides(), grad.options()).copy_(grad);
}

struct ConvFunction : public torch::autograd::Function<ConvFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef left,
                            at::IntArrayRef right, at::IntArrayRef dilation, std::int64_t groups, bool allow_tf32,
                            std::int64_t choice) {
    ctx->save_for_backward({input, weight});
    ctx->saved_data["stride"] = stride.vec();
    ctx->saved_data["left"] = left.vec();
    ctx->saved_data["right"] = right.vec();
    ctx->saved_data["dilation"] = dilation.vec();
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["allow_tf32"] = allow_tf32;
    ctx->saved_data["choice"] = choice;
    ctx->saved_data["bias"] = present(bias);
    return conv_forward(input, weight, bias, stride, left, right, dilation, groups, allow_tf32, choice);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& dy = grads[0];
    variable_list out(10);
    if (!dy.defined()) return out;
    ConvArgs a;
    a.stride = ctx->saved_data["stride"].toIntVector();
    a.left = ctx->saved_data["left"].toIntVector();
    a.right = ctx->saved_data["right"].toIntVector();
    a.dilation = ctx->saved_data["dilation"].toIntVector();
    a.groups = ctx->saved_data["groups"].toInt();
    a.allow_tf32 = ctx->saved_data["allow_tf32"].toBool();
    a.choice = static_cast<BackwardChoice>(ctx->saved_data["choice"].toInt());
    const std::array<bool, 2> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    if (mask[0] || mask[1]) std::tie(out[0], out[1]) = conv_backward(dy, saved[0], saved[1], a, mask);
    out[1] = with_strides_of(out[1], saved[1]);
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) {
      std::vector<std::int64_t> dims{0};
      for (std::int64_t d = 2; d < dy.dim(); ++d) dims.push_back(d);
      out[2] = dy.sum(dims);
    }
    return out;
  }
};

at::Tensor conv_autograd(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef left, at::IntArrayRef right, at::IntArrayRef dilation,
                         std::int64_t groups, bool allow_tf32, std::int64_t choice) {
  TORCH_CHECK(choice >= 0 && choice <= 2, "hipgrad: the backward choice is 0 (hipgrad), 1 (PyTorch) or 2 (the faster)");
  return ConvFunction::apply(input, weight, bias, stride, left, right, dilation, groups, allow_tf32, choice);
}

/// Autocast: the floating tensors in autocast's type (the weight's cast kept for the region, as
/// PyTorch's own convolutions do), then the op below autocast.
at::Tensor conv_autocast(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef left, at::IntArrayRef right, at::IntArrayRef dilation,
                         std::int64_t groups, bool allow_tf32, std::int64_t choice) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("hipgrad::conv", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, at::IntArrayRef,
                            at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, std::int64_t, bool, std::int64_t)>();
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  constexpr c10::DeviceType kCuda = c10::DeviceType::CUDA;
  const at::ScalarType type = at::autocast::get_lower_precision_fp_from_device_type(kCuda);
  return op.call(at::autocast::cached_cast(type, input, kCuda), at::autocast::cached_cast(type, weight, kCuda),
                 at::autocast::cached_cast(type, bias, kCuda), stride, left, right, dilation, groups, allow_tf32,
                 choice);
}

// ---- GroupNorm -------------------------------------------------------------------------------

using GroupNormOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

GroupNormOutputs run_group_norm(const at::Tensor& input, std::int64_t groups, const std::optional<at::Tensor>& weight,
                                const std::optional<at::Tensor>& bias, double eps, bool silu) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("hipgrad::group_norm", "")
                       .typed<GroupNormOutputs(const at::Tensor&, std::int64_t, const std::optional<at::Tensor>&,
                                               const std::optional<at::Tensor>&, double, bool)>();
  return op.call(input, groups, weight, bias, eps, silu);
}

GroupNormOutputs run_group_norm_backward(const at::Tensor& dy, const at::Tensor& input, const at::Tensor& mean,
                                         const at::Tensor& rstd, const at::Tensor& weight, const at::Tensor& bias,
                                         std::int64_t groups, bool silu, std::array<bool, 3> mask) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("hipgrad::group_norm_backward", "")
          .typed<GroupNormOutputs(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, std::int64_t,
                                  bool, std::array<bool, 3>)>();
  const auto optional = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
  return op.call(dy, input, mean, rstd, optional(weight), optional(bias), groups, silu, mask);
}

struct GroupNormFunction : public torch::autograd::Function<GroupNormFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input, std::int64_t groups,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                               double eps, bool silu) {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [y, mean, rstd] = run_group_norm(input, groups, weight, bias, eps, silu);
    ctx->save_for_backward(
        {input, mean, rstd, present(weight) ? *weight : at::Tensor(), present(bias) ? *bias : at::Tensor()});
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["silu"] = silu;
    ctx->mark_non_differentiable({mean, rstd});
    return {y, mean, rstd};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list out(6);
    if (!grads[0].defined()) return out;
    const variable_list s = ctx->get_saved_variables();
    // Input edges: the input, then weight and bias where given.
    const bool weight = s[3].defined(), bias = s[4].defined();
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), weight && ctx->needs_input_grad(1),
                                   bias && ctx->needs_input_grad(weight ? 2 : 1)};
    auto [dx, dgamma, dbeta] =
        run_group_norm_backward(grads[0], s[0], s[1], s[2], s[3], s[4], ctx->saved_data["groups"].toInt(),
                                ctx->saved_data["silu"].toBool(), mask);
    if (mask[0]) out[0] = dx;
    if (mask[1]) out[2] = dgamma;
    if (mask[2]) out[3] = dbeta;
    return out;
  }
};

GroupNormOutputs group_norm_autograd(const at::Tensor& input, std::int64_t groups,
                                     const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                     double eps, bool silu) {
  const variable_list out = GroupNormFunction::apply(input, groups, weight, bias, eps, silu);
  return {out[0], out[1], out[2]};
}

}  // namespace

std::int64_t conv_choice(const at::Tensor& input, const at::Tensor& weight, const std::vector<std::int64_t>& stride,
                         const std::vector<std::int64_t>& left, const std::vector<std::int64_t>& right,
                         const std::vector<std::int64_t>& dilation, std::int64_t groups, bool allow_tf32, bool autocast,
                         bool input_grad, bool weight_grad) {
  ConvArgs a;
  a.stride = stride, a.left = left, a.right = right, a.dilation = dilation, a.groups = groups;
  a.allow_tf32 = allow_tf32;
  const bool cast = autocast && input.is_cuda() && input.is_floating_point() && input.scalar_type() != at::kDouble;
  const at::ScalarType type =
      cast ? at::autocast::get_lower_precision_fp_from_device_type(c10::DeviceType::CUDA) : input.scalar_type();
  const std::vector<std::int64_t> key = problem_key(input, weight, type, a, {input_grad, weight_grad});
  const std::lock_guard<std::mutex> lock(choices_mutex);
  const auto kept = choices().find(key);
  if (kept == choices().end()) return -1;
  return static_cast<std::int64_t>(kept->second ? BackwardChoice::kHipgrad : BackwardChoice::kTorch);
}

std::vector<std::pair<std::vector<std::int64_t>, bool>> conv_choices() {
  const std::lock_guard<std::mutex> lock(choices_mutex);
  return {choices().begin(), choices().end()};
}

void clear_conv_choices() {
  const std::lock_guard<std::mutex> lock(choices_mutex);
  choices().clear();
}

}  // namespace hipgrad_torch

TORCH_LIBRARY_IMPL(hipgrad, CompositeExplicitAutograd, m) { m.impl("conv", &hipgrad_torch::conv_forward); }

TORCH_LIBRARY_IMPL(hipgrad, AutocastCUDA, m) { m.impl("conv", &hipgrad_torch::conv_autocast); }

TORCH_LIBRARY_IMPL(hipgrad, Autograd, m) {
  m.impl("conv", &hipgrad_torch::conv_autograd);
  m.impl("group_norm", &hipgrad_torch::group_norm_autograd);
}
