/// @file dependent_launch.hpp
/// @brief The later kernels of an op launched as dependents of the one before them on the stream
///        (programmatic dependent launch, NVIDIA sm_90 and later): a dependent's blocks are
///        placed while its predecessor drains and wait on the GPU for the predecessor's results,
///        instead of the launch waiting for the predecessor to retire. Elsewhere, and for a kernel
///        built for an older architecture, a plain launch.
///
/// The contract, kept by every kernel launched with launch_dependent:
/// - Its first statement, in every block, is wait_for_prior_grids(): it touches no memory before
///   the predecessor has completed and its writes are visible, and, since no block of it completes
///   before the predecessor has, work enqueued after it on the stream still runs after both.
/// - The first kernel of an op is launched plainly, so that it starts after everything enqueued
///   before the op. (Launched as a dependent it would cost the host less, but small kernels then
///   ran longer on the GPU.)
/// A predecessor calls allow_dependent_grids() (the kernels here do so as they start): its
/// dependent is then placed once every block of it has started or exited, not once it completes.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/launch_config.hpp"

namespace hipgrad {

/// Lets the grid launched after this one as a dependent be placed (a hint; no-op elsewhere and
/// when nothing depends on this grid).
HIPGRAD_DEVICE HIPGRAD_INLINE void allow_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the grid this one depends on has completed and its writes are visible; returns at
/// once for a grid launched plainly.
HIPGRAD_DEVICE HIPGRAD_INLINE void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Whether `kernel` may be launched as a dependent on the current device: its code was generated
/// for sm_90 or later, where wait_for_prior_grids() holds the wait. A kernel built for an older
/// architecture runs without it on any GPU, so it must not overlap its predecessor. Remembered
/// per kernel and device.
template <typename... Params>
bool dependent_launch_supported(void (*kernel)(Params...)) {
#if defined(HIPGRAD_BACKEND_CUDA)
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, bool> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(key);
  if (found != known.end()) return found->second;
  cudaFuncAttributes attributes{};
  bool supported = false;
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)) == cudaSuccess) {
    supported = attributes.ptxVersion >= 90;  // the virtual architecture, as __CUDA_ARCH__ saw it
  } else {
    (void)cudaGetLastError();
  }
  known.emplace(key, supported);
  return supported;
#else
  (void)kernel;
  return false;
#endif
}

/// kernel<<<blocks, threads, shared_bytes, stream>>>(args…) as a dependent of the kernel before it
/// on `stream` where dependent_launch_supported(kernel), plainly elsewhere. `kernel` must keep the
/// contract above.
template <typename... Params, typename... Args>
hipError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                            hipStream_t stream, Args&&... args) {
#if defined(HIPGRAD_BACKEND_CUDA)
  if (dependent_launch_supported(kernel)) {
    LaunchConfig launch(grid, block, shared_bytes, stream);
    return cudaLaunchKernelEx(&launch.as_dependent().config, kernel, std::forward<Args>(args)...);
  }
#endif
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  return hipGetLastError();
}

}  // namespace hipgrad
