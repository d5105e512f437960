/// @file bench_gemm.cpp
/// @brief GEMM benchmark: C = A·B (all row-major) for fp16, bf16, fp32 as TF32 and exact fp32
///        at a list of sizes, for each candidate tile configuration of the matrix path; one JSON
///        line per (dtype, size, configuration), see bench_harness.hpp. bench/torch_gemm.py
///        times torch.matmul on the same lines. --host-overhead instead prints a table of the
///        host µs per run() call on small problems (back-to-back calls, then one wait for the
///        GPU), beside that of launching an empty kernel.
///
///   bench_gemm [--dtypes=fp16,bf16,tf32,fp32] [--sizes=4096,8192] [--repeats=20] [--configs=all|default]
///              [--layouts=rr,rc,cr,cc] [--grouped=COUNTxMxNxK]
///   bench_gemm --host-overhead [--calls=1000]
///
/// --layouts: A and B row- (r) or column-major (c), C row-major (default rr). Every line names
/// the registers and local bytes (spills) per thread of its mainloop kernel. --grouped adds, per
/// dtype, one grouped launch of COUNT sub-problems of M × N × K (row-major, e.g.
/// 32x4096x128x2304), on kAuto and on the gather kernel; torch_gemm.py times torch.bmm beside it.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/device_fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/host/timer.hpp"
#include "hipgrad/ops/gemm/gemm.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::host::DeviceBuffer;
namespace hg = hipgrad::gemm;

struct Options {
  int repeats = 20;
  bool all_configs = true;
  hg::Layout a_layout = hg::Layout::kRowMajor;
  hg::Layout b_layout = hg::Layout::kRowMajor;
};

char layout_char(hg::Layout l) { return l == hg::Layout::kRowMajor ? 'r' : 'c'; }

/// The JSON fields every line has: what the compiler gave the line's mainloop kernel.
hipgrad::bench::JsonLine& add_resources(hipgrad::bench::JsonLine& line, const hipgrad::KernelResources& r) {
  return line.add("registers", static_cast<double>(r.registers)).add("local_bytes", static_cast<double>(r.local_bytes));
}

/// A, B copies rotated beyond the L2 and one C.
template <typename T>
struct Buffers {
  int copies = 1;
  Index a_elements = 0, b_elements = 0;
  DeviceBuffer<T> a, b, c;
};

template <typename T>
Status make_buffers(Index m, Index n, Index k, Buffers<T>* buffers) {
  buffers->a_elements = m * k, buffers->b_elements = k * n;
  const std::size_t set_bytes = static_cast<std::size_t>(m * k + k * n) * sizeof(T);
  buffers->copies = hipgrad::host::l2_rotation_copies(set_bytes, 8);
  const auto copies = static_cast<Index>(buffers->copies);
  HIPGRAD_RETURN_IF_ERROR(buffers->a.allocate(static_cast<std::size_t>(buffers->a_elements * copies)));
  HIPGRAD_RETURN_IF_ERROR(buffers->b.allocate(static_cast<std::size_t>(buffers->b_elements * copies)));
  HIPGRAD_RETURN_IF_ERROR(buffers->c.allocate(static_cast<std::size_t>(m * n)));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::fill_uniform_on_device(buffers->a.data(), buffers->a_elements * copies, 1));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::fill_uniform_on_device(buffers->b.data(), buffers->b_elements * copies, 2));
  return buffers->c.fill_bytes(0xff);
}

