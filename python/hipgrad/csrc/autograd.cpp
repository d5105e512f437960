/// @file autograd.cpp
/// @brief Autograd of hipgrad's operators in C++ (the Autograd dispatch key), so that a module's
///        call costs the host no Python beyond its own forward: `hipgrad::conv` (forward by
///        PyTorch, backward by hipgrad, PyTorch's backward where hipgrad refuses the problem or
///        benchmark mode timed it faster) and `hipgrad::group_norm`.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "autograd.hpp"

namespace hipgrad_torch {
namespace {

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

/// Up to three values, one per spatial dimension, kept inline (a node stores them without allocating).
struct Dims {
  std::array<std::int64_t, 3> values{};
  std::size_t size = 0;
  Dims() = default;
  explicit Dims(at::IntArrayRef from) : size(from.size()) {
    TORCH_CHECK(size <= 3, "hipgrad: convolutions have 1, 2 or 3 spatial dimensions, got ", size, " values in ", from);
    std::copy(from.begin(), from.end(), values.begin());
  }
  operator at::IntArrayRef() const { return {values.data(), size}; }
  bool operator==(const Dims& other) const { return at::IntArrayRef(*this) == at::IntArrayRef(other); }
};

/// What a conv backward needs besides the tensors.
struct ConvArgs {
  Dims stride, left, right, dilation;
  std::int64_t groups = 1;
  bool allow_tf32 = false;
  BackwardChoice choice = BackwardChoice::kHipgrad;
};

using Grads = std::tuple<at::Tensor, at::Tensor>;

/// PyTorch's backward of the convolution (asymmetric pads by padding the input and narrowing dx).
Grads torch_backward(const at::Tensor& dy, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                     std::array<bool, 2> mask) {
  const std::size_t ndim = a.stride.size;
  const std::vector<std::int64_t> zeros(ndim, 0);
  const bool symmetric = a.left == a.right;
  at::Tensor padded = input;
  if (!symmetric) {
    std::vector<std::int64_t> pads;
    for (std::size_t d = ndim; d-- > 0;) pads.push_back(a.left.values[d]), pads.push_back(a.right.values[d]);
    padded = at::constant_pad_nd(input, pads, 0);
  }
  auto [dx, dw, db] =
      at::convolution_backward(dy, padded, weight, std::nullopt, a.stride, symmetric ? at::IntArrayRef(a.left) : zeros,
                               a.dilation, false, zeros, a.groups, {mask[0], mask[1], false});
  if (dx.defined() && !symmetric)
    for (std::size_t d = 0; d < ndim; ++d) dx = dx.narrow(2 + d, a.left.values[d], input.size(2 + d));
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
std::vector<std::int64_t> problem_key(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                                      std::array<bool, 2> mask) {
  std::vector<std::int64_t> key{
      static_cast<std::int64_t>(input.scalar_type()), input.get_device(), a.groups, a.allow_tf32, mask[0], mask[1]};
  for (const at::Tensor* t : {&input, &weight}) {
    key.insert(key.end(), t->sizes().begin(), t->sizes().end());
    key.insert(key.end(), t->strides().begin(), t->strides().end());
  }
  for (const Dims* v : {&a.stride, &a.left, &a.right, &a.dilation})
    key.insert(key.end(), v->values.begin(), v->values.begin() + v->size);
  return key;
}

/// The kept choice of a problem: 1 hipgrad won, 0 PyTorch won, -1 none yet.
int kept_choice(const std::vector<std::int64_t>& key) {
  const std::lock_guard<std::mutex> lock(choices_mutex);
  const auto kept = choices().find(key);
  return kept == choices().end() ? -1 : kept->second;
}

bool capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(at::cuda::getCurrentCUDAStream(), &status) != cudaSuccess ||
         status != cudaStreamCaptureStatusNone;
}

/// What a candidate costs a training step per call, in ms: the GPU's time and the host's time to
/// queue the call, each measured while a spin kernel holds the GPU back (so that the events time
/// the GPU's work, not the host's queueing), and the larger counts: a step waits on the slower
/// of the two.
template <typename Run>
float step_cost_ms(Run run, int repeats) {
  run();  // warm: plans, workspace, lazy loading
  const auto stream = at::cuda::getCurrentCUDAStream();
  for (std::int64_t cycles = std::int64_t{1} << 21;; cycles *= 4) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    at::cuda::sleep(cycles);
    const auto host_start = std::chrono::steady_clock::now();
    start.record(stream);
    for (int i = 0; i < repeats; ++i) run();
    stop.record(stream);
    const std::chrono::duration<float, std::milli> host = std::chrono::steady_clock::now() - host_start;
    const bool held = !start.query();  // the GPU had not reached the first call when the last was queued
    stop.synchronize();
    if (held || cycles >= (std::int64_t{1} << 27))
      return std::max(start.elapsed_time(stop), host.count()) / static_cast<float>(repeats);
  }
}

/// Whether the backward runs hipgrad's: the caller's choice, or in benchmark mode the kept choice
/// of the problem, timed now where there is none and the tensors are concrete.
bool run_hipgrad(const at::Tensor& dy, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                 std::array<bool, 2> mask) {
  if (a.choice != BackwardChoice::kFaster) return a.choice == BackwardChoice::kHipgrad;
  if (!concrete({&dy, &input, &weight})) return true;
  const std::vector<std::int64_t> key = problem_key(input, weight, a, mask);
  if (const int kept = kept_choice(key); kept >= 0) return kept == 1;
  if (capturing()) return true;
  constexpr int kRepeats = 5;
  bool ours = false;
  try {
    const float hipgrad_ms = step_cost_ms([&] { hipgrad_backward(dy, input, weight, a, mask); }, kRepeats);
    ours = hipgrad_ms <= step_cost_ms([&] { torch_backward(dy, input, weight, a, mask); }, kRepeats);
  } catch (const c10::Error&) {  // hipgrad refused: PyTorch's from now on
  }
  const std::lock_guard<std::mutex> lock(choices_mutex);
  choices()[key] = ours;
  return ours;
}

Grads conv_backward(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a,
                    std::array<bool, 2> mask) {
  // dy in x's memory format, as PyTorch's own backward does: a cat, an upsample or a residual's
  // backward hands dy over contiguous while x is channels-last, and mixed layouts run slower.
  const at::Tensor dy = grad_output.contiguous(input.suggest_memory_format());
  if (!hipgrad_takes(dy) || !run_hipgrad(dy, input, weight, a, mask)) return torch_backward(dy, input, weight, a, mask);
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

/// The backward node of a convolution whose backward hipgrad runs: its edges are the input, the
/// weight and the bias. A node of its own rather than a torch::autograd::Function: it saves its
/// arguments as members, as PyTorch's generated nodes do, at a fraction of a Function's host cost.
struct ConvBackward : public torch::autograd::Node {
  torch::autograd::SavedVariable input, weight;
  ConvArgs args;
  bool bias = false;

  std::string name() const override { return "hipgrad::ConvBackward"; }

  void release_variables() override {
    input.reset_data();
    weight.reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    variable_list out(3);
    const at::Tensor& dy = grads[0];
    if (!dy.defined()) return out;
    const at::Tensor x = input.unpack(), w = weight.unpack();
    const std::array<bool, 2> mask{task_should_compute_output(0), task_should_compute_output(1)};
    if (mask[0] || mask[1]) std::tie(out[0], out[1]) = conv_backward(dy, x, w, args, mask);
    out[1] = with_strides_of(out[1], w);
    if (bias && task_should_compute_output(2)) {
      std::vector<std::int64_t> dims{0};
      for (std::int64_t d = 2; d < dy.dim(); ++d) dims.push_back(d);
      out[2] = dy.sum(dims);
    }
    return out;
  }
};

/// Whether a call's backward is hipgrad's node (else PyTorch's own convolution runs it whole, as
/// cheap on the host as without hipgrad): tensors hipgrad takes, and in benchmark mode a problem
/// whose kept choice is not PyTorch's.
bool hipgrad_node(const at::Tensor& input, const at::Tensor& weight, const ConvArgs& a) {
  if (a.choice == BackwardChoice::kTorch || !hipgrad_takes(input) || !hipgrad_takes(weight)) return false;
  if (a.choice == BackwardChoice::kHipgrad || !concrete({&input, &weight})) return true;
  return kept_choice(problem_key(input, weight, a, {input.requires_grad(), weight.requires_grad()})) != 0;
}

at::Tensor conv_autograd(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef left, at::IntArrayRef right, at::IntArrayRef dilation,
                         std::int64_t groups, bool allow_tf32, std::int64_t choice) {
  TORCH_CHECK(choice >= 0 && choice <= 2, "hipgrad: the backward choice is 0 (hipgrad), 1 (PyTorch) or 2 (the faster)");
  const bool with_bias = present(bias);
  ConvArgs a;
  a.stride = Dims(stride), a.left = Dims(left), a.right = Dims(right), a.dilation = Dims(dilation);
  a.groups = groups, a.allow_tf32 = allow_tf32, a.choice = static_cast<BackwardChoice>(choice);
  const bool grad = torch::autograd::compute_requires_grad(input, weight, with_bias ? *bias : at::Tensor());
  if (!grad || !hipgrad_node(input, weight, a))  // PyTorch's convolution, its autograd included
    return conv_forward(input, weight, bias, stride, left, right, dilation, groups, allow_tf32, choice);
  std::shared_ptr<ConvBackward> node(new ConvBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(input, weight, with_bias ? *bias : at::Tensor()));
  at::Tensor out;
  {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = conv_forward(input, weight, bias, stride, left, right, dilation, groups, allow_tf32, choice);
  }
  torch::autograd::set_history(out, node);
  node->input = torch::autograd::SavedVariable(input, false);
  node->weight = torch::autograd::SavedVariable(weight, false);
  node->args = a;
  node->bias = with_bias;
  return out;
}

using ConvSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                 at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, std::int64_t, bool,
                                 std::int64_t);

const c10::TypedOperatorHandle<ConvSignature>& conv_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("hipgrad::conv", "").typed<ConvSignature>();
  return op;
}

