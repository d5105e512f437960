/// @file test_reductions.cpp
/// @brief Warp and block reductions on the GPU against the CPU: sums and maxima of integer-valued
///        data (exact), several values in one call, all-reduce broadcast, run-to-run bitwise equality.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/primitives/block_reduce.hpp"
#include "hipgrad/primitives/warp_reduce.hpp"

namespace {

using Pair = hipgrad::Array<float, 2>;

std::vector<float> integer_data(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 11) - 5);
  return v;
}

std::vector<float> decimal_data(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  return v;
}

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  std::size_t count = 0;
  explicit DeviceArray(std::size_t n) : count(n) {
    EXPECT_EQ(hipMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)), hipSuccess);
    EXPECT_EQ(hipMemset(ptr, 0xff, std::max<std::size_t>(n, 1) * sizeof(T)), hipSuccess);  // poison
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    EXPECT_EQ(hipMemcpy(ptr, host.data(), count * sizeof(T), hipMemcpyHostToDevice), hipSuccess);
  }
  ~DeviceArray() { (void)hipFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> to_host() const {
    std::vector<T> host(count);
    EXPECT_EQ(hipMemcpy(host.data(), ptr, count * sizeof(T), hipMemcpyDeviceToHost), hipSuccess);
    return host;
  }
};

// ---- block reductions -------------------------------------------------------------------------

struct BlockResults {
  float* sum;      // [blocks], from thread 0
  float* max;      // [blocks], from thread 0
  Pair* pair;      // [blocks], (Σx, Σx²) in one call, from thread 0
  float* all_sum;  // [blocks * BlockThreads], what every thread got from all_sum
};

/// Each block folds `per_block` elements thread-strided (as an op's main loop would), then reduces.
template <int BlockThreads>
__global__ void block_reduce_kernel(const float* in, int per_block, BlockResults out) {
  using Reduce = hipgrad::BlockReduce<float, BlockThreads>;
  using ReducePair = hipgrad::BlockReduce<Pair, BlockThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ typename ReducePair::TempStorage pair_storage;
  const float* row = in + static_cast<long long>(blockIdx.x) * per_block;
  float sum = 0.0f, max = -INFINITY;
  Pair pair{{0.0f, 0.0f}};
  for (int i = threadIdx.x; i < per_block; i += BlockThreads) {
    sum += row[i];
    max = fmaxf(max, row[i]);
    pair = pair + Pair{{row[i], row[i] * row[i]}};
  }
  const float block_sum = Reduce(storage).sum(sum);
  hipgrad::block_sync();
  const float block_max = Reduce(storage).max(max);
  const Pair block_pair = ReducePair(pair_storage).sum(pair);
  hipgrad::block_sync();
  // all_sum twice on the same storage without a barrier in between: the second must not race.
  const float all = Reduce(storage).all_sum(sum);
  const float all_again = Reduce(storage).all_sum(sum);
  out.all_sum[blockIdx.x * BlockThreads + threadIdx.x] = all == all_again ? all : NAN;
  if (threadIdx.x == 0) {
    out.sum[blockIdx.x] = block_sum;
    out.max[blockIdx.x] = block_max;
    out.pair[blockIdx.x] = block_pair;
  }
}

template <typename BlockSize>
class BlockReduceTest : public ::testing::Test {};

template <int N>
using BlockThreads = std::integral_constant<int, N>;
using BlockSizes = ::testing::Types<BlockThreads<32>, BlockThreads<64>, BlockThreads<96>, BlockThreads<128>,
                                    BlockThreads<256>, BlockThreads<512>, BlockThreads<1024>>;
TYPED_TEST_SUITE(BlockReduceTest, BlockSizes);

struct HostBlockResults {
  std::vector<float> sum, max, all_sum;
  std::vector<Pair> pair;
};

template <int Threads>
HostBlockResults run_block_reduce(const std::vector<float>& data, int blocks, int per_block) {
  DeviceArray<float> in(data), sum(blocks), max(blocks), all_sum(static_cast<std::size_t>(blocks) * Threads);
  DeviceArray<Pair> pair(blocks);
  block_reduce_kernel<Threads><<<blocks, Threads>>>(in.ptr, per_block, {sum.ptr, max.ptr, pair.ptr, all_sum.ptr});
  EXPECT_EQ(hipGetLastError(), hipSuccess);
  EXPECT_EQ(hipDeviceSynchronize(), hipSuccess);
  return {sum.to_host(), max.to_host(), all_sum.to_host(), pair.to_host()};
}

TYPED_TEST(BlockReduceTest, IntegerDataIsExact) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  constexpr int kThreads = TypeParam::value;
  // Per-block lengths: fewer elements than threads (idle threads), one, a prime, several per thread.
  for (int per_block : {1, kThreads / 2 + 1, 1009, 4 * kThreads + 3}) {
    const int blocks = 37;
    const auto data = integer_data(static_cast<std::size_t>(blocks) * per_block, 42 + per_block);
    const auto r = run_block_reduce<kThreads>(data, blocks, per_block);
    for (int b = 0; b < blocks; ++b) {
      double sum = 0, sq = 0;
      float max = -INFINITY;
      for (int i = 0; i < per_block; ++i) {
        const float x = data[static_cast<std::size_t>(b) * per_block + i];
        sum += x;
        sq += static_cast<double>(x) * x;
        max = std::max(max, x);
      }
      ASSERT_EQ(r.sum[b], static_cast<float>(sum)) << "block " << b << ", " << per_block << " per block";
      ASSERT_EQ(r.max[b], max) << "block " << b;
      ASSERT_EQ(r.pair[b][0], static_cast<float>(sum)) << "block " << b;
      ASSERT_EQ(r.pair[b][1], static_cast<float>(sq)) << "block " << b;
      for (int t = 0; t < kThreads; ++t)
        ASSERT_EQ(r.all_sum[static_cast<std::size_t>(b) * kThreads + t], static_cast<float>(sum))
            << "block " << b << " thread " << t;
    }
  }
}