/// One line for configuration Cfg; a forced algorithm that this device cannot run is reported on
/// stderr and skipped.
template <typename T, typename Cfg>
Status measure_config(const char* dtype, Index size, bool tf32, Buffers<T>& buffers, const Options& o,
                      hg::Algorithm algorithm) {
  using Op = hg::Gemm<T, Cfg>;
  hg::Problem p = hg::Problem::packed(size, size, size, o.a_layout, o.b_layout, hg::Layout::kRowMajor);
  p.allow_tf32 = tf32;
  p.algorithm = algorithm;
  auto args = [&](int copy) {
    return typename Op::Args{buffers.a.data() + copy * buffers.a_elements, buffers.b.data() + copy * buffers.b_elements,
                             buffers.c.data()};
  };
  const Status can = Op::can_implement(p, args(0));
  if (algorithm != hg::Algorithm::kAuto && can.code() == hipgrad::StatusCode::kNotSupported) {
    std::fprintf(stderr, "bench_gemm: skipped %s: %s\n", Op::name(p, args(0)).c_str(), can.to_string().c_str());
    return Status::ok();
  }
  HIPGRAD_RETURN_IF_ERROR(can);
  float ms = 0;
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::time_rotated(
      [&](int copy) { return Op::run(p, args(copy), nullptr, 0, nullptr); }, buffers.copies, o.repeats, &ms));
  const std::string layout = {layout_char(o.a_layout), layout_char(o.b_layout), 'r'};
  hipgrad::bench::JsonLine line;
  line.add("op", "gemm")
      .add("dtype", dtype)
      .add("m", static_cast<double>(size))
      .add("n", static_cast<double>(size))
      .add("k", static_cast<double>(size))
      .add("layout", layout)
      .add("name", Op::name(p, args(0)))
      .add("ms", ms)
      .add("tflops", p.flops() / (ms * 1e-3) / 1e12);
  add_resources(line, Op::resources(p, args(0))).print();
  return Status::ok();
}

/// measure_config, for configurations that fit this build's targets (others are skipped, noted
/// on stderr: they cannot be instantiated there).
template <typename T, typename Cfg>
Status measure(const char* dtype, Index size, bool tf32, Buffers<T>& buffers, const Options& o,
               hg::Algorithm algorithm = hg::Algorithm::kAuto) {
  if constexpr (!hg::fits_build_targets<Cfg, T>()) {
    std::fprintf(stderr, "bench_gemm: skipped %s %s: more shared memory than this build's targets have\n", dtype,
                 Cfg::name().c_str());
    (void)size, (void)tf32, (void)buffers, (void)o, (void)algorithm;
    return Status::ok();
  } else {
    return measure_config<T, Cfg>(dtype, size, tf32, buffers, o, algorithm);
  }
}

/// Candidate configurations of the matrix path for 16-bit data (the first is the default): on
/// sm_90a two for the TMA kernel and the cp.async wgmma mainloop's own (forced kMatrix).
template <typename T>
Status measure_16bit(const char* dtype, Index size, const Options& o) {
  Buffers<T> b;
  HIPGRAD_RETURN_IF_ERROR(make_buffers(size, size, size, &b));
  HIPGRAD_RETURN_IF_ERROR((measure<T, hg::DefaultConfigFor<T>>(dtype, size, false, b, o)));
  // The same matrices read through the operand loaders by the gather kernel (a convolution's path).
  HIPGRAD_RETURN_IF_ERROR((measure<T, hg::DefaultConfigFor<T>>(dtype, size, false, b, o, hg::Algorithm::kGather)));
  if (!o.all_configs) return Status::ok();
  HIPGRAD_RETURN_IF_ERROR((measure<T, hg::Config<256, 128, 64, 4, 2, 4>>(dtype, size, false, b, o)));
  return measure<T, hg::CpAsyncWgmmaConfigFor<T>>(dtype, size, false, b, o, hg::Algorithm::kMatrix);
}

