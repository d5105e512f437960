/// @file example_gemm.cpp
/// @brief C = alpha·A·B + beta·C with the tile GEMM (hipgrad::gemm::Gemm), checked against the
///        CPU reference and timed.
///
///   example_gemm [verify init time [M N K]] [--dtype=fp16|bf16|fp32] [--tf32=0|1]
///       [--layout=rrr] [--alpha=1] [--beta=0] [--split-k=1] [--algorithm=auto] [--repeats=20]
///
/// --layout names the layouts of A, B and C, r (row-major) or c (column-major) each. Exit
/// status: 0 passed, 1 mismatch or runtime error (no GPU included), 2 usage error.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/host/reference/gemm.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/host/timer.hpp"
#include "hipgrad/ops/gemm/gemm.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
namespace hg = hipgrad::gemm;
namespace hh = hipgrad::host;

constexpr const char* kProgram = "example_gemm";
constexpr const char* kOptionsHelp =
    "options:\n"
    "  --dtype=fp16|bf16|fp32   A, B and C (default fp16)\n"
    "  --tf32=0|1               fp32 only: allow TF32 matrix units (default 0: exact fp32)\n"
    "  --layout=rrr             layouts of A, B, C: r row-major, c column-major (default rrr)\n"
    "  --alpha=1 --beta=0       C = alpha*A*B + beta*C\n"
    "  --split-k=1              K slices summed in a fixed order\n"
    "  --algorithm=auto         auto, tma, matrix or simt (a forced one that cannot run is an error)\n"
    "  --repeats=20             timed runs (default: the time argument if > 1, else 20)\n";

struct Config {
  hh::ExampleArgs args;
  hg::Problem problem = hg::Problem::packed(1024, 1024, 1024);
  std::string dtype = "fp16";
  int repeats = 20;
};

Status parse_layout(const std::string& text, hg::Problem* p) {
  if (text.size() != 3 || text.find_first_not_of("rc") != std::string::npos) {
    return Status::invalid_argument("bad option --layout=" + text + ": expected three letters r or c (A, B, C)");
  }
  auto layout = [](char c) { return c == 'r' ? hg::Layout::kRowMajor : hg::Layout::kColMajor; };
  p->a_layout = layout(text[0]), p->b_layout = layout(text[1]), p->c_layout = layout(text[2]);
  return Status::ok();
}

Status parse_algorithm(const std::string& text, hg::Problem* p) {
  for (hg::Algorithm algorithm :
       {hg::Algorithm::kAuto, hg::Algorithm::kTma, hg::Algorithm::kMatrix, hg::Algorithm::kSimt}) {
    if (text == hg::algorithm_name(algorithm)) {
      p->algorithm = algorithm;
      return Status::ok();
    }
  }
  return Status::invalid_argument("bad option --algorithm=" + text + ": expected auto, tma, matrix or simt");
}

Status parse_config(Config* c) {
  const hh::ExampleArgs& a = c->args;
  HIPGRAD_RETURN_IF_ERROR(
      a.reject_unknown_options({"dtype", "tf32", "layout", "alpha", "beta", "split-k", "algorithm", "repeats"}));
  if (!a.sizes.empty() && a.sizes.size() != 3) {
    return Status::invalid_argument("expected 0 or 3 sizes (M N K), got " + std::to_string(a.sizes.size()));
  }
  if (a.sizes.size() == 3) c->problem.m = a.sizes[0], c->problem.n = a.sizes[1], c->problem.k = a.sizes[2];
  c->dtype = a.get_string("dtype", "fp16");
  if (c->dtype != "fp16" && c->dtype != "bf16" && c->dtype != "fp32") {
    return Status::invalid_argument("bad option --dtype=" + c->dtype + ": expected fp16, bf16 or fp32");
  }
  c->problem.allow_tf32 = a.get_bool("tf32", false);
  c->problem.alpha = static_cast<float>(a.get_double("alpha", 1.0));
  c->problem.beta = static_cast<float>(a.get_double("beta", 0.0));
  const std::int64_t split = a.get_int("split-k", 1), repeats = a.timed_runs(20);
  HIPGRAD_RETURN_IF_ERROR(a.option_status());
  HIPGRAD_RETURN_IF_ERROR(parse_layout(a.get_string("layout", "rrr"), &c->problem));
  HIPGRAD_RETURN_IF_ERROR(parse_algorithm(a.get_string("algorithm", "auto"), &c->problem));
  if (c->problem.allow_tf32 && c->dtype != "fp32")
    return Status::invalid_argument("--tf32 applies to --dtype=fp32 only");
  if (split < 1 || split > 65535) return Status::invalid_argument("--split-k must be 1 to 65535");
  if (repeats < 1 || repeats > 1000000) return Status::invalid_argument("--repeats must be 1 to 1000000");
  c->problem.split_k = static_cast<int>(split);
  c->repeats = static_cast<int>(repeats);
  return c->problem.validate();
}

template <typename T>
hh::Tensor<T> matrix_tensor(const hg::MatrixDesc& d) {
  return hh::Tensor<T>({d.rows, d.cols}, {d.row_stride(), d.col_stride()});
}

