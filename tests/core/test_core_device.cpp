/// @file test_core_device.cpp
/// @brief Device side of core/: hardware conversions against the software ones over every input,
///        and the warp intrinsics (shuffles with width, ballot, lane id, atomics).

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/numeric_types.hpp"

namespace {

using hipgrad::detail::bit_cast;

struct Mismatches {
  unsigned long long count;
  unsigned int first;  // smallest mismatching input bit pattern
};

enum class Conversion { kFloatToHalf, kFloatToBfloat16, kHalfToFloat };

__device__ bool same_result(Conversion conversion, std::uint32_t bits) {
  const float f = bit_cast<float>(bits);
  switch (conversion) {
    case Conversion::kFloatToHalf: {
      const std::uint16_t hw = hipgrad::half(f).bits;
      if (f != f) return (hw & 0x7c00u) == 0x7c00u && (hw & 0x03ffu) != 0;  // NaN payloads may differ
      return hw == hipgrad::detail::float_to_half_bits_soft(f);
    }
    case Conversion::kFloatToBfloat16: {
      const std::uint16_t hw = hipgrad::bfloat16(f).bits;
      if (f != f) return (hw & 0x7f80u) == 0x7f80u && (hw & 0x007fu) != 0;
      return hw == hipgrad::detail::float_to_bfloat16_bits_soft(f);
    }
    case Conversion::kHalfToFloat: {
      const auto h = static_cast<std::uint16_t>(bits);
      const float hw = static_cast<float>(hipgrad::half::from_bits(h));
      const float sw = hipgrad::detail::half_bits_to_float_soft(h);
      return (hw != hw && sw != sw) || bit_cast<std::uint32_t>(hw) == bit_cast<std::uint32_t>(sw);
    }
  }
  return false;
}

__global__ void compare_conversions(Conversion conversion, unsigned long long begin, unsigned long long end,
                                    Mismatches* out) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = begin + blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < end;
       i += stride) {
    const auto bits = static_cast<std::uint32_t>(i);
    if (!same_result(conversion, bits)) {
      hipgrad::atomic_add(&out->count, 1ull);
      atomicMin(&out->first, bits);
    }
  }
}

Mismatches run_conversion_sweep(Conversion conversion, unsigned long long end) {
  Mismatches host{0, 0xffffffffu};
  Mismatches* device = nullptr;
  EXPECT_EQ(hipMalloc(&device, sizeof(Mismatches)), hipSuccess);
  EXPECT_EQ(hipMemcpy(device, &host, sizeof(host), hipMemcpyHostToDevice), hipSuccess);
  compare_conversions<<<1024, 256>>>(conversion, 0, end, device);
  EXPECT_EQ(hipGetLastError(), hipSuccess);
  EXPECT_EQ(hipMemcpy(&host, device, sizeof(host), hipMemcpyDeviceToHost), hipSuccess);
  EXPECT_EQ(hipFree(device), hipSuccess);
  return host;
}

TEST(DeviceConversion, FloatToHalfMatchesSoftwareForEveryFloat) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  const Mismatches m = run_conversion_sweep(Conversion::kFloatToHalf, 1ull << 32);
  EXPECT_EQ(m.count, 0u) << "first mismatching float bits 0x" << std::hex << m.first;
}

TEST(DeviceConversion, FloatToBfloat16MatchesSoftwareForEveryFloat) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  const Mismatches m = run_conversion_sweep(Conversion::kFloatToBfloat16, 1ull << 32);
  EXPECT_EQ(m.count, 0u) << "first mismatching float bits 0x" << std::hex << m.first;
}

TEST(DeviceConversion, HalfToFloatMatchesSoftwareForEveryHalf) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  const Mismatches m = run_conversion_sweep(Conversion::kHalfToFloat, 1ull << 16);
  EXPECT_EQ(m.count, 0u) << "first mismatching half bits 0x" << std::hex << m.first;
}

/// Three words, so that the shuffles must move a multi-word value.
struct Triple {
  int a;
  float b;
  unsigned c;
};

constexpr int kWidth = 8;

