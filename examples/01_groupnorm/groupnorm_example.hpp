/// @file groupnorm_example.hpp
/// @brief What the four GroupNorm examples share: the command line, inputs for a layout, upload
///        with poisoned outputs, the run, verification against the CPU reference, timing and the
///        report. Each example's main picks its op with example_main<Op::k...>.
///
///   example_groupnorm_<op> [verify init time [N H W G C]] [--dtype=fp16|bf16|fp32]
///       [--param-dtype=same|fp32] [--layout=nhwc|nchw] [--swish=0|1] [--swish-beta=1.0]
///       [--eps=1e-5] [--repeats=20]
///
/// Sizes follow CK's GroupNorm examples: C counts the channels of ONE group, so x is
/// [N, G·C, H, W]. Exit status: 0 passed, 1 mismatch or runtime error (no GPU included),
/// 2 usage error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/host/reference/groupnorm.hpp"
#include "hipgrad/host/reference/groupnorm_tolerance.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/host/timer.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/backward_data.hpp"
#include "hipgrad/ops/groupnorm/backward_gamma_beta.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "groupnorm_instances.hpp"

namespace groupnorm_example {

using hipgrad::Index;
using hipgrad::Status;
namespace gn = hipgrad::groupnorm;
namespace hh = hipgrad::host;

/// The op an example runs.
enum class Op { kForward, kBackwardData, kBackwardGammaBeta, kBackward };

constexpr bool is_backward(Op op) { return op != Op::kForward; }
constexpr bool writes_dgamma_dbeta(Op op) { return op == Op::kBackwardGammaBeta || op == Op::kBackward; }

constexpr const char* program_name(Op op) {
  switch (op) {
    case Op::kForward: return "example_groupnorm_fwd";
    case Op::kBackwardData: return "example_groupnorm_bwd_data";
    case Op::kBackwardGammaBeta: return "example_groupnorm_bwd_gamma_beta";
    case Op::kBackward: return "example_groupnorm_bwd";
  }
  return "example_groupnorm";
}

template <Op kOp>
using ProblemOf = std::conditional_t<kOp == Op::kForward, gn::ForwardProblem, gn::BackwardProblem>;

template <Op kOp, typename T, typename TP>
using KernelOf =
    std::conditional_t<kOp == Op::kForward, gn::Forward<T, TP>,
                       std::conditional_t<kOp == Op::kBackwardData, gn::BackwardData<T, TP>,
                                          std::conditional_t<kOp == Op::kBackwardGammaBeta,
                                                             gn::BackwardGammaBeta<T, TP>, gn::Backward<T, TP>>>>;

// ---- command line -------------------------------------------------------------------------------

/// Everything the command line sets; the defaults are CK's example sizes.
struct Config {
  hh::ExampleArgs args;  ///< verify, init, time
  Index n = 32, h = 16, w = 16, groups = 64, channels_per_group = 128;
  std::string dtype = "fp16";
  bool param_fp32 = true;  ///< γ, β, dγ, dβ in fp32, else in the data type
  bool channels_last = true;
  gn::Activation activation = gn::Activation::kIdentity;
  float swish_beta = 1.0f;
  float epsilon = 1e-5f;
  int repeats = 20;

