/// @file launch_core.hpp
/// @brief What every launch of the tile GEMM shares, written once for the single, grouped and
///        boxed front-ends: the checks of a path against the device (the sm_90a image, shared
///        memory), the grid (one block per item, or a persistent grid of at most one block per
///        multiprocessor), the kernel launch with its shared-memory opt-in, and the split-K
///        reduction.
#pragma once

#include <climits>
#include <cstddef>
#include <string>

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/kernel/reduce_split_k.hpp"

namespace hipgrad::gemm {
namespace detail {

/// Why `shared_bytes` of dynamic shared memory per block cannot run on `device` (null when it can).
inline const char* shared_memory_blocker(int shared_bytes, const DeviceInfo& device) {
  if (static_cast<std::size_t>(shared_bytes) > device.shared_per_block_opt_in) {
    return "the configuration needs more shared memory per block than the device allows";
  }
  return nullptr;
}

/// Why a warp-specialised kernel (TMA, gather or box producer) of `shared_bytes` cannot run on
/// `device` (null when it can): the code loaded for it must be sm_90a's, and its shared memory fit.
inline const char* warp_specialised_blocker(int shared_bytes, const DeviceInfo& device) {
  if (!device.known || !device_runs_wgmma(device.device)) {
    return "the code loaded for this device was not compiled for sm_90a";
  }
  return shared_memory_blocker(shared_bytes, device);
}

/// Blocks of a persistent grid over `items` work items: at most one per multiprocessor.
inline unsigned persistent_blocks(long long items, const DeviceInfo& device) {
  return static_cast<unsigned>(items < device.multiprocessors ? items : device.multiprocessors);
}

/// Opts `kernel` in to `shared_bytes` of dynamic shared memory (once per kernel, device and size)
/// and launches it; `name` says which in the error.
template <typename Kernel, typename... Args>
Status launch_tile_kernel(Kernel kernel, const char* name, dim3 grid, int threads, int shared_bytes, hipStream_t stream,
                          const Args&... args) {
  if (shared_bytes > 0) {
    HIPGRAD_RETURN_IF_HIP_ERROR(opt_in_shared_memory(kernel, static_cast<std::size_t>(shared_bytes)));
  }
  kernel<<<grid, threads, shared_bytes, stream>>>(args...);
  const hipError_t error = hipGetLastError();
  if (error == hipSuccess) return Status::ok();  // the message is built only for a failure
  return status_from_hip(error, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
}

}  // namespace detail

/// Adds `splits` fp32 partials per element of `epilogue` ([split][m][n], m_size × n_size each) in
/// split order and stores each sum through `epilogue` (whose own partials are null), after the
/// grid before it on `stream` (a dependent launch): a grid-stride pass over the outputs, capped
/// so that small blocks do not outnumber the work.
template <typename Epilogue>
Status launch_split_k_reduction(const float* partials, int splits, const Epilogue& epilogue, hipStream_t stream) {
  constexpr Index kThreads = 256, kMaxBlocks = 4096;
  const Index elements = static_cast<Index>(epilogue.m_size) * epilogue.n_size;
  if (elements == 0) return Status::ok();
  const Index blocks = ceil_div(elements, kThreads) < kMaxBlocks ? ceil_div(elements, kThreads) : kMaxBlocks;
  return status_from_hip(launch_dependent(reduce_split_k<Epilogue>, static_cast<unsigned>(blocks),
                                          static_cast<unsigned>(kThreads), 0, stream, partials, splits, epilogue),
                         "launch of reduce_split_k", __FILE__, __LINE__);
}

}  // namespace hipgrad::gemm