Status measure_fp32(Index size, bool tf32, const Options& o) {
  Buffers<float> b;
  HIPGRAD_RETURN_IF_ERROR(make_buffers(size, size, size, &b));
  const char* dtype = tf32 ? "tf32" : "fp32";
  HIPGRAD_RETURN_IF_ERROR((measure<float, hg::DefaultConfigFor<float>>(dtype, size, tf32, b, o)));
  if (!tf32) return Status::ok();
  HIPGRAD_RETURN_IF_ERROR(
      (measure<float, hg::DefaultConfigFor<float>>(dtype, size, tf32, b, o, hg::Algorithm::kGather)));
  if (!o.all_configs) return Status::ok();
  HIPGRAD_RETURN_IF_ERROR((measure<float, hg::Config<128, 256, 32, 2, 4, 4>>(dtype, size, tf32, b, o)));
  return measure<float, hg::CpAsyncWgmmaConfigFor<float>>(dtype, size, tf32, b, o, hg::Algorithm::kMatrix);
}

Status run(const std::string& dtype, Index size, const Options& o) {
  if (dtype == "fp16") return measure_16bit<hipgrad::half>("fp16", size, o);
  if (dtype == "bf16") return measure_16bit<hipgrad::bfloat16>("bf16", size, o);
  if (dtype == "tf32") return measure_fp32(size, true, o);
  if (dtype == "fp32") return measure_fp32(size, false, o);
  return Status::invalid_argument("unknown dtype " + dtype + " (fp16, bf16, tf32, fp32)");
}

// ---- --grouped --------------------------------------------------------------------------------

/// COUNT sub-problems of M × N × K.
struct GroupedShape {
  Index count = 0, m = 0, n = 0, k = 0;
};

/// One line: a grouped launch of `shape` (row-major A, B, C; every sub-problem its own matrices)
/// on `forced` or kAuto.
template <typename T>
Status measure_grouped(const char* dtype, bool tf32, const GroupedShape& shape, const Options& o,
                       std::optional<hg::Path> forced) {
  using LoaderA = hg::DenseOperand<T, true>;
  using LoaderB = hg::DenseOperand<T, false>;
  using Epilogue = hg::LinearCombination<T>;
  using Launcher = hg::GroupedGemmLauncher<hg::DefaultConfigFor<T>, LoaderA, LoaderB, Epilogue>;
  const Index a_elements = shape.m * shape.k, b_elements = shape.k * shape.n, c_elements = shape.m * shape.n;
  DeviceBuffer<T> a, b, c;
  HIPGRAD_RETURN_IF_ERROR(a.allocate(static_cast<std::size_t>(shape.count * a_elements)));
  HIPGRAD_RETURN_IF_ERROR(b.allocate(static_cast<std::size_t>(shape.count * b_elements)));
  HIPGRAD_RETURN_IF_ERROR(c.allocate(static_cast<std::size_t>(shape.count * c_elements)));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::fill_uniform_on_device(a.data(), shape.count * a_elements, 1));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::fill_uniform_on_device(b.data(), shape.count * b_elements, 2));
  std::vector<hg::SubProblem<LoaderA, LoaderB, Epilogue>> problems;
  for (Index g = 0; g < shape.count; ++g) {
    const auto m = static_cast<int>(shape.m), n = static_cast<int>(shape.n), k = static_cast<int>(shape.k);
    problems.push_back({LoaderA{a.data() + g * a_elements, shape.k, m, k},
                        LoaderB{b.data() + g * b_elements, shape.n, n, k},
                        Epilogue{c.data() + g * c_elements, shape.n, 1, m, n, 1.0f, 0.0f, nullptr}});
  }
  hg::TileGemmRequest request;
  request.matrix_units = !std::is_same_v<T, float> || tf32;
  request.forced = forced;
  const int count = static_cast<int>(shape.count);
  const hg::GroupedGemmPlan plan = Launcher::plan(problems.data(), count, request, hipgrad::current_device_info());
  if (forced && !plan.status.is_ok()) {
    std::fprintf(stderr, "bench_gemm: skipped grouped %s %s: %s\n", dtype, hg::path_name(*forced),
                 plan.status.to_string().c_str());
    return Status::ok();
  }
  HIPGRAD_RETURN_IF_ERROR(plan.status);
  DeviceBuffer<unsigned char> workspace;
  HIPGRAD_RETURN_IF_ERROR(workspace.allocate(plan.workspace_bytes));
  float ms = 0;
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::time_rotated(
      [&](int) { return Launcher::launch(plan, problems.data(), count, workspace.data(), workspace.bytes(), nullptr); },
      1, o.repeats, &ms));
  const double flops = 2.0 * static_cast<double>(shape.count * shape.m) * static_cast<double>(shape.n * shape.k);
  hipgrad::bench::JsonLine line;
  line.add("op", "grouped_gemm")
      .add("dtype", dtype)
      .add("count", static_cast<double>(shape.count))
      .add("m", static_cast<double>(shape.m))
      .add("n", static_cast<double>(shape.n))
      .add("k", static_cast<double>(shape.k))
      .add("layout", "rrr")
      .add("name", std::string("gemm_") + dtype + "_" + Launcher::kernel_name(plan))
      .add("ms", ms)
      .add("tflops", flops / (ms * 1e-3) / 1e12);
  add_resources(line, Launcher::resources(plan)).print();
  return Status::ok();
}

