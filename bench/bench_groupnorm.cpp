/// @file bench_groupnorm.cpp
/// @brief GroupNorm benchmark: forward (± Swish) and fused backward (± Swish) over a shape list,
///        dtypes and layouts; one JSON line per configuration (see bench_harness.hpp).
///
///   bench_groupnorm [--ops=fwd,fwd_swish,bwd,bwd_swish] [--dtypes=fp16,bf16,fp32]
///                   [--layouts=nchw,nhwc] [--shapes=all|acceptance|small] [--repeats=20]
///                   [--algorithm=auto|one_read|three_pass|staged]
///   bench_groupnorm --host-overhead [--calls=1000]
///
/// --host-overhead: host microseconds per run() of the forward and the fused backward on small
/// problems (their kernels take less than a call's host time), beside an empty kernel's launch.
///
/// Bytes counted are the minimum traffic: forward x read + y written; backward x and dy read +
/// dx written (γ, β, statistics and dγ/dβ are negligible and left out, as PyTorch's side does).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/device_fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "groupnorm_instances.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::host::DeviceBuffer;
namespace gn = hipgrad::groupnorm;

struct Shape {
  std::vector<Index> lengths;  // [N, C, spatial...]
  Index groups;
};

std::vector<Shape> shapes(const std::string& set) {
  std::vector<Shape> acceptance = {{{32, 320, 64, 64}, 32}};
  if (set == "acceptance") return acceptance;
  // Launch-bound problems, whose kernels take a few microseconds.
  if (set == "small")
    return {{{2, 64, 8, 8}, 32}, {{2, 1280, 16, 16}, 32}, {{2, 320, 32, 32}, 32}, {{4, 512, 16, 16}, 32}};
  return {{{32, 320, 64, 64}, 32}, {{16, 640, 32, 32}, 32},  {{8, 512, 128, 128}, 32}, {{1, 2048, 16, 16}, 64},
          {{128, 256, 28, 28}, 8}, {{1, 128, 512, 512}, 32}, {{2, 64, 16, 64, 64}, 32}};
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

template <typename T>
Status random_buffer(DeviceBuffer<T>& b, std::size_t count, std::uint64_t seed) {
  HIPGRAD_RETURN_IF_ERROR(b.allocate(count));
  return hipgrad::host::fill_uniform_on_device(b.data(), static_cast<Index>(count), seed);
}

struct Config {
  Shape shape;
  std::string op, layout;
  int repeats;
  gn::Algorithm algorithm;
};

void report(const Config& c, const char* dtype, const std::string& name, float ms, double bytes) {
  std::vector<long long> lengths(c.shape.lengths.begin(), c.shape.lengths.end());
  hipgrad::bench::JsonLine()
      .add("op", "groupnorm_" + c.op)
      .add_list("lengths", lengths)
      .add("groups", static_cast<double>(c.shape.groups))
      .add("dtype", dtype)
      .add("layout", c.layout)
      .add("name", name)
      .add("ms", ms)
      .add("bytes", bytes)
      .add("tbps", bytes / (ms * 1e-3) / 1e12)
      .print();
}

template <typename T>
Status run_config(const Config& c) {
  const bool channels_last = c.layout == "nhwc";
  const bool swish = c.op == "fwd_swish" || c.op == "bwd_swish";
  const bool backward = c.op == "bwd" || c.op == "bwd_swish";
  auto fp = gn::ForwardProblem::packed(c.shape.lengths, c.shape.groups, channels_last);
  fp.activation = swish ? gn::Activation::kSwish : gn::Activation::kIdentity;
  auto bp = gn::BackwardProblem::packed(c.shape.lengths, c.shape.groups, channels_last);
  bp.activation = fp.activation;
  fp.algorithm = bp.algorithm = c.algorithm;
  const std::size_t elements = static_cast<std::size_t>(fp.x.num_elements());
  const std::size_t channels = static_cast<std::size_t>(fp.x.c()),
                    stats = static_cast<std::size_t>(fp.x.n() * c.shape.groups);
  const int copies = hipgrad::host::l2_rotation_copies(elements * sizeof(T) * (backward ? 2 : 1));

  DeviceBuffer<T> x, dy, out, gamma, beta, dgamma, dbeta;
  DeviceBuffer<float> mean, rstd;
  DeviceBuffer<unsigned char> workspace;
  HIPGRAD_RETURN_IF_ERROR(random_buffer(x, elements * copies, 1));
  HIPGRAD_RETURN_IF_ERROR(random_buffer(gamma, channels, 2));
  HIPGRAD_RETURN_IF_ERROR(random_buffer(beta, channels, 3));
  HIPGRAD_RETURN_IF_ERROR(out.allocate(elements));
  HIPGRAD_RETURN_IF_ERROR(mean.allocate(stats));
  HIPGRAD_RETURN_IF_ERROR(rstd.allocate(stats));
  using Fwd = gn::Forward<T, T>;
  using Bwd = gn::Backward<T, T>;
  const std::size_t ws = std::max(Fwd::workspace_size(fp), Bwd::workspace_size(bp));
  HIPGRAD_RETURN_IF_ERROR(workspace.allocate(ws));
  auto forward = [&](int copy) {
    return Fwd::run(fp, {x.data() + copy * elements, gamma.data(), beta.data(), out.data(), mean.data(), rstd.data()},
                    workspace.data(), ws, nullptr);
  };
  HIPGRAD_RETURN_IF_ERROR(forward(0));  // statistics for the backward
  float ms = 0;
  if (!backward) {
    HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::time_rotated(forward, copies, c.repeats, &ms));
    report(c, hipgrad::type_name<T>(), Fwd::name(fp), ms, 2.0 * elements * sizeof(T));
    return Status::ok();
  }
  HIPGRAD_RETURN_IF_ERROR(random_buffer(dy, elements * copies, 4));
  HIPGRAD_RETURN_IF_ERROR(dgamma.allocate(channels));
  HIPGRAD_RETURN_IF_ERROR(dbeta.allocate(channels));
  auto backward_run = [&](int copy) {
    // Every copy of x shares the statistics of copy 0: the work is the same, the values differ.
    return Bwd::run(bp,
                    {dy.data() + copy * elements, x.data() + copy * elements, gamma.data(), beta.data(), mean.data(),
                     rstd.data(), out.data(), dgamma.data(), dbeta.data()},
                    workspace.data(), ws, nullptr);
  };
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::time_rotated(backward_run, copies, c.repeats, &ms));
  report(c, hipgrad::type_name<T>(), Bwd::name(bp), ms, 3.0 * elements * sizeof(T));
  return Status::ok();
}