  Index channels() const { return groups * channels_per_group; }
  Index elements() const { return n * channels() * h * w; }
  std::vector<Index> lengths() const { return {n, channels(), h, w}; }
  /// Reduction length of the statistics and of dx: one group of one sample.
  Index group_size() const { return channels_per_group * h * w; }
  /// Reduction length of dγ and dβ: one channel over all samples.
  Index channel_size() const { return n * h * w; }
};

inline constexpr const char* kSizesHelp =
    "N H W G C (default 32 16 16 64 128); C is the channels per group: x is [N, G*C, H, W]";

inline constexpr const char* kOptionsHelp =
    "options:\n"
    "  --dtype=fp16|bf16|fp32    x, y, dy, dx (default fp16)\n"
    "  --param-dtype=same|fp32   gamma, beta, dgamma, dbeta: the data type or fp32 (default fp32)\n"
    "  --layout=nhwc|nchw        memory layout of x, y, dy, dx (default nhwc)\n"
    "  --swish=0|1               fuse Swish z*sigmoid(beta*z) after the affine step (default 0)\n"
    "  --swish-beta=1.0          Swish's beta (default 1: SiLU)\n"
    "  --eps=1e-5                epsilon added to the variance (default 1e-5)\n"
    "  --repeats=20              timed runs (default: the time argument if > 1, else 20)\n";

inline std::string usage(const char* program) { return hh::example_usage(program, kSizesHelp, true) + kOptionsHelp; }

/// Without a time argument the examples time, as CK's GroupNorm client examples do (they print a
/// Perf line on their default run).
inline hh::ExampleArgs default_args() {
  hh::ExampleArgs a;
  a.time = true;
  return a;
}

inline Status parse_sizes(const std::vector<std::int64_t>& sizes, Config* c) {
  if (sizes.empty()) return Status::ok();
  if (sizes.size() != 5) {
    return Status::invalid_argument("expected 0 or 5 sizes (N H W G C), got " + std::to_string(sizes.size()));
  }
  double elements = 1;  // in double: the product of five int64 may overflow
  for (std::int64_t s : sizes) {
    if (s <= 0) return Status::invalid_argument("sizes must be positive, got " + std::to_string(s));
    elements *= static_cast<double>(s);
  }
  if (elements > 0x1p62) return Status::invalid_argument("N*H*W*G*C is too large");
  c->n = sizes[0];
  c->h = sizes[1];
  c->w = sizes[2];
  c->groups = sizes[3];
  c->channels_per_group = sizes[4];
  return Status::ok();
}

/// Option `key` (or `fallback` when absent), which must be one of `choices`.
inline Status parse_choice(const hh::ExampleArgs& a, const char* key, const char* fallback,
                           std::initializer_list<const char*> choices, std::string* value) {
  *value = a.get_string(key, fallback);
  std::string list;
  for (const char* choice : choices) {
    if (*value == choice) return Status::ok();
    list += (list.empty() ? "" : ", ") + std::string(choice);
  }
  return Status::invalid_argument("bad option --" + std::string(key) + "=" + *value + ": expected " + list);
}

/// A finite fp32 option; checked in double first, since converting a double beyond fp32's range is
/// undefined.
inline Status parse_float(const hh::ExampleArgs& a, const char* key, double fallback, float* value) {
  const double v = a.get_double(key, fallback);
  HIPGRAD_RETURN_IF_ERROR(a.option_status());
  if (std::fabs(v) > std::numeric_limits<float>::max()) {
    return Status::invalid_argument("bad option --" + std::string(key) + ": beyond the range of fp32");
  }
  *value = static_cast<float>(v);
  return Status::ok();
}

inline Status parse_choices(Config* c) {
  std::string param, layout;
  HIPGRAD_RETURN_IF_ERROR(parse_choice(c->args, "dtype", "fp16", {"fp16", "bf16", "fp32"}, &c->dtype));
  HIPGRAD_RETURN_IF_ERROR(parse_choice(c->args, "param-dtype", "fp32", {"same", "fp32"}, &param));
  HIPGRAD_RETURN_IF_ERROR(parse_choice(c->args, "layout", "nhwc", {"nhwc", "nchw"}, &layout));
  c->param_fp32 = param == "fp32";
  c->channels_last = layout == "nhwc";
  return Status::ok();
}

inline Status parse_numbers(Config* c) {
  const bool swish = c->args.get_bool("swish", false);
  const std::int64_t repeats = c->args.timed_runs(20);
  HIPGRAD_RETURN_IF_ERROR(c->args.option_status());
  HIPGRAD_RETURN_IF_ERROR(parse_float(c->args, "swish-beta", 1.0, &c->swish_beta));
  HIPGRAD_RETURN_IF_ERROR(parse_float(c->args, "eps", 1e-5, &c->epsilon));
  // A tiny epsilon rounds to 0 in fp32, which the op rejects: say so here, as a usage error.
  if (!(c->epsilon > 0.0f)) return Status::invalid_argument("--eps must be positive in fp32");
  if (repeats < 1 || repeats > 1000000) return Status::invalid_argument("--repeats must be 1 to 1000000");
  c->activation = swish ? gn::Activation::kSwish : gn::Activation::kIdentity;
  c->repeats = static_cast<int>(repeats);
  return Status::ok();
}

/// Everything after the generic parse: sizes and options. Any failure is a usage error.
inline Status parse_config(Config* c) {
  HIPGRAD_RETURN_IF_ERROR(
      c->args.reject_unknown_options({"dtype", "param-dtype", "layout", "swish", "swish-beta", "eps", "repeats"}));
  HIPGRAD_RETURN_IF_ERROR(parse_sizes(c->args.sizes, c));
  HIPGRAD_RETURN_IF_ERROR(parse_choices(c));
  return parse_numbers(c);
}

// ---- problems and host tensors --------------------------------------------------------------------

template <Op kOp>
ProblemOf<kOp> make_problem(const Config& c) {
  ProblemOf<kOp> p = ProblemOf<kOp>::packed(c.lengths(), c.groups, c.channels_last);
  p.activation = c.activation;
  p.swish_beta = c.swish_beta;
  if constexpr (kOp == Op::kForward) p.epsilon = c.epsilon;
  return p;
}

/// The host tensors take their strides from the problem, so that host and device agree on the
/// layout by construction.
template <typename T>
hh::Tensor<T> data_tensor(const Config& c) {
  const gn::TensorShape s = make_problem<Op::kForward>(c).x;
  return hh::Tensor<T>(c.lengths(), std::vector<Index>(s.strides.begin(), s.strides.begin() + s.rank));
}
inline hh::Tensor<float> stats_tensor(const Config& c) { return hh::Tensor<float>({c.n, c.groups}); }
template <typename TP>
hh::Tensor<TP> channel_tensor(const Config& c) {
  return hh::Tensor<TP>({c.channels()});
}

/// A default-constructed Tensor stands for "not used by this op" (it has no storage).
template <typename T>
bool present(const hh::Tensor<T>& t) {
  return !t.storage().empty();
}

template <typename T, typename TP>
struct HostInputs {
  hh::Tensor<T> x, dy;  ///< dy: backward only
  hh::Tensor<TP> gamma, beta;
};

/// The op's outputs; those it does not produce stay absent.
template <typename T, typename TP>
struct HostOutputs {
  hh::Tensor<T> data;            ///< y of the forward, dx of the backward
  hh::Tensor<float> mean, rstd;  ///< forward only
  hh::Tensor<TP> dgamma, dbeta;
};

template <Op kOp, typename T, typename TP>
HostInputs<T, TP> make_inputs(const Config& c) {
  HostInputs<T, TP> in{data_tensor<T>(c), {}, channel_tensor<TP>(c), channel_tensor<TP>(c)};
  // With init 0 the tensors keep the zeros they were created with: still a well-defined problem.
  hh::fill(in.x, c.args.init, 1);
  hh::fill(in.gamma, c.args.init, 3);
  hh::fill(in.beta, c.args.init, 4);
  if constexpr (is_backward(kOp)) {
    in.dy = data_tensor<T>(c);
    hh::fill(in.dy, c.args.init, 2);
  }
  return in;
}

template <Op kOp, typename T, typename TP>
HostOutputs<T, TP> make_outputs(const Config& c) {
  HostOutputs<T, TP> out;
  if (kOp != Op::kBackwardGammaBeta) out.data = data_tensor<T>(c);
  if (kOp == Op::kForward) out.mean = out.rstd = stats_tensor(c);
  if (writes_dgamma_dbeta(kOp)) out.dgamma = out.dbeta = channel_tensor<TP>(c);
  return out;
}

// ---- device ---------------------------------------------------------------------------------------

template <typename T, typename TP>
struct DeviceTensors {
  int copies = 1;                  ///< of x and dy: timed run i reads copy i % copies
  std::size_t copy_elements = 0;   ///< storage elements of one copy
  hh::DeviceBuffer<T> x, dy, out;  ///< out: y of the forward, dx of the backward (see save_statistics)
  hh::DeviceBuffer<TP> gamma, beta, dgamma, dbeta;
  hh::DeviceBuffer<float> mean, rstd;
  hh::DeviceBuffer<unsigned char> workspace;