/// The grouped lines of one dtype: kAuto, then the gather kernel.
Status run_grouped(const std::string& dtype, const GroupedShape& shape, const Options& o) {
  for (const std::optional<hg::Path> forced : {std::optional<hg::Path>(), std::optional<hg::Path>(hg::Path::kGather)}) {
    if (dtype == "fp16") HIPGRAD_RETURN_IF_ERROR(measure_grouped<hipgrad::half>("fp16", false, shape, o, forced));
    if (dtype == "bf16") HIPGRAD_RETURN_IF_ERROR(measure_grouped<hipgrad::bfloat16>("bf16", false, shape, o, forced));
    if (dtype == "tf32") HIPGRAD_RETURN_IF_ERROR(measure_grouped<float>("tf32", true, shape, o, forced));
  }
  return Status::ok();
}

/// "COUNTxMxNxK" → shape; false when it does not read as four positive numbers.
bool parse_grouped_shape(const std::string& text, GroupedShape* shape) {
  long long v[4] = {0, 0, 0, 0};
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lldx%lldx%lldx%lld%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4) return false;
  *shape = {v[0], v[1], v[2], v[3]};
  return v[0] > 0 && v[1] > 0 && v[2] > 0 && v[3] > 0;
}

// ---- --host-overhead ---------------------------------------------------------------------------

/// One table row: host µs per run() of a packed row-major size³ problem on `algorithm`
/// (host_microseconds_per_call: back-to-back calls, then one wait for the GPU).
template <typename T>
Status host_overhead_row(const char* dtype, Index size, bool tf32, hg::Algorithm algorithm, int calls) {
  using Op = hg::Gemm<T>;
  hg::Problem p = hg::Problem::packed(size, size, size);
  p.allow_tf32 = tf32;
  p.algorithm = algorithm;
  Buffers<T> b;
  HIPGRAD_RETURN_IF_ERROR(make_buffers(size, size, size, &b));
  const typename Op::Args args{b.a.data(), b.b.data(), b.c.data()};
  const std::string problem = std::string(dtype) + " " + std::to_string(size) + "³ " + hg::algorithm_name(algorithm);
  const Status can = Op::can_implement(p, args);
  if (!can.is_ok()) {
    std::printf("| gemm | %s | (%s) | - | - | - | - |\n", problem.c_str(), can.to_string().c_str());
    return Status::ok();
  }
  return hipgrad::bench::print_host_overhead_row(
      "gemm", problem, Op::name(p, args), 1, [&] { return Op::run(p, args, nullptr, 0, nullptr); },
      [&] { return Op::can_implement(p, args); }, calls);
}