/// Kernels a call of the op named `name` launches: the three-pass paths three (the backward a
/// fourth for dγ/dβ); one-read one, the backward a second for dγ/dβ; staged one, the backward a
/// second unless its grid folds dγ/dβ itself.
int launches(const std::string& name, bool backward) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("_fold")) return 1;
  if (has("_one_read") || has("_staged")) return backward ? 2 : 1;
  return backward ? 4 : 3;
}

/// One table row per op and small problem: host µs per run() call (host_microseconds_per_call).
template <typename T>
Status host_overhead_rows(const std::vector<Index>& lengths, Index groups, bool channels_last, int calls) {
  using Fwd = gn::Forward<T, float>;
  using Bwd = gn::Backward<T, float>;
  const auto fp = gn::ForwardProblem::packed(lengths, groups, channels_last);
  const auto bp = gn::BackwardProblem::packed(lengths, groups, channels_last);
  const std::size_t elements = static_cast<std::size_t>(fp.x.num_elements()),
                    channels = static_cast<std::size_t>(fp.x.c());
  const std::size_t stats = static_cast<std::size_t>(fp.x.n() * groups);
  DeviceBuffer<T> x, dy, y, dx;
  DeviceBuffer<float> gamma, beta, dgamma, dbeta, mean, rstd;
  DeviceBuffer<unsigned char> workspace;
  HIPGRAD_RETURN_IF_ERROR(random_buffer(x, elements, 1));
  HIPGRAD_RETURN_IF_ERROR(random_buffer(dy, elements, 2));
  HIPGRAD_RETURN_IF_ERROR(random_buffer(gamma, channels, 3));
  HIPGRAD_RETURN_IF_ERROR(random_buffer(beta, channels, 4));
  for (auto* b : {&y, &dx}) HIPGRAD_RETURN_IF_ERROR(b->allocate(elements));
  for (auto* b : {&dgamma, &dbeta}) HIPGRAD_RETURN_IF_ERROR(b->allocate(channels));
  for (auto* b : {&mean, &rstd}) HIPGRAD_RETURN_IF_ERROR(b->allocate(stats));
  const std::size_t ws = std::max(Fwd::workspace_size(fp), Bwd::workspace_size(bp));
  HIPGRAD_RETURN_IF_ERROR(workspace.allocate(ws));
  const typename Fwd::Args fa{x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data()};
  const typename Bwd::Args ba{dy.data(),   x.data(),  gamma.data(),  beta.data(), mean.data(),
                              rstd.data(), dx.data(), dgamma.data(), dbeta.data()};
  std::string shape;
  for (std::size_t i = 0; i < lengths.size(); ++i) shape += (i ? "x" : "") + std::to_string(lengths[i]);
  shape = std::string(hipgrad::type_name<T>()) + " " + shape + " G" + std::to_string(groups) +
          (channels_last ? " nhwc" : " nchw");
  const std::string forward = Fwd::name(fp, fa), backward = Bwd::name(bp, ba);
  const int forward_launches = launches(forward, false), backward_launches = launches(backward, true);
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::print_host_overhead_row(
      "groupnorm forward", shape, forward, forward_launches,
      [&] { return Fwd::run(fp, fa, workspace.data(), ws, nullptr); }, [&] { return Fwd::can_implement(fp, fa); },
      calls));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::print_host_overhead_row(
      "groupnorm fused backward", shape, backward, backward_launches,
      [&] { return Bwd::run(bp, ba, workspace.data(), ws, nullptr); }, [&] { return Bwd::can_implement(bp, ba); },
      calls));
  return Status::ok();
}