__global__ void shuffle_kernel(Triple* xor_out, Triple* up_out, Triple* down_out, Triple* index_out,
                               unsigned long long* ballot_out, int* lane_out, int* warp_size_out) {
  const int t = static_cast<int>(threadIdx.x);
  const Triple mine{t, 0.5f * t, 1000u + t};
  xor_out[t] = hipgrad::shfl_xor(mine, 3, kWidth);
  up_out[t] = hipgrad::shfl_up(mine, 2, kWidth);
  down_out[t] = hipgrad::shfl_down(mine, 1, kWidth);
  index_out[t] = hipgrad::shfl(mine, 5, kWidth);
  const hipgrad::LaneMask ballot = hipgrad::warp_ballot(t % 3 == 0);
  if (hipgrad::lane_id() == 0) ballot_out[t / hipgrad::warp_size()] = ballot;
  lane_out[t] = hipgrad::lane_id();
  if (t == 0) *warp_size_out = hipgrad::warp_size();
}

TEST(DeviceIntrinsics, ShufflesWithWidthBallotAndLaneId) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  int device = 0;
  hipDeviceProp_t prop{};
  HIPGRAD_ASSERT_HIP(hipGetDevice(&device));
  HIPGRAD_ASSERT_HIP(hipGetDeviceProperties(&prop, device));
  const int threads = 2 * prop.warpSize;
  Triple *x, *u, *d, *i;
  unsigned long long* ballots;
  int *lanes, *warp;
  HIPGRAD_ASSERT_HIP(hipMalloc(&x, threads * sizeof(Triple)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&u, threads * sizeof(Triple)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&d, threads * sizeof(Triple)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&i, threads * sizeof(Triple)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&ballots, 2 * sizeof(unsigned long long)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&lanes, threads * sizeof(int)));
  HIPGRAD_ASSERT_HIP(hipMalloc(&warp, sizeof(int)));
  shuffle_kernel<<<1, threads>>>(x, u, d, i, ballots, lanes, warp);
  HIPGRAD_ASSERT_HIP(hipGetLastError());
  std::vector<Triple> hx(threads), hu(threads), hd(threads), hi(threads);
  std::vector<unsigned long long> hb(2);
  std::vector<int> hl(threads);
  int hw = 0;
  HIPGRAD_ASSERT_HIP(hipMemcpy(hx.data(), x, threads * sizeof(Triple), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hu.data(), u, threads * sizeof(Triple), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hd.data(), d, threads * sizeof(Triple), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hi.data(), i, threads * sizeof(Triple), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hb.data(), ballots, 2 * sizeof(unsigned long long), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(hl.data(), lanes, threads * sizeof(int), hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipMemcpy(&hw, warp, sizeof(int), hipMemcpyDeviceToHost));
  EXPECT_EQ(hw, prop.warpSize);
  for (int t = 0; t < threads; ++t) {
    const int group = t / kWidth * kWidth, in_group = t % kWidth;
    const int src_xor = group + (in_group ^ 3);
    const int src_up = in_group >= 2 ? t - 2 : t;
    const int src_down = in_group + 1 < kWidth ? t + 1 : t;
    const int src_index = group + 5;
    EXPECT_EQ(hx[t].a, src_xor) << "lane " << t;
    EXPECT_EQ(hx[t].b, 0.5f * src_xor);
    EXPECT_EQ(hx[t].c, 1000u + src_xor);
    EXPECT_EQ(hu[t].a, src_up) << "lane " << t;
    EXPECT_EQ(hd[t].c, 1000u + src_down) << "lane " << t;
    EXPECT_EQ(hi[t].b, 0.5f * src_index) << "lane " << t;
    EXPECT_EQ(hl[t], t % prop.warpSize);
  }
  for (int w = 0; w < 2; ++w) {
    unsigned long long expected = 0;
    for (int l = 0; l < prop.warpSize; ++l)
      if ((w * prop.warpSize + l) % 3 == 0) expected |= 1ull << l;
    EXPECT_EQ(hb[w], expected) << "warp " << w;
  }
  for (void* p : {static_cast<void*>(x), static_cast<void*>(u), static_cast<void*>(d), static_cast<void*>(i),
                  static_cast<void*>(ballots), static_cast<void*>(lanes), static_cast<void*>(warp)})
    EXPECT_EQ(hipFree(p), hipSuccess);
}

}  // namespace