  std::size_t offset(int iteration) const { return static_cast<std::size_t>(iteration % copies) * copy_elements; }
  const T* x_copy(int iteration) const { return x.data() + offset(iteration); }
  const T* dy_copy(int iteration) const { return dy.data() + offset(iteration); }
};

/// `copies` back-to-back copies of the tensor's storage; nothing for an absent tensor.
template <typename T>
Status upload(const hh::Tensor<T>& t, int copies, hh::DeviceBuffer<T>* b) {
  if (!present(t)) return Status::ok();
  const std::size_t count = t.storage().size();
  HIPGRAD_RETURN_IF_ERROR(b->allocate(count * static_cast<std::size_t>(copies)));
  for (int i = 0; i < copies; ++i) {
    HIPGRAD_RETURN_IF_HIP_ERROR(
        hipMemcpy(b->data() + static_cast<std::size_t>(i) * count, t.data(), t.storage_bytes(), hipMemcpyHostToDevice));
  }
  return Status::ok();
}

template <typename T>
Status download(const hh::DeviceBuffer<T>& b, hh::Tensor<T>* t) {
  return present(*t) ? b.copy_to(*t) : Status::ok();
}

template <typename T, typename TP>
Status upload_inputs(const Config& c, const HostInputs<T, TP>& in, DeviceTensors<T, TP>* d) {
  d->copy_elements = in.x.storage().size();
  // Timed runs rotate through enough copies of the large inputs that none is still in L2.
  d->copies = c.args.time ? hh::l2_rotation_copies(in.x.storage_bytes() + in.dy.storage_bytes()) : 1;
  HIPGRAD_RETURN_IF_ERROR(upload(in.x, d->copies, &d->x));
  HIPGRAD_RETURN_IF_ERROR(upload(in.dy, d->copies, &d->dy));
  HIPGRAD_RETURN_IF_ERROR(upload(in.gamma, 1, &d->gamma));
  return upload(in.beta, 1, &d->beta);
}

/// The backward ops also run the forward first (save_statistics), so the workspace fits both.
template <Op kOp, typename T, typename TP>
std::size_t workspace_bytes(const Config& c) {
  return std::max(gn::Forward<T, TP>::workspace_size(make_problem<Op::kForward>(c)),
                  KernelOf<kOp, T, TP>::workspace_size(make_problem<kOp>(c)));
}

template <Op kOp, typename T, typename TP>
Status allocate_outputs(const Config& c, DeviceTensors<T, TP>* d) {
  const auto stats = static_cast<std::size_t>(c.n * c.groups);
  const auto params = writes_dgamma_dbeta(kOp) ? static_cast<std::size_t>(c.channels()) : 0;
  HIPGRAD_RETURN_IF_ERROR(d->out.allocate(d->copy_elements));
  HIPGRAD_RETURN_IF_ERROR(d->mean.allocate(stats));
  HIPGRAD_RETURN_IF_ERROR(d->rstd.allocate(stats));
  HIPGRAD_RETURN_IF_ERROR(d->dgamma.allocate(params));
  HIPGRAD_RETURN_IF_ERROR(d->dbeta.allocate(params));
  return d->workspace.allocate(workspace_bytes<kOp, T, TP>(c));
}

/// Whatever the op writes: 0xFF bytes are NaN in fp32, fp16 and bf16, so an element the op leaves
/// unwritten fails verification. The workspace too: the op must not rely on zeroed scratch.
template <Op kOp, typename T, typename TP>
Status poison_outputs(DeviceTensors<T, TP>* d) {
  HIPGRAD_RETURN_IF_ERROR(d->out.fill_bytes(0xff));
  HIPGRAD_RETURN_IF_ERROR(d->dgamma.fill_bytes(0xff));
  HIPGRAD_RETURN_IF_ERROR(d->dbeta.fill_bytes(0xff));
  if constexpr (is_backward(kOp)) {
    return d->workspace.fill_bytes(0xff);  // mean and rstd are the backward's inputs
  } else {
    HIPGRAD_RETURN_IF_ERROR(d->workspace.fill_bytes(0xff));
    HIPGRAD_RETURN_IF_ERROR(d->mean.fill_bytes(0xff));
    return d->rstd.fill_bytes(0xff);
  }
}

template <Op kOp, typename T, typename TP>
typename KernelOf<kOp, T, TP>::Args make_args(DeviceTensors<T, TP>& d, int iteration) {
  const TP* gamma = d.gamma.data();
  const TP* beta = d.beta.data();
  if constexpr (kOp == Op::kForward) {
    return {d.x_copy(iteration), gamma, beta, d.out.data(), d.mean.data(), d.rstd.data()};
  } else if constexpr (kOp == Op::kBackwardData) {
    return {d.dy_copy(iteration), d.x_copy(iteration), gamma, beta, d.mean.data(), d.rstd.data(), d.out.data()};
  } else if constexpr (kOp == Op::kBackwardGammaBeta) {
    return {d.dy_copy(iteration), d.x_copy(iteration), gamma,           beta,
            d.mean.data(),        d.rstd.data(),       d.dgamma.data(), d.dbeta.data()};
  } else {
    return {d.dy_copy(iteration), d.x_copy(iteration), gamma,           beta,          d.mean.data(),
            d.rstd.data(),        d.out.data(),        d.dgamma.data(), d.dbeta.data()};
  }
}

/// One run of the op on copy `iteration % copies` of the inputs, on the default stream.
template <Op kOp, typename T, typename TP>
Status launch(const ProblemOf<kOp>& p, DeviceTensors<T, TP>& d, int iteration) {
  return KernelOf<kOp, T, TP>::run(p, make_args<kOp>(d, iteration), d.workspace.data(), d.workspace.bytes(), nullptr);
}

/// The backward ops read the forward's saved mean and rstd: the GPU forward makes them. Its y
/// lands in `out`, which is poisoned afterwards (dx) or not read again (dγ/dβ only).
template <typename T, typename TP>
Status save_statistics(const Config& c, DeviceTensors<T, TP>& d) {
  return launch<Op::kForward>(make_problem<Op::kForward>(c), d, 0);
}

template <typename T, typename TP>
Status download_outputs(const DeviceTensors<T, TP>& d, HostOutputs<T, TP>* out) {
  HIPGRAD_RETURN_IF_ERROR(download(d.out, &out->data));
  HIPGRAD_RETURN_IF_ERROR(download(d.mean, &out->mean));
  HIPGRAD_RETURN_IF_ERROR(download(d.rstd, &out->rstd));
  HIPGRAD_RETURN_IF_ERROR(download(d.dgamma, &out->dgamma));
  return download(d.dbeta, &out->dbeta);
}

/// Runs the op once into *out and, when timing, the timed runs (median milliseconds in *ms).
template <Op kOp, typename T, typename TP>
Status run_on_device(const Config& c, const HostInputs<T, TP>& in, HostOutputs<T, TP>* out, float* ms) {
  DeviceTensors<T, TP> d;
  HIPGRAD_RETURN_IF_ERROR(upload_inputs(c, in, &d));
  HIPGRAD_RETURN_IF_ERROR(allocate_outputs<kOp>(c, &d));
  if constexpr (is_backward(kOp)) {
    HIPGRAD_RETURN_IF_ERROR(save_statistics(c, d));
  }
  HIPGRAD_RETURN_IF_ERROR(poison_outputs<kOp>(&d));
  const ProblemOf<kOp> problem = make_problem<kOp>(c);
  HIPGRAD_RETURN_IF_ERROR(launch<kOp>(problem, d, 0));
  HIPGRAD_RETURN_IF_ERROR(download_outputs(d, out));  // synchronous: also reports the kernels' errors
  if (!c.args.time) return Status::ok();
  hh::TimingOptions timing;
  timing.repeats = c.repeats;
  return hh::time_median_ms([&](int iteration) { return launch<kOp>(problem, d, iteration); }, timing, ms);
}

// ---- verification -----------------------------------------------------------------------------------

/// The backward's expected dx, dγ, dβ from the given statistics.
template <typename T, typename TP>
Status reference_backward(const Config& c, const HostInputs<T, TP>& in, const hh::Tensor<float>& mean,
                          const hh::Tensor<float>& rstd, HostOutputs<T, TP>* ref) {
  namespace r = hipgrad::host::reference;
  if (present(ref->data)) {
    HIPGRAD_RETURN_IF_ERROR(r::groupnorm_backward_data(in.dy, in.x, in.gamma, in.beta, mean, rstd, c.groups,
                                                       c.activation, c.swish_beta, ref->data));
  }
  if (!present(ref->dgamma)) return Status::ok();
  return r::groupnorm_backward_gamma_beta(in.dy, in.x, in.gamma, in.beta, mean, rstd, c.groups, c.activation,
                                          c.swish_beta, ref->dgamma, ref->dbeta);
}

/// The op's outputs computed on the CPU. The backward's statistics come from the CPU forward here
/// and from the GPU forward on the device. That is consistent: both are the same quantities within
/// the forward's tolerance (verified by the forward's tests and example_groupnorm_fwd), and a
/// difference that small moves dx, dγ and dβ far less than their tolerances, so a mismatch here
/// is the backward's own.
/// Also sets the tolerances of every output (groupnorm_tolerance.hpp).
template <Op kOp, typename T, typename TP>
Status compute_reference(const Config& c, const HostInputs<T, TP>& in, HostOutputs<T, TP>* ref,
                         hipgrad::host::reference::GroupNormTolerances* tol) {
  // ε and β as the GPU sees them (fp32), widened to the reference's double.
  HostOutputs<T, TP> forward = make_outputs<Op::kForward, T, TP>(c);
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::reference::groupnorm_forward(in.x, in.gamma, in.beta, c.groups, c.epsilon,
                                                                      c.activation, c.swish_beta, forward.data,
                                                                      forward.mean, forward.rstd));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::reference::groupnorm_tolerances(
      in.x, is_backward(kOp) ? &in.dy : nullptr, in.gamma, in.beta, forward.mean, forward.rstd, c.groups, tol));
  if constexpr (kOp == Op::kForward) {
    *ref = std::move(forward);
    return Status::ok();
  } else {
    *ref = make_outputs<kOp, T, TP>(c);
    return reference_backward(c, in, forward.mean, forward.rstd, ref);
  }
}

