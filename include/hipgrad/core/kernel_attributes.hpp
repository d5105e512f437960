/// @file kernel_attributes.hpp
/// @brief A kernel's opt-ins, made once per kernel and device for the life of the process: more
///        dynamic shared memory than the default 48 KB, and clusters above the portable size;
///        and what the compiler gave a kernel (registers, local memory).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

#include "hipgrad/core/cluster.hpp"
#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad {
namespace detail {

struct KernelOptIns {
  std::size_t shared_bytes = 0;
  bool large_clusters = false;
};

/// The opt-ins made so far, per (kernel, device), behind one lock.
struct KernelOptInTable {
  std::mutex mutex;
  std::map<std::pair<const void*, int>, KernelOptIns> made;
};

inline KernelOptInTable& kernel_opt_in_table() {
  static KernelOptInTable table;
  return table;
}

/// Calls `make(opt_ins)` under the table's lock with the current device's entry for `kernel`.
template <typename Make>
hipError_t with_kernel_opt_ins(const void* kernel, Make&& make) {
  int device = 0;
  const hipError_t e = hipGetDevice(&device);
  if (e != hipSuccess) return e;
  KernelOptInTable& table = kernel_opt_in_table();
  const std::lock_guard<std::mutex> lock(table.mutex);
  return make(table.made[{kernel, device}]);
}

}  // namespace detail

/// Lets `kernel` take up to `bytes` of dynamic shared memory on the current device. The runtime
/// is asked only when the kernel has not yet opted in to at least `bytes` there: a call that
/// plans and launches pays for it once per process, and a thread asking for less never lowers
/// the limit another thread's launch relies on.
template <typename... Params>
hipError_t opt_in_shared_memory(void (*kernel)(Params...), std::size_t bytes) {
  const void* k = reinterpret_cast<const void*>(kernel);
  return detail::with_kernel_opt_ins(k, [&](detail::KernelOptIns& made) {
    if (made.shared_bytes >= bytes) return hipSuccess;
    const hipError_t e = hipFuncSetAttribute(k, hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e == hipSuccess) made.shared_bytes = bytes;
    return e;
  });
}

/// Lets `kernel` run in clusters above kPortableClusterBlocks where the GPU has them
/// (allow_large_clusters), once per kernel and device.
template <typename... Params>
hipError_t opt_in_large_clusters(void (*kernel)(Params...)) {
  return detail::with_kernel_opt_ins(reinterpret_cast<const void*>(kernel), [&](detail::KernelOptIns& made) {
    if (made.large_clusters) return hipSuccess;
    const hipError_t e = allow_large_clusters(kernel);
    if (e == hipSuccess) made.large_clusters = true;
    return e;
  });
}

/// What the compiler gave a kernel, per thread: registers, and local memory (register spills
/// and stack); static shared memory per block. `known` is false where the runtime did not say.
struct KernelResources {
  bool known = false;
  int registers = 0;
  std::size_t local_bytes = 0;
  std::size_t static_shared_bytes = 0;
};

template <typename... Params>
KernelResources kernel_resources(void (*kernel)(Params...)) {
  hipFuncAttributes attributes{};
  if (hipFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)) != hipSuccess) {
    (void)hipGetLastError();
    return {};
  }
  return {true, attributes.numRegs, static_cast<std::size_t>(attributes.localSizeBytes),
          static_cast<std::size_t>(attributes.sharedSizeBytes)};
}

}  // namespace hipgrad
