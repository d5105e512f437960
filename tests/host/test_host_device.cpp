/// @file test_host_device.cpp
/// @brief DeviceBuffer (allocation, round trips, poisoning, moves, empty buffers, error Status) and
///        the event timer (a real kernel times above zero; a failing launch stops the timing).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/host/timer.hpp"

namespace {

using hipgrad::half;
using hipgrad::Status;
using hipgrad::StatusCode;
using hipgrad::host::DeviceBuffer;
using hipgrad::host::EventTimer;
using hipgrad::host::Index;
using hipgrad::host::InitMethod;
using hipgrad::host::Tensor;
using hipgrad::host::TimingOptions;

static_assert(!std::is_copy_constructible_v<DeviceBuffer<float>>, "DeviceBuffer must be move-only");
static_assert(std::is_nothrow_move_constructible_v<DeviceBuffer<float>>, "moves must not throw");

#define EXPECT_OK(expr)                                         \
  do {                                                          \
    const ::hipgrad::Status s_ = (expr);                        \
    EXPECT_TRUE(s_.is_ok()) << #expr << ": " << s_.to_string(); \
  } while (0)

#define ASSERT_OK(expr)                                         \
  do {                                                          \
    const ::hipgrad::Status s_ = (expr);                        \
    ASSERT_TRUE(s_.is_ok()) << #expr << ": " << s_.to_string(); \
  } while (0)

__global__ void add_one(float* data, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += 1.0f;
}

/// Enough dependent arithmetic per thread to take a measurable few microseconds.
__global__ void busy_work(float* data, int n, int steps) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  float x = data[i];
  for (int s = 0; s < steps; ++s) x = x * 0.999f + 0.001f;
  data[i] = x;
}

TEST(HostDeviceBuffer, RoundTripThroughTensors) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  Tensor<half> source({3, 5, 7}, {40, 1, 5});  // padded strides: the whole storage travels
  hipgrad::host::fill(source, InitMethod::kDecimals, 17);
  DeviceBuffer<half> buffer;
  ASSERT_OK(buffer.allocate(source.storage().size()));
  EXPECT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), source.storage().size());
  EXPECT_EQ(buffer.bytes(), source.storage_bytes());
  ASSERT_OK(buffer.copy_from(source));
  Tensor<half> back({3, 5, 7}, {40, 1, 5});
  ASSERT_OK(buffer.copy_to(back));
  EXPECT_EQ(std::memcmp(source.data(), back.data(), source.storage_bytes()), 0);
}

TEST(HostDeviceBuffer, KernelSeesTheCopiedData) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  std::vector<float> host(1000);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  DeviceBuffer<float> buffer;
  ASSERT_OK(buffer.allocate(host.size()));
  ASSERT_OK(buffer.copy_from_host(host.data(), host.size()));
  add_one<<<4, 256>>>(buffer.data(), 1000);
  HIPGRAD_ASSERT_HIP(hipGetLastError());
  std::vector<float> result(host.size());
  ASSERT_OK(buffer.copy_to_host(result.data(), result.size()));
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(result[i], host[i] + 1.0f) << i;
}

TEST(HostDeviceBuffer, PoisonMakesEveryFloatTypeNaN) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  Tensor<float> f32({64});
  Tensor<half> f16({64});
  Tensor<hipgrad::bfloat16> b16({64});
  DeviceBuffer<float> d32;
  DeviceBuffer<half> d16;
  DeviceBuffer<hipgrad::bfloat16> db16;
  ASSERT_OK(d32.allocate(64));
  ASSERT_OK(d16.allocate(64));
  ASSERT_OK(db16.allocate(64));
  ASSERT_OK(d32.fill_bytes(0xff));
  ASSERT_OK(d16.fill_bytes(0xff));
  ASSERT_OK(db16.fill_bytes(0xff));
  ASSERT_OK(d32.copy_to(f32));
  ASSERT_OK(d16.copy_to(f16));
  ASSERT_OK(db16.copy_to(b16));
  for (Index i = 0; i < 64; ++i) {
    EXPECT_TRUE(std::isnan(f32.at(i)));
    EXPECT_TRUE(std::isnan(hipgrad::type_convert<float>(f16.at(i))));
    EXPECT_TRUE(std::isnan(hipgrad::type_convert<float>(b16.at(i))));
  }
  // And a check against any reference fails on them.
  EXPECT_FALSE(hipgrad::host::check_close(f16, Tensor<double>({64}), {1e30, 1e30}).ok);

  ASSERT_OK(d32.fill_bytes(0));
  ASSERT_OK(d32.copy_to(f32));
  for (float x : f32.storage()) EXPECT_EQ(x, 0.0f);
}