/// Autocast: the floating tensors in autocast's type (the weight's cast kept for the region, as
/// PyTorch's own convolutions do), then the op below autocast.
at::Tensor conv_autocast(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::IntArrayRef stride, at::IntArrayRef left, at::IntArrayRef right, at::IntArrayRef dilation,
                         std::int64_t groups, bool allow_tf32, std::int64_t choice) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  constexpr c10::DeviceType kCuda = c10::DeviceType::CUDA;
  const at::ScalarType type = at::autocast::get_lower_precision_fp_from_device_type(kCuda);
  return conv_op().call(at::autocast::cached_cast(type, input, kCuda), at::autocast::cached_cast(type, weight, kCuda),
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

/// The backward node of hipgrad::group_norm: its edges are the input, the weight and the bias
/// (absent ones invalid); mean and rstd are not differentiable.
struct GroupNormBackward : public torch::autograd::Node {
  torch::autograd::SavedVariable input, mean, rstd, weight, bias;
  std::int64_t groups = 1;
  bool silu = false;

  std::string name() const override { return "hipgrad::GroupNormBackward"; }

  void release_variables() override {
    for (torch::autograd::SavedVariable* saved : {&input, &mean, &rstd, &weight, &bias}) saved->reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    variable_list out(3);
    if (!grads[0].defined()) return out;
    const at::Tensor w = weight.unpack(), b = bias.unpack();
    const std::array<bool, 3> mask{task_should_compute_output(0), w.defined() && task_should_compute_output(1),
                                   b.defined() && task_should_compute_output(2)};
    auto [dx, dgamma, dbeta] =
        run_group_norm_backward(grads[0], input.unpack(), mean.unpack(), rstd.unpack(), w, b, groups, silu, mask);
    if (mask[0]) out[0] = dx;
    if (mask[1]) out[1] = dgamma;
    if (mask[2]) out[2] = dbeta;
    return out;
  }
};

GroupNormOutputs group_norm_autograd(const at::Tensor& input, std::int64_t groups,
                                     const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                     double eps, bool silu) {
  const at::Tensor w = present(weight) ? *weight : at::Tensor(), b = present(bias) ? *bias : at::Tensor();
  GroupNormOutputs out;
  {
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = run_group_norm(input, groups, weight, bias, eps, silu);
  }
  if (!torch::autograd::compute_requires_grad(input, w, b)) return out;
  std::shared_ptr<GroupNormBackward> node(new GroupNormBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(input, w, b));
  torch::autograd::set_history(std::get<0>(out), node);
  node->input = torch::autograd::SavedVariable(input, false);
  node->mean = torch::autograd::SavedVariable(std::get<1>(out), false);
  node->rstd = torch::autograd::SavedVariable(std::get<2>(out), false);
  node->weight = torch::autograd::SavedVariable(w, false);
  node->bias = torch::autograd::SavedVariable(b, false);
  node->groups = groups;
  node->silu = silu;
  return out;
}

}  // namespace

at::Tensor conv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& left,
                const std::vector<std::int64_t>& right, const std::vector<std::int64_t>& dilation, std::int64_t groups,
                std::int64_t choice) {
  return conv_op().call(input, weight, bias, stride, left, right, dilation, groups,
                        at::globalContext().allowTF32CuDNN(), choice);
}

at::Tensor group_norm(const at::Tensor& input, std::int64_t groups, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, double eps, bool silu) {
  return std::get<0>(run_group_norm(input, groups, weight, bias, eps, silu));
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