/// Device copies of A and B (enough of them, when timing, that no run finds its inputs in L2), C
/// and the workspace.
template <typename T>
struct DeviceData {
  int copies = 1;
  hh::DeviceBuffer<T> a, b, c;
  hh::DeviceBuffer<unsigned char> workspace;
  typename hg::Gemm<T>::Args args(int iteration) const {
    const int i = iteration % copies;
    return {a.data() + static_cast<std::size_t>(i) * (a.size() / copies),
            b.data() + static_cast<std::size_t>(i) * (b.size() / copies), const_cast<T*>(c.data())};
  }
};

template <typename T>
Status run_on_device(const Config& c, const hh::Tensor<T>& a, const hh::Tensor<T>& b, hh::Tensor<T>* result,
                     float* ms) {
  using Op = hg::Gemm<T>;
  const hg::Problem& p = c.problem;
  DeviceData<T> d;
  d.copies = c.args.time ? hh::l2_rotation_copies(a.storage_bytes() + b.storage_bytes()) : 1;
  HIPGRAD_RETURN_IF_ERROR(upload_copies(a, d.copies, &d.a));
  HIPGRAD_RETURN_IF_ERROR(upload_copies(b, d.copies, &d.b));
  HIPGRAD_RETURN_IF_ERROR(upload_copies(*result, 1, &d.c));  // poisoned (beta = 0) or C's old values
  HIPGRAD_RETURN_IF_ERROR(d.workspace.allocate(Op::workspace_size(p)));
  HIPGRAD_RETURN_IF_ERROR(d.workspace.fill_bytes(0xff));
  HIPGRAD_RETURN_IF_ERROR(Op::can_implement(p, d.args(0)));
  std::printf("%s on %s\n", Op::name(p, d.args(0)).c_str(), hh::device_description().c_str());
  HIPGRAD_RETURN_IF_ERROR(Op::run(p, d.args(0), d.workspace.data(), d.workspace.bytes(), nullptr));
  HIPGRAD_RETURN_IF_ERROR(d.c.copy_to(*result));  // synchronous: also reports the kernel's errors
  if (!c.args.time) return Status::ok();
  hh::TimingOptions timing;
  timing.repeats = c.repeats;
  return hh::time_median_ms(
      [&](int i) { return Op::run(p, d.args(i), d.workspace.data(), d.workspace.bytes(), nullptr); }, timing, ms);
}

template <typename T>
hh::CheckResult verify(const Config& c, const hh::Tensor<T>& a, const hh::Tensor<T>& b, const hh::Tensor<T>& c_in,
                       const hh::Tensor<T>& result) {
  const hg::Problem& p = c.problem;
  const hh::Tensor<double> expected = hh::reference::gemm(a, b, p.alpha, p.beta, c_in);
  // C holds sums of K products: of inputs in [-1, 1) (decimals), or of integers up to 5 (up to 25 each).
  const double term_scale = c.args.init == hh::InitMethod::kIntegers ? 25 : 1;
  hh::Tolerance tol = hh::sum_tolerance<T>(p.k, term_scale);
  if (p.allow_tf32) tol.rtol += 0x1.0p-10, tol.atol += 0x1.0p-9 * std::sqrt(static_cast<double>(p.k));
  return hh::check_close(result, expected, tol);
}

template <typename T>
int run(const Config& c) {
  const hg::Problem& p = c.problem;
  hh::Tensor<T> a = matrix_tensor<T>(p.a()), b = matrix_tensor<T>(p.b()), result = matrix_tensor<T>(p.c());
  hh::fill(a, c.args.init, 1);
  hh::fill(b, c.args.init, 2);
  if (p.beta != 0)
    hh::fill(result, c.args.init, 3);
  else
    std::memset(result.data(), 0xff, result.storage_bytes());
  const hh::Tensor<T> c_in = result;
  std::printf("%s %s, init %s, alpha %g beta %g\n", p.to_string().c_str(), c.dtype.c_str(),
              hh::init_method_name(c.args.init), p.alpha, p.beta);
  float ms = 0;
  const Status s = run_on_device(c, a, b, &result, &ms);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, s.to_string().c_str());
    return 1;
  }
  bool ok = true;
  if (c.args.verify) {
    const hh::CheckResult r = verify(c, a, b, c_in, result);
    std::printf("verification: %s\n", r.report.c_str());
    ok = r.ok;
  }
  if (c.args.time) {
    const double bytes =
        static_cast<double>(sizeof(T)) * static_cast<double>(p.m * p.k + p.k * p.n + p.m * p.n * (p.beta != 0 ? 2 : 1));
    std::printf("Perf: %.4f ms, %.2f TFlops, %.2f GB/s\n", ms, p.flops() / (ms * 1e-3) / 1e12,
                bytes / (ms * 1e-3) / 1e9);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  Status s = hh::parse_example_args(argc, argv, &c.args);
  if (s.is_ok() && c.args.help) {
    std::printf("%s%s", hh::example_usage(kProgram, "M N K (default 1024 1024 1024)").c_str(), kOptionsHelp);
    return 0;
  }
  if (s.is_ok()) s = parse_config(&c);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n%s%s", kProgram, s.to_string().c_str(), hh::example_usage(kProgram, "M N K").c_str(),
                 kOptionsHelp);
    return 2;
  }
  if (!hh::require_gpu(kProgram)) return 1;
  if (c.dtype == "fp32") return run<float>(c);
  if (c.dtype == "bf16") return run<hipgrad::bfloat16>(c);
  return run<hipgrad::half>(c);
}