TEST(HostDeviceBuffer, MovesTransferOwnership) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> a;
  ASSERT_OK(a.allocate(16));
  ASSERT_OK(a.fill_bytes(0));
  float* const pointer = a.data();

  DeviceBuffer<float> b(std::move(a));
  EXPECT_EQ(b.data(), pointer);
  EXPECT_EQ(b.size(), 16u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(a.size(), 0u);

  DeviceBuffer<float> c;
  ASSERT_OK(c.allocate(8));
  c = std::move(b);  // c's own 8 elements are freed
  EXPECT_EQ(c.data(), pointer);
  EXPECT_EQ(c.size(), 16u);
  EXPECT_TRUE(b.empty());

  std::vector<float> host(16, 5.0f);
  ASSERT_OK(c.copy_from_host(host.data(), 16));
  std::vector<float> back(16);
  ASSERT_OK(c.copy_to_host(back.data(), 16));
  EXPECT_EQ(back, host);

  c.reset();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c.data(), nullptr);
}

TEST(HostDeviceBuffer, EmptyBuffersAreValid) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> never_allocated;
  EXPECT_TRUE(never_allocated.empty());
  EXPECT_EQ(never_allocated.bytes(), 0u);
  DeviceBuffer<float> zero;
  ASSERT_OK(zero.allocate(0));
  EXPECT_TRUE(zero.empty());
  EXPECT_EQ(zero.data(), nullptr);
  EXPECT_OK(zero.fill_bytes(0xff));
  EXPECT_OK(zero.copy_from_host(nullptr, 0));
  EXPECT_OK(zero.copy_to_host(nullptr, 0));
  Tensor<float> empty({0, 4});
  EXPECT_OK(zero.copy_from(empty));
  EXPECT_OK(zero.copy_to(empty));
}

TEST(HostDeviceBuffer, WrongSizesAndTheApiErrorOfAFailedAllocationAreStatuses) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> buffer;
  ASSERT_OK(buffer.allocate(10));
  std::vector<float> host(11);
  EXPECT_EQ(buffer.copy_from_host(host.data(), 11).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer.copy_to_host(host.data(), 11).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer.copy_from_host(nullptr, 1).code(), StatusCode::kInvalidArgument);
  Tensor<float> other({11});
  EXPECT_EQ(buffer.copy_from(other).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer.copy_to(other).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(buffer.allocate(std::numeric_limits<std::size_t>::max()).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(buffer.empty());
  // Far more than any GPU holds: the runtime refuses, the buffer stays empty, and the error is
  // not left behind for the next launch check to pick up.
  const Status huge = buffer.allocate(std::size_t{1} << 50);
  EXPECT_EQ(huge.code(), StatusCode::kRuntimeError) << huge.to_string();
  EXPECT_NE(huge.message().find("hipMalloc"), std::string::npos) << huge.message();
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(hipGetLastError(), hipSuccess);
}

TEST(HostEventTimer, StartStopMeasuresAKernel) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> data;
  ASSERT_OK(data.allocate(1 << 16));
  ASSERT_OK(data.fill_bytes(0));
  EventTimer timer;
  float ms = -1;
  EXPECT_EQ(timer.elapsed_ms(&ms).code(), StatusCode::kInvalidArgument);  // nothing recorded yet
  ASSERT_OK(timer.start());
  busy_work<<<256, 256>>>(data.data(), 1 << 16, 4096);
  ASSERT_OK(timer.stop());
  ASSERT_OK(timer.elapsed_ms(&ms));
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 1000.0f);
}