TYPED_TEST(BlockReduceTest, DecimalDataIsAccurateAndReproducible) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  constexpr int kThreads = TypeParam::value;
  const int blocks = 13, per_block = 10007;
  const auto data = decimal_data(static_cast<std::size_t>(blocks) * per_block, 7);
  const auto first = run_block_reduce<kThreads>(data, blocks, per_block);
  const auto second = run_block_reduce<kThreads>(data, blocks, per_block);
  for (int b = 0; b < blocks; ++b) {
    double sum = 0, abs_sum = 0;
    for (int i = 0; i < per_block; ++i) {
      sum += data[static_cast<std::size_t>(b) * per_block + i];
      abs_sum += std::fabs(data[static_cast<std::size_t>(b) * per_block + i]);
    }
    // fp32 accumulation of n terms: error bounded by ~n·eps·Σ|x| in the worst case; the blocked
    // order keeps it far below that. 1e-5·Σ|x| is loose enough for any order, tight enough to
    // catch a dropped or doubled element (each is ~0.5 here against Σ|x| ≈ 5000).
    EXPECT_NEAR(first.sum[b], sum, 1e-5 * abs_sum) << "block " << b;
    EXPECT_EQ(std::memcmp(&first.sum[b], &second.sum[b], sizeof(float)), 0) << "not bitwise reproducible";
    EXPECT_EQ(std::memcmp(&first.pair[b], &second.pair[b], sizeof(Pair)), 0) << "not bitwise reproducible";
  }
}

// ---- warp reductions --------------------------------------------------------------------------

template <int Width>
__global__ void warp_reduce_kernel(const float* in, float* sum_out, float* max_out, Pair* pair_out, float* all_out) {
  using Reduce = hipgrad::WarpReduce<float, Width>;
  using ReducePair = hipgrad::WarpReduce<Pair, Width>;
  constexpr int kMaxGroups = 1024 / Width;
  __shared__ typename Reduce::TempStorage storage[kMaxGroups];
  __shared__ typename ReducePair::TempStorage pair_storage[kMaxGroups];
  const int t = static_cast<int>(threadIdx.x), group = t / Width;
  const float x = in[blockIdx.x * blockDim.x + t];
  const float s = Reduce(storage[group]).sum(x);
  const Pair p = ReducePair(pair_storage[group]).sum(Pair{{x, 2.0f * x}});
  const float a = Reduce(storage[group]).all_sum(x);
  const float m = Reduce(storage[group]).all_max(x);
  all_out[blockIdx.x * blockDim.x + t] = a;
  if (t % Width == 0) {
    const int out = (blockIdx.x * blockDim.x + t) / Width;
    sum_out[out] = s;
    pair_out[out] = p;
    max_out[out] = m;
  }
}

template <typename Width>
class WarpReduceTest : public ::testing::Test {};
template <int N>
using WarpWidth = std::integral_constant<int, N>;
using WarpWidths =
    ::testing::Types<WarpWidth<1>, WarpWidth<2>, WarpWidth<4>, WarpWidth<8>, WarpWidth<16>, WarpWidth<32>>;
TYPED_TEST_SUITE(WarpReduceTest, WarpWidths);

TYPED_TEST(WarpReduceTest, LogicalWarpsAreExactOnIntegerData) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  constexpr int kWidth = TypeParam::value;
  const int threads = 256, blocks = 5, n = threads * blocks, groups = n / kWidth;
  const auto data = integer_data(n, 99);
  DeviceArray<float> in(data), sum(groups), max(groups), all(n);
  DeviceArray<Pair> pair(groups);
  warp_reduce_kernel<kWidth><<<blocks, threads>>>(in.ptr, sum.ptr, max.ptr, pair.ptr, all.ptr);
  HIPGRAD_ASSERT_HIP(hipGetLastError());
  const auto hs = sum.to_host(), hm = max.to_host(), ha = all.to_host();
  const auto hp = pair.to_host();
  for (int g = 0; g < groups; ++g) {
    float s = 0, m = -INFINITY;
    for (int l = 0; l < kWidth; ++l) {
      s += data[g * kWidth + l];
      m = std::max(m, data[g * kWidth + l]);
    }
    ASSERT_EQ(hs[g], s) << "group " << g;
    ASSERT_EQ(hm[g], m) << "group " << g;
    ASSERT_EQ(hp[g][0], s) << "group " << g;
    ASSERT_EQ(hp[g][1], 2.0f * s) << "group " << g;
    for (int l = 0; l < kWidth; ++l) ASSERT_EQ(ha[g * kWidth + l], s) << "group " << g << " lane " << l;
  }
}

}  // namespace
