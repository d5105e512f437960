/// @file cluster.hpp
/// @brief Thread-block clusters: blocks that run at the same time and read each other's shared
///        memory (NVIDIA sm_90 and later). Elsewhere a cluster is a block alone: the host asks
///        cluster_launch_supported() and never plans more than one block per cluster there.
///
/// Clusters here are one-dimensional: blocks r·K … r·K + K − 1 of a 1-D grid form one cluster of
/// K, and a block's rank in it is blockIdx.x % K.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/launch_config.hpp"

namespace hipgrad {

/// The most blocks per cluster that every cluster-capable GPU runs; larger sizes, up to
/// kLargestClusterBlocks on sm_90, are opt-in (allow_large_clusters) and fit where the GPU says so
/// (resident_clusters).
inline constexpr int kPortableClusterBlocks = 8;
inline constexpr int kLargestClusterBlocks = 16;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define HIPGRAD_DEVICE_CLUSTERS 1
#endif

/// Every thread of every block of the cluster arrives; arrive publishes the caller's earlier
/// shared-memory writes to the cluster (release), wait makes the others' visible (acquire).
/// Between the two a thread may do work that touches no peer's shared memory.
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_arrive() {
#if defined(HIPGRAD_DEVICE_CLUSTERS)
  __cluster_barrier_arrive();
#endif
}
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_wait() {
#if defined(HIPGRAD_DEVICE_CLUSTERS)
  __cluster_barrier_wait();
#endif
}
/// cluster_arrive without the release: for a barrier that orders nothing but the blocks' start
/// (a block's shared memory takes a peer's writes only once the block runs).
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_arrive_relaxed() {
#if defined(HIPGRAD_DEVICE_CLUSTERS)
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}
/// A barrier across the cluster (also a barrier across the block).
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_sync() {
#if defined(HIPGRAD_DEVICE_CLUSTERS)
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
#else
  block_sync();
#endif
}

/// The address of `shared` (a __shared__ object of the caller) in the block of rank `rank`.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T* cluster_peer(T* shared, int rank) {
#if defined(HIPGRAD_DEVICE_CLUSTERS)
  return static_cast<T*>(
      __cluster_map_shared_rank(const_cast<std::remove_const_t<T>*>(shared), static_cast<unsigned>(rank)));
#else
  (void)rank;
  return shared;
#endif
}

/// Whether the current device launches clusters of more than one block (DeviceInfo::clusters).
inline bool cluster_launch_supported() { return current_device_info().clusters; }

/// Launches kernel<<<blocks, threads, shared_bytes, stream>>>(args…) in clusters of `cluster`
/// blocks (blocks a multiple of it). A cluster of one is a plain launch, on every backend. More
/// than 48 KB of dynamic shared memory needs the kernel's opt-in (kernel_attributes.hpp) first.
template <typename... Params, typename... Args>
hipError_t launch_clustered_with_shared(void (*kernel)(Params...), unsigned blocks, unsigned threads, unsigned cluster,
                                        std::size_t shared_bytes, hipStream_t stream, Args&&... args) {
  if (cluster <= 1) {
    kernel<<<blocks, threads, shared_bytes, stream>>>(std::forward<Args>(args)...);
    return hipGetLastError();
  }
#if defined(HIPGRAD_BACKEND_CUDA)
  LaunchConfig launch(blocks, threads, shared_bytes, stream);
  return cudaLaunchKernelEx(&launch.in_clusters_of(cluster).config, kernel, std::forward<Args>(args)...);
#else
  return hipErrorInvalidValue;
#endif
}

/// Lets `kernel` run in clusters of more than kPortableClusterBlocks (up to 16 on sm_90), where
/// the GPU has them; whether one fits is resident_clusters' answer.
template <typename... Params>
hipError_t allow_large_clusters(void (*kernel)(Params...)) {
#if defined(HIPGRAD_BACKEND_CUDA)
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
#else
  (void)kernel;
  return hipSuccess;
#endif
}

/// How many clusters of `cluster` blocks of `kernel` (`threads` each, with `shared_bytes` of
/// dynamic shared memory, opted in first, as are clusters above kPortableClusterBlocks) the
/// current device runs at once, a cluster of one being a block; 0 when none fits or the runtime
/// cannot say.
template <typename... Params>
int resident_clusters(void (*kernel)(Params...), unsigned threads, unsigned cluster, std::size_t shared_bytes) {
  int count = 0;
  if (cluster > 1) {
#if defined(HIPGRAD_BACKEND_CUDA)
    LaunchConfig launch(cluster, threads, shared_bytes, nullptr);
    if (cudaOccupancyMaxActiveClusters(&count, kernel, &launch.in_clusters_of(cluster).config) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
#endif
    return count;
  }
  const DeviceInfo& device = current_device_info();
  if (!device.known || hipOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, static_cast<int>(threads),
                                                                    shared_bytes) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return count * device.multiprocessors;
}

/// resident_clusters, remembered per device and configuration for the life of the process:
/// planners weigh candidate configurations on every call. `opt_in()` runs before the runtime is
/// asked (only then), to let the kernel take `shared_bytes` and `cluster`; 0 if it fails, and
/// then not remembered, so that the next call asks again.
template <typename OptIn, typename... Params>
int remembered_resident_clusters(void (*kernel)(Params...), unsigned threads, unsigned cluster,
                                 std::size_t shared_bytes, OptIn&& opt_in) {
  using Key = std::tuple<const void*, int, unsigned, unsigned, std::size_t>;  // kernel, device, configuration
  static std::mutex mutex;
  static std::map<Key, int> known;
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  const Key key{reinterpret_cast<const void*>(kernel), device, threads, cluster, shared_bytes};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = known.find(key);
    if (found != known.end()) return found->second;
  }
  if (opt_in() != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  const int count = resident_clusters(kernel, threads, cluster, shared_bytes);
  const std::lock_guard<std::mutex> lock(mutex);
  known.emplace(key, count);
  return count;
}

/// launch_clustered_with_shared without dynamic shared memory.
template <typename... Params, typename... Args>
hipError_t launch_clustered(void (*kernel)(Params...), unsigned blocks, unsigned threads, unsigned cluster,
                            hipStream_t stream, Args&&... args) {
  return launch_clustered_with_shared(kernel, blocks, threads, cluster, 0, stream, std::forward<Args>(args)...);
}

}  // namespace hipgrad