/// Compares one output, if the op has it, and prints the report.
template <typename T>
bool check_output(const char* name, const hh::Tensor<T>& result, const hh::Tensor<T>& expected, hh::Tolerance tol) {
  if (!present(expected)) return true;
  const hh::CheckResult check = hh::check_close(result, expected, tol);
  std::printf("verification %s: %s\n", name, check.report.c_str());
  return check.ok;
}

/// Every output against the CPU, with the tolerances of the GroupNorm tests.
template <Op kOp, typename T, typename TP>
bool verify(const Config& c, const HostInputs<T, TP>& in, const HostOutputs<T, TP>& out) {
  HostOutputs<T, TP> ref;
  hipgrad::host::reference::GroupNormTolerances tol;
  const Status st = compute_reference<kOp>(c, in, &ref, &tol);
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s: CPU reference: %s\n", program_name(kOp), st.to_string().c_str());
    return false;
  }
  bool ok = check_output(is_backward(kOp) ? "dx" : "y", out.data, ref.data, is_backward(kOp) ? tol.dx : tol.y);
  ok &= check_output("mean", out.mean, ref.mean, tol.mean);
  ok &= check_output("rstd", out.rstd, ref.rstd, tol.rstd);
  ok &= check_output("dgamma", out.dgamma, ref.dgamma, tol.dgamma);
  ok &= check_output("dbeta", out.dbeta, ref.dbeta, tol.dbeta);
  return ok;
}