TEST(HostEventTimer, MedianOfRepeatsIsPositiveAndCountsLaunches) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> data;
  ASSERT_OK(data.allocate(1 << 16));
  ASSERT_OK(data.fill_bytes(0));
  hipStream_t stream = nullptr;
  HIPGRAD_ASSERT_HIP(hipStreamCreate(&stream));
  std::vector<int> iterations;
  float median = 0;
  const Status s = hipgrad::host::time_median_ms(
      [&](int iteration) -> Status {
        iterations.push_back(iteration);
        busy_work<<<256, 256, 0, stream>>>(data.data(), 1 << 16, 4096);
        HIPGRAD_RETURN_IF_LAUNCH_ERROR("busy_work");
        return Status::ok();
      },
      TimingOptions{3, 7}, &median, stream);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_GT(median, 0.0f);
  EXPECT_EQ(iterations, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  std::vector<float> samples;
  ASSERT_OK(hipgrad::host::time_each(
      [&](int) -> Status {
        busy_work<<<256, 256, 0, stream>>>(data.data(), 1 << 16, 4096);
        HIPGRAD_RETURN_IF_LAUNCH_ERROR("busy_work");
        return Status::ok();
      },
      TimingOptions{0, 5}, &samples, stream));
  ASSERT_EQ(samples.size(), 5u);
  for (float sample : samples) EXPECT_GT(sample, 0.0f);
  HIPGRAD_ASSERT_HIP(hipStreamDestroy(stream));
}

TEST(HostEventTimer, ApiErrorOfTheFirstFailingLaunchStopsTheTiming) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  int calls = 0;
  float median = -1;
  const Status s = hipgrad::host::time_median_ms(
      [&](int iteration) -> Status {
        ++calls;
        if (iteration == 6) return Status::not_supported("planted failure");
        return Status::ok();
      },
      TimingOptions{2, 10}, &median);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "planted failure");
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(median, -1.0f);  // untouched on failure

  // A real launch error (a block larger than any GPU allows) comes back as a runtime error.
  const Status launch = hipgrad::host::time_median_ms(
      [&](int) -> Status {
        add_one<<<1, 1 << 20>>>(nullptr, 0);
        HIPGRAD_RETURN_IF_LAUNCH_ERROR("add_one");
        return Status::ok();
      },
      TimingOptions{}, &median);
  EXPECT_EQ(launch.code(), StatusCode::kRuntimeError) << launch.to_string();
  EXPECT_NE(launch.message().find("add_one"), std::string::npos) << launch.message();
}

TEST(HostEventTimer, RejectsBadOptions) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  float median = 0;
  const auto noop = [](int) { return Status::ok(); };
  EXPECT_EQ(hipgrad::host::time_median_ms(noop, TimingOptions{1, 0}, &median).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hipgrad::host::time_median_ms(noop, TimingOptions{-1, 5}, &median).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hipgrad::host::time_median_ms(noop, TimingOptions{}, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(HostTimerMedian, OddEvenAndEmpty) {
  // Pure host arithmetic, but it lives with the timer; no GPU needed.
  EXPECT_EQ(hipgrad::host::median({3.0f, 1.0f, 2.0f}), 2.0f);
  EXPECT_EQ(hipgrad::host::median({4.0f, 1.0f, 3.0f, 2.0f}), 2.5f);
  EXPECT_EQ(hipgrad::host::median({5.0f}), 5.0f);
  EXPECT_EQ(hipgrad::host::median({}), 0.0f);
}

}  // namespace