/// --host-overhead: the empty launch's floor, then one row per small problem (fp16 on kAuto,
/// which takes the TMA kernel on sm_90a, and on kMatrix, which builds no tensor maps).
Status host_overhead(int calls) {
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::print_host_overhead_header(calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_row<hipgrad::half>("fp16", 64, false, hg::Algorithm::kAuto, calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_row<hipgrad::half>("fp16", 64, false, hg::Algorithm::kMatrix, calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_row<hipgrad::bfloat16>("bf16", 128, false, hg::Algorithm::kAuto, calls));
  HIPGRAD_RETURN_IF_ERROR(host_overhead_row<float>("fp32", 64, false, hg::Algorithm::kSimt, calls));
  return host_overhead_row<float>("tf32", 64, true, hg::Algorithm::kAuto, calls);
}

}  // namespace

int main(int argc, char** argv) {
  hipgrad::host::ExampleArgs args;
  Status s = hipgrad::host::parse_example_args(argc, argv, &args);
  if (s.is_ok()) {
    s = args.reject_unknown_options(
        {"dtypes", "sizes", "repeats", "configs", "host-overhead", "calls", "layouts", "grouped"});
  }
  Options o;
  o.repeats = static_cast<int>(args.get_int("repeats", 20));
  o.all_configs = args.get_string("configs", "all") == "all";
  const std::vector<std::string> layouts = hipgrad::bench::split_list(args.get_string("layouts", "rr"));
  const std::string grouped = args.get_string("grouped", "");
  GroupedShape grouped_shape;
  if (s.is_ok() && !grouped.empty() && !parse_grouped_shape(grouped, &grouped_shape)) {
    s = Status::invalid_argument("--grouped takes COUNTxMxNxK, e.g. 32x4096x128x2304, not " + grouped);
  }
  for (const std::string& l : layouts) {
    if (s.is_ok() && (l.size() != 2 || (l[0] != 'r' && l[0] != 'c') || (l[1] != 'r' && l[1] != 'c'))) {
      s = Status::invalid_argument("--layouts takes rr, rc, cr, cc, not " + l);
    }
  }
  const bool host_overhead_mode = args.get_bool("host-overhead", false);
  const auto calls = static_cast<int>(args.get_int("calls", 1000));
  if (s.is_ok()) s = args.option_status();
  if (!s.is_ok() || o.repeats < 1 || calls < 1) {
    std::fprintf(stderr, "bench_gemm: %s\n",
                 s.is_ok() ? "--repeats and --calls must be positive" : s.to_string().c_str());
    return 2;
  }
  if (!hipgrad::host::require_gpu("bench_gemm")) return 1;
  if (host_overhead_mode) {
    s = host_overhead(calls);
    if (!s.is_ok()) std::fprintf(stderr, "bench_gemm: %s\n", s.to_string().c_str());
    return s.is_ok() ? 0 : 1;
  }
  const std::vector<std::string> dtypes = hipgrad::bench::split_list(args.get_string("dtypes", "fp16,bf16,tf32,fp32"));
  for (const std::string& l : layouts) {
    o.a_layout = l[0] == 'r' ? hg::Layout::kRowMajor : hg::Layout::kColMajor;
    o.b_layout = l[1] == 'r' ? hg::Layout::kRowMajor : hg::Layout::kColMajor;
    for (const std::string& size : hipgrad::bench::split_list(args.get_string("sizes", "4096,8192"))) {
      for (const std::string& dtype : dtypes) {
        s = run(dtype, std::stoll(size), o);
        if (!s.is_ok()) {
          std::fprintf(stderr, "bench_gemm: %s %s %s: %s\n", l.c_str(), dtype.c_str(), size.c_str(),
                       s.to_string().c_str());
          return 1;
        }
      }
    }
  }
  for (const std::string& dtype : grouped.empty() ? std::vector<std::string>() : dtypes) {
    s = run_grouped(dtype, grouped_shape, o);
    if (!s.is_ok()) {
      std::fprintf(stderr, "bench_gemm: grouped %s: %s\n", dtype.c_str(), s.to_string().c_str());
      return 1;
    }
  }
  return 0;
}