// ---- report -----------------------------------------------------------------------------------------

template <Op kOp, typename T, typename TP>
void print_config(const Config& c) {
  std::printf(
      "config: %s, dtype %s, param %s, layout %s, N %lld H %lld W %lld G %lld C %lld (x %s), swish %d (beta %g), "
      "eps %g, init %s\n",
      KernelOf<kOp, T, TP>::name(make_problem<kOp>(c)).c_str(), hipgrad::type_name<T>(), hipgrad::type_name<TP>(),
      c.channels_last ? "nhwc" : "nchw", static_cast<long long>(c.n), static_cast<long long>(c.h),
      static_cast<long long>(c.w), static_cast<long long>(c.groups), static_cast<long long>(c.channels_per_group),
      hipgrad::lengths_to_string(c.lengths()).c_str(), c.activation == gn::Activation::kSwish ? 1 : 0,
      static_cast<double>(c.swish_beta), static_cast<double>(c.epsilon), hh::init_method_name(c.args.init));
}

/// The least memory traffic of one run: each large tensor read or written once, plus the small
/// outputs ([N, G] statistics, [C] dγ/dβ). The small inputs (γ, β, mean, rstd) are left out.
template <Op kOp, typename T, typename TP>
double traffic_bytes(const Config& c) {
  const double data = static_cast<double>(c.elements()) * sizeof(T);
  const double stats = 2.0 * static_cast<double>(c.n * c.groups) * sizeof(float);
  const double params = 2.0 * static_cast<double>(c.channels()) * sizeof(TP);
  switch (kOp) {
    case Op::kForward: return 2 * data + stats;             // x in; y, mean, rstd out
    case Op::kBackwardData: return 3 * data;                // x, dy in; dx out
    case Op::kBackwardGammaBeta: return 2 * data + params;  // x, dy in; dγ, dβ out
    case Op::kBackward: return 3 * data + params;           // x, dy in; dx, dγ, dβ out
  }
  return 0;
}

