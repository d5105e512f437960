/// @file device_fill.hpp
/// @brief Fills device memory with seeded values in [-1, 1) on the GPU itself, for tensors too
///        large to fill on the host and upload (benchmarks, tests of > 2^31 elements).
#pragma once

#include <cstdint>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::host {

namespace detail {

/// Value i of the stream `seed`: a splitmix64 hash of (seed, i) scaled to [-1, 1). Never all
/// zeros, different for every seed, independent of the launch configuration.
template <typename T>
__global__ void fill_uniform_kernel(T* data, Index count, std::uint64_t seed) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    std::uint64_t z = (static_cast<std::uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    data[i] = type_convert<T>(static_cast<float>(z >> 40) * 0x1.0p-23f - 1.0f);
  }
}

}  // namespace detail

/// Writes `count` values in [-1, 1) derived from (seed, index) to device memory `data`.
template <typename T>
Status fill_uniform_on_device(T* data, Index count, std::uint64_t seed, hipStream_t stream = nullptr) {
  if (count < 0 || (count > 0 && data == nullptr))
    return Status::invalid_argument("fill_uniform_on_device: bad buffer");
  if (count == 0) return Status::ok();
  detail::fill_uniform_kernel<<<1024, 256, 0, stream>>>(data, count, seed);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("fill_uniform_kernel");
  return Status::ok();
}

}  // namespace hipgrad::host
