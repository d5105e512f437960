/// @file launch_config.hpp
/// @brief An extended kernel launch on NVIDIA (cudaLaunchKernelEx): grid, block, dynamic shared
///        memory and stream, plus the attributes hipgrad uses, clusters (cluster.hpp) and
///        dependent launches (dependent_launch.hpp). Nothing on other backends.
#pragma once

#include <cstddef>

#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad {

#if defined(HIPGRAD_BACKEND_CUDA)
/// `config` for cudaLaunchKernelEx; `config.attrs` points into the object, hence no copies. Each
/// attribute is added at most once (room for both).
struct LaunchConfig {
  cudaLaunchAttribute attributes[2]{};
  cudaLaunchConfig_t config{};

  LaunchConfig(dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = 0;
  }
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;

  /// Blocks r·K … r·K + K − 1 of the 1-D grid form a cluster of K = `blocks`.
  LaunchConfig& in_clusters_of(unsigned blocks) {
    cudaLaunchAttribute& a = attributes[config.numAttrs++];
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = blocks;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    return *this;
  }
  /// A dependent of the kernel before it on the stream (dependent_launch.hpp).
  LaunchConfig& as_dependent() {
    cudaLaunchAttribute& a = attributes[config.numAttrs++];
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
    return *this;
  }
};
#endif

}  // namespace hipgrad