template <Op kOp, typename T, typename TP>
void print_perf(const Config& c, float ms) {
  // Nominal: about 8 flops per element (sums of x and x², normalise, scale and shift, or their
  // backward counterparts); a rate for comparing runs, not an exact count.
  const double flops = 8.0 * static_cast<double>(c.elements());
  std::printf("Perf: %.4f ms, %.3f TFlops, %.1f GB/s\n", static_cast<double>(ms), flops / (ms * 1e9),
              traffic_bytes<kOp, T, TP>(c) / (ms * 1e6));
}

// ---- main -------------------------------------------------------------------------------------------

template <Op kOp, typename T, typename TP>
int run(const Config& c) {
  print_config<kOp, T, TP>(c);
  const HostInputs<T, TP> in = make_inputs<kOp, T, TP>(c);
  HostOutputs<T, TP> out = make_outputs<kOp, T, TP>(c);
  float ms = 0;
  const Status st = run_on_device<kOp>(c, in, &out, &ms);
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", program_name(kOp), st.to_string().c_str());
    return 1;
  }
  const bool ok = !c.args.verify || verify<kOp>(c, in, out);
  if (c.args.time) print_perf<kOp, T, TP>(c, ms);
  return ok ? 0 : 1;
}

template <Op kOp>
int dispatch(const Config& c) {
  using hipgrad::bfloat16;
  using hipgrad::half;
  if (c.dtype == "fp32") return run<kOp, float, float>(c);
  if (c.dtype == "fp16") return c.param_fp32 ? run<kOp, half, float>(c) : run<kOp, half, half>(c);
  return c.param_fp32 ? run<kOp, bfloat16, float>(c) : run<kOp, bfloat16, bfloat16>(c);
}

