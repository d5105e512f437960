/// @file device_info.hpp
/// @brief What plans read about a GPU (multiprocessors, shared memory, clusters, L2), asked of the
///        runtime once per device and kept for the life of the process.
///
/// Ops never query the runtime for attributes themselves: they take a DeviceInfo from
/// current_device_info(), whose cost after the first call on a device is one hipGetDevice and
/// an atomic load. Several host threads may call it at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad {

struct DeviceInfo {
  bool known = false;  ///< false: the runtime could not say (no GPU); the fields are fallbacks
  int device = -1;
  int multiprocessors = 1;
  int warp_size = 64;                       ///< the widest of the targets where unknown
  int major = 0, minor = 0;                 ///< compute capability (NVIDIA), gfx major.minor (AMD)
  std::size_t shared_per_block_opt_in = 0;  ///< the most dynamic + static shared memory a block may opt in to
  std::size_t shared_per_multiprocessor = 0;
  std::size_t reserved_shared_per_block = 0;  ///< kept by the runtime in every block (1 KB on sm_80+)
  std::size_t l2_bytes = 0;
  bool clusters = false;  ///< launches thread-block clusters of more than one block (sm_90)
};

namespace detail {

inline constexpr int kDeviceInfoSlots = 64;

inline bool query_device_info(int device, DeviceInfo* info) {
  int multiprocessors = 0, warp = 0, major = 0, minor = 0, block_bytes = 0, sm_bytes = 0, l2 = 0;
  const bool answered =
      hipDeviceGetAttribute(&multiprocessors, hipDeviceAttributeMultiprocessorCount, device) == hipSuccess &&
      hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, device) == hipSuccess &&
      hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, device) == hipSuccess &&
      hipDeviceGetAttribute(&minor, hipDeviceAttributeComputeCapabilityMinor, device) == hipSuccess &&
      hipDeviceGetAttribute(&block_bytes, hipDeviceAttributeMaxSharedMemoryPerBlock, device) == hipSuccess &&
      hipDeviceGetAttribute(&sm_bytes, hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, device) == hipSuccess &&
      hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, device) == hipSuccess;
  if (!answered || multiprocessors <= 0) return false;
  info->known = true;
  info->device = device;
  info->multiprocessors = multiprocessors;
  info->warp_size = warp;
  info->major = major;
  info->minor = minor;
  info->shared_per_block_opt_in = static_cast<std::size_t>(block_bytes);
  info->shared_per_multiprocessor = static_cast<std::size_t>(sm_bytes);
  info->l2_bytes = static_cast<std::size_t>(l2);
#if defined(HIPGRAD_BACKEND_CUDA)
  int reserved = 0, clusters = 0;
  if (cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device) != cudaSuccess)
    return false;
  info->reserved_shared_per_block = static_cast<std::size_t>(reserved);
  info->clusters = clusters != 0;
#endif
  return true;
}

}  // namespace detail

/// The current device's DeviceInfo, or one with known = false (and the fallbacks above) when the
/// runtime cannot answer; answers are kept per device, failures are asked again next time.
inline const DeviceInfo& current_device_info() {
  static const DeviceInfo unknown{};
  static std::atomic<const DeviceInfo*> slots[detail::kDeviceInfoSlots] = {};
  int device = 0;
  if (hipGetDevice(&device) != hipSuccess || device < 0) {
    (void)hipGetLastError();
    return unknown;
  }
  if (device < detail::kDeviceInfoSlots) {
    if (const DeviceInfo* kept = slots[device].load(std::memory_order_acquire)) return *kept;
  }
  // First call on this device (or one beyond the table): ask the runtime.
  auto* info = new DeviceInfo{};
  if (!detail::query_device_info(device, info)) {
    (void)hipGetLastError();
    delete info;
    return unknown;
  }
  if (device >= detail::kDeviceInfoSlots) {
    // Beyond the table (not seen on real systems): asked on every call and kept in a locked map,
    // so that the reference stays valid for the plans that hold it, as the table's do.
    static std::mutex mutex;
    static std::map<int, std::unique_ptr<const DeviceInfo>> beyond;
    const std::lock_guard<std::mutex> lock(mutex);
    auto& kept = beyond[device];
    if (!kept)
      kept.reset(info);
    else
      delete info;
    return *kept;
  }
  // Threads that race on the first call each ask; the first to publish wins, the others'
  // identical answers are dropped. Published entries live until the process ends.
  const DeviceInfo* expected = nullptr;
  if (!slots[device].compare_exchange_strong(expected, info, std::memory_order_acq_rel)) {
    delete info;
    return *expected;
  }
  return *info;
}

}  // namespace hipgrad