/// --host-overhead: the table of host_overhead_rows, after the empty launch's floor.
Status host_overhead(int calls) {
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::print_host_overhead_header(calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_rows<hipgrad::half>({2, 64, 8, 8}, 32, false, calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_rows<hipgrad::half>({2, 64, 8, 8}, 32, true, calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_rows<hipgrad::half>({2, 1280, 16, 16}, 32, true, calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_rows<float>({2, 64, 8, 8}, 32, false, calls));
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  hipgrad::host::ExampleArgs args;
  Status st = hipgrad::host::parse_example_args(argc, argv, &args);
  if (st.is_ok())
    st = args.reject_unknown_options(
        {"ops", "dtypes", "layouts", "shapes", "repeats", "algorithm", "host-overhead", "calls"});
  if (!st.is_ok()) {
    std::fprintf(stderr, "bench_groupnorm: %s\n", st.message().c_str());
    return 2;
  }
  if (!hipgrad::host::require_gpu("bench_groupnorm")) return 1;
  if (args.has_option("host-overhead")) {
    const Status s = host_overhead(static_cast<int>(args.get_int("calls", 1000)));
    if (!s.is_ok()) std::fprintf(stderr, "bench_groupnorm: %s\n", s.to_string().c_str());
    return s.is_ok() ? 0 : 1;
  }
  const auto ops = split(args.get_string("ops", "fwd,fwd_swish,bwd,bwd_swish"));
  const auto dtypes = split(args.get_string("dtypes", "fp16,bf16,fp32"));
  const auto layouts = split(args.get_string("layouts", "nchw,nhwc"));
  const int repeats = static_cast<int>(args.get_int("repeats", 20));
  const std::string algorithm_option = args.get_string("algorithm", "auto");
  gn::Algorithm algorithm = gn::Algorithm::kAuto;
  for (gn::Algorithm a :
       {gn::Algorithm::kAuto, gn::Algorithm::kOneRead, gn::Algorithm::kThreePass, gn::Algorithm::kStaged})
    if (algorithm_option == gn::algorithm_name(a)) algorithm = a;
  if (algorithm_option != gn::algorithm_name(algorithm)) {
    std::fprintf(stderr, "bench_groupnorm: unknown --algorithm=%s (auto, one_read, three_pass or staged)\n",
                 algorithm_option.c_str());
    return 2;
  }
  int failures = 0;
  for (const Shape& shape : shapes(args.get_string("shapes", "all")))
    for (const std::string& dtype : dtypes)
      for (const std::string& layout : layouts)
        for (const std::string& op : ops) {
          const Config c{shape, op, layout, repeats, algorithm};
          const Status s = dtype == "fp16"   ? run_config<hipgrad::half>(c)
                           : dtype == "bf16" ? run_config<hipgrad::bfloat16>(c)
                                             : run_config<float>(c);
          if (!s.is_ok()) {
            std::fprintf(stderr, "bench_groupnorm: %s %s %s: %s\n", op.c_str(), dtype.c_str(), layout.c_str(),
                         s.to_string().c_str());
            ++failures;
          }
        }
  return failures == 0 ? 0 : 1;
}