/// The whole example: 0 passed, 1 failed (or no GPU), 2 usage error.
template <Op kOp>
int example_main(int argc, char** argv) {
  Config c;
  const Status parsed = hh::parse_example_args(argc, argv, &c.args, default_args());
  if (parsed.is_ok() && c.args.help) {
    std::printf("%s", usage(argv[0]).c_str());
    return 0;
  }
  const Status st = parsed.is_ok() ? parse_config(&c) : parsed;
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s\n%s", st.message().c_str(), usage(argv[0]).c_str());
    return 2;
  }
  if (c.args.dry_run()) {  // what the command line selects, without a GPU
    std::printf(
        "%s: verify %d, init %s, time %d (%d runs), dtype %s, param %s, layout %s, N %lld H %lld W %lld G %lld "
        "C %lld, swish %d\n",
        program_name(kOp), c.args.verify ? 1 : 0, hh::init_method_name(c.args.init), c.args.time ? 1 : 0,
        c.args.time ? c.repeats : 0, c.dtype.c_str(), c.param_fp32 ? "fp32" : "same", c.channels_last ? "nhwc" : "nchw",
        static_cast<long long>(c.n), static_cast<long long>(c.h), static_cast<long long>(c.w),
        static_cast<long long>(c.groups), static_cast<long long>(c.channels_per_group),
        c.activation == gn::Activation::kSwish ? 1 : 0);
    return 0;
  }
  if (!hh::require_gpu(program_name(kOp))) return 1;
  try {
    return dispatch<kOp>(c);
  } catch (const std::exception& e) {  // host tensors too large for memory
    std::fprintf(stderr, "%s: %s\n", program_name(kOp), e.what());
    return 1;
  }
}

}  // namespace groupnorm_example
