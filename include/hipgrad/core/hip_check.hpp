/// @file hip_check.hpp
/// @brief Turning HIP runtime errors into Status values (no exceptions cross a launch).
#pragma once

#include <string>

#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/status.hpp"

namespace hipgrad {

/// ok for hipSuccess, otherwise a runtime-error Status naming the failed call and where it was.
inline Status status_from_hip(hipError_t error, const char* call, const char* file, int line) {
  if (error == hipSuccess) return Status::ok();
  return Status::runtime_error(std::string(call) + " failed with " + hipGetErrorName(error) + " (" +
                               hipGetErrorString(error) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace hipgrad

/// Evaluates a HIP runtime call and returns a runtime-error Status from the enclosing function
/// when it fails.
#define HIPGRAD_RETURN_IF_HIP_ERROR(call) \
  HIPGRAD_RETURN_IF_ERROR(::hipgrad::status_from_hip((call), #call, __FILE__, __LINE__))

/// After a kernel launch: returns the launch error (bad configuration, too much shared memory)
/// as a Status. It does not wait for the kernel.
#define HIPGRAD_RETURN_IF_LAUNCH_ERROR(kernel_name) \
  HIPGRAD_RETURN_IF_ERROR(::hipgrad::status_from_hip(hipGetLastError(), "launch of " kernel_name, __FILE__, __LINE__))
