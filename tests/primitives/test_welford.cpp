/// @file test_welford.cpp
/// @brief Welford update/merge on the host and block merges on the GPU against a two-pass double
///        reference, on data whose mean is large against its spread.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/primitives/welford.hpp"

namespace {

using State = hipgrad::WelfordState<float>;

struct Moments {
  double mean, variance;
};

Moments two_pass(const float* x, int n) {
  double mean = 0;
  for (int i = 0; i < n; ++i) mean += x[i];
  mean /= n;
  double var = 0;
  for (int i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  return {mean, var / n};
}

std::vector<float> offset_data(std::size_t n, float offset, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 - 0.5);
  return v;
}

TEST(WelfordHost, MergeOfPartsEqualsTheWhole) {
  const auto data = offset_data(1000, 100.0f, 1);
  State whole = State::empty(), left = State::empty(), right = State::empty();
  for (int i = 0; i < 1000; ++i) hipgrad::welford_update(whole, data[i]);
  for (int i = 0; i < 377; ++i) hipgrad::welford_update(left, data[i]);
  for (int i = 377; i < 1000; ++i) hipgrad::welford_update(right, data[i]);
  const State merged = hipgrad::welford_merge(left, right);
  const Moments ref = two_pass(data.data(), 1000);
  EXPECT_EQ(merged.count, 1000.0f);
  EXPECT_NEAR(merged.mean, ref.mean, 1e-5 * std::fabs(ref.mean));
  EXPECT_NEAR(merged.variance(), ref.variance, 1e-3 * ref.variance);
  EXPECT_NEAR(whole.variance(), ref.variance, 1e-3 * ref.variance);
}

TEST(WelfordHost, EmptyStatesAreTheIdentity) {
  State s = State::empty();
  hipgrad::welford_update(s, 3.0f);
  hipgrad::welford_update(s, 5.0f);
  const State a = hipgrad::welford_merge(State::empty(), s);
  const State b = hipgrad::welford_merge(s, State::empty());
  const State e = hipgrad::welford_merge(State::empty(), State::empty());
  EXPECT_EQ(a.mean, 4.0f);
  EXPECT_EQ(a.variance(), 1.0f);
  EXPECT_EQ(b.mean, 4.0f);
  EXPECT_EQ(b.m2, 2.0f);
  EXPECT_EQ(e.count, 0.0f);
  EXPECT_EQ(e.variance(), 0.0f);
  EXPECT_FALSE(std::isnan(e.mean));
}

template <int BlockThreads>
__global__ void block_welford_kernel(const float* in, int per_block, float* mean, float* variance, float* count) {
  __shared__ typename hipgrad::BlockWelford<float, BlockThreads>::TempStorage storage;
  const float* row = in + static_cast<long long>(blockIdx.x) * per_block;
  State s = State::empty();
  for (int i = threadIdx.x; i < per_block; i += BlockThreads) hipgrad::welford_update(s, row[i]);
  const State all = hipgrad::block_welford_merge<BlockThreads>(s, storage);
  if (threadIdx.x == BlockThreads - 1) {  // the last thread: all_reduce reaches every thread
    mean[blockIdx.x] = all.mean;
    variance[blockIdx.x] = all.variance();
    count[blockIdx.x] = all.count;
  }
}

template <int BlockThreads>
void check_block_welford(int per_block, float offset) {
  const int blocks = 11;
  const auto data = offset_data(static_cast<std::size_t>(blocks) * per_block, offset, per_block);
  float *in, *mean, *var, *count;
  HIPGRAD_ASSERT_HIP(hipMalloc(&in, data.size() * sizeof(float)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&mean, blocks * sizeof(float)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&var, blocks * sizeof(float)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&count, blocks * sizeof(float)));
  HIPGRAD_ASSERT_HIP(hipMemcpy(in, data.data(), data.size() * sizeof(float), hipMemcpyHostToDevice));
  block_welford_kernel<BlockThreads><<<blocks, BlockThreads>>>(in, per_block, mean, var, count);
  HIPGRAD_ASSERT_HIP(hipGetLastError());
  std::vector<float> hm(blocks), hv(blocks), hc(blocks);
  HIPGRAD_ASSERT_HIP(hipMemcpy(hm.data(), mean, blocks * sizeof(float), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hv.data(), var, blocks * sizeof(float), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hc.data(), count, blocks * sizeof(float), hipMemcpyDeviceToHost));
  for (int b = 0; b < blocks; ++b) {
    const Moments ref = two_pass(data.data() + static_cast<std::size_t>(b) * per_block, per_block);
    EXPECT_EQ(hc[b], static_cast<float>(per_block));
    EXPECT_NEAR(hm[b], ref.mean, 2e-6 * std::fabs(ref.mean) + 1e-6) << "block " << b;
    // Uniform(−0.5, 0.5) has variance 1/12. Around an offset of 1000, fp32 E[x²]−E[x]² would lose
    // every digit of it; Welford keeps a few parts in 10^3 (each x carries 2^-14 of rounding).
    EXPECT_NEAR(hv[b], ref.variance, 5e-3 * ref.variance + 1e-7) << "block " << b;
  }
  for (float* p : {in, mean, var, count}) EXPECT_EQ(hipFree(p), hipSuccess);
}

TEST(WelfordDevice, BlockMergeMatchesTwoPass) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  for (int per_block : {1, 7, 255, 4099}) {
    check_block_welford<64>(per_block, 0.0f);
    check_block_welford<256>(per_block, 1000.0f);
    check_block_welford<1024>(per_block, -3.0f);
  }
}

}  // namespace
