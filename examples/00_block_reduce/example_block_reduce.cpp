/// @file example_block_reduce.cpp
/// @brief Row statistics with hipgrad::BlockReduce: for each row of a [rows, cols] matrix, Σx and
///        Σx² in one reduction call (an Array of two values), checked against the CPU.
///
///   example_block_reduce [verify init time [rows cols]] [--dtype=fp32|fp16|bf16]
///   defaults: 1 1 0 4096 8192 --dtype=fp16

#include <cstdio>
#include <string>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/host/timer.hpp"
#include "hipgrad/primitives/block_reduce.hpp"

namespace {

using hipgrad::Status;
using hipgrad::host::Index;
using Moments = hipgrad::Array<float, 2>;  // (Σx, Σx²)

constexpr int kThreads = 256;

template <typename T>
__global__ void row_moments_kernel(const T* in, Index cols, float* out) {
  using Reduce = hipgrad::BlockReduce<Moments, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const T* row = in + blockIdx.x * cols;
  Moments partial{{0.0f, 0.0f}};
  for (Index i = threadIdx.x; i < cols; i += kThreads) {
    const float x = hipgrad::type_convert<float>(row[i]);
    partial = partial + Moments{{x, x * x}};
  }
  const Moments total = Reduce(storage).sum(partial);
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = total[0];
    out[2 * blockIdx.x + 1] = total[1];
  }
}

template <typename T>
Status launch_row_moments(const T* in, Index rows, Index cols, float* out, hipStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::invalid_argument("rows and cols must be positive");
  if (rows > 2147483647) return Status::not_supported("more than 2^31 - 1 rows");
  row_moments_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, cols, out);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("row_moments_kernel");
  return Status::ok();
}

void reference_row_moments(const hipgrad::host::Tensor<double>& x, hipgrad::host::Tensor<double>& out) {
  for (Index r = 0; r < x.length(0); ++r) {
    double s = 0, sq = 0;
    for (Index c = 0; c < x.length(1); ++c) {
      s += x.at(r, c);
      sq += x.at(r, c) * x.at(r, c);
    }
    out.at(r, 0) = s;
    out.at(r, 1) = sq;
  }
}

template <typename T>
Status run_on_device(const hipgrad::host::ExampleArgs& args, const hipgrad::host::Tensor<T>& x,
                     hipgrad::host::Tensor<float>& result, float* median_ms) {
  using namespace hipgrad::host;
  const Index rows = x.length(0), cols = x.length(1);
  const std::size_t elements = x.storage().size();
  // Timed runs rotate through enough copies of the input that none is still in L2.
  const int copies = args.time ? l2_rotation_copies(elements * sizeof(T)) : 1;
  DeviceBuffer<T> x_dev;
  DeviceBuffer<float> out_dev;
  HIPGRAD_RETURN_IF_ERROR(x_dev.allocate(elements * copies));
  HIPGRAD_RETURN_IF_ERROR(out_dev.allocate(result.storage().size()));
  for (int i = 0; i < copies; ++i) {
    HIPGRAD_RETURN_IF_HIP_ERROR(
        hipMemcpy(x_dev.data() + i * elements, x.data(), elements * sizeof(T), hipMemcpyHostToDevice));
  }
  HIPGRAD_RETURN_IF_ERROR(out_dev.fill_bytes(0xff));  // poison: an unwritten row reads as NaN
  HIPGRAD_RETURN_IF_ERROR(launch_row_moments(x_dev.data(), rows, cols, out_dev.data(), nullptr));
  HIPGRAD_RETURN_IF_ERROR(out_dev.copy_to(result));
  if (!args.time) return Status::ok();
  TimingOptions timing;
  timing.repeats = static_cast<int>(args.timed_runs(timing.repeats));
  return time_median_ms(
      [&](int iteration) {
        return launch_row_moments(x_dev.data() + (iteration % copies) * elements, rows, cols, out_dev.data(), nullptr);
      },
      timing, median_ms);
}

template <typename T>
int run(const hipgrad::host::ExampleArgs& args, Index rows, Index cols) {
  using namespace hipgrad::host;
  Tensor<T> x({rows, cols});
  fill(x, args.init, /*seed=*/1);
  Tensor<float> result({rows, 2});
  float ms = 0;
  const Status st = run_on_device(args, x, result, &ms);
  if (!st.is_ok()) {
    std::fprintf(stderr, "example_block_reduce: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("config: BlockReduce<Array<float,2>, %d> row moments, %s, rows %lld, cols %lld, init %s\n", kThreads,
              hipgrad::type_name<T>(), static_cast<long long>(rows), static_cast<long long>(cols),
              init_method_name(args.init));
  bool ok = true;
  if (args.verify) {
    Tensor<double> x_ref({rows, cols});
    x.for_each_index([&](const std::vector<Index>& i) { x_ref(i) = hipgrad::type_convert<double>(x(i)); });
    Tensor<double> expected({rows, 2});
    reference_row_moments(x_ref, expected);
    // Sums of cols values and of their squares (up to 25 for integer data).
    const double term_scale = args.init == InitMethod::kIntegers ? 25 : 1;
    const CheckResult check = check_close(result, expected, sum_tolerance<float>(cols, term_scale));
    std::printf("verification: %s\n", check.report.c_str());
    ok = check.ok;
  }
  if (args.time) {
    const double bytes = static_cast<double>(rows) * cols * sizeof(T) + rows * 2.0 * sizeof(float);
    const double flops = 4.0 * rows * cols;
    std::printf("Perf: %.4f ms, %.3f TFlops, %.1f GB/s\n", ms, flops / (ms * 1e9), bytes / (ms * 1e6));
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  hipgrad::host::ExampleArgs args;
  const Status parsed = hipgrad::host::parse_example_args(argc, argv, &args);
  const char* sizes_help = "rows cols (default 4096 8192); option --dtype=fp32|fp16|bf16 (default fp16)";
  if (parsed.is_ok() && args.help) {
    std::printf("%s", hipgrad::host::example_usage(argv[0], sizes_help).c_str());
    return 0;
  }
  Status usage = parsed;
  if (usage.is_ok()) usage = args.reject_unknown_options({"dtype"});
  if (usage.is_ok() && !args.sizes.empty() && args.sizes.size() != 2)
    usage = Status::invalid_argument("expected two sizes: rows cols");
  if (usage.is_ok() && !args.sizes.empty() && (args.sizes[0] <= 0 || args.sizes[1] <= 0))
    usage = Status::invalid_argument("rows and cols must be positive");
  if (!usage.is_ok()) {
    std::fprintf(stderr, "%s\n%s", usage.message().c_str(), hipgrad::host::example_usage(argv[0], sizes_help).c_str());
    return 2;
  }
  if (!hipgrad::host::require_gpu("example_block_reduce")) return 1;
  const Index rows = args.sizes.empty() ? 4096 : args.sizes[0];
  const Index cols = args.sizes.empty() ? 8192 : args.sizes[1];
  const std::string dtype = args.get_string("dtype", "fp16");
  if (dtype == "fp32") return run<float>(args, rows, cols);
  if (dtype == "fp16") return run<hipgrad::half>(args, rows, cols);
  if (dtype == "bf16") return run<hipgrad::bfloat16>(args, rows, cols);
  std::fprintf(stderr, "example_block_reduce: unknown --dtype=%s (fp32, fp16, bf16)\n", dtype.c_str());
  return 2;
}
