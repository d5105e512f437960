/// @file gpu_detect.hpp
/// @brief Is there a usable GPU? One clear reason when there is not.
#pragma once

#include <cstdio>
#include <string>

#include "hipgrad/core/hip_runtime.hpp"

namespace hipgrad::host {

/// The plain cause of a failed device count: the runtime's own words for a missing driver ("driver
/// version is insufficient") mislead on a machine that has no driver at all.
inline std::string no_gpu_reason(hipError_t error) {
  const std::string code = std::string(" (") + hipGetErrorName(error) + ": " + hipGetErrorString(error) + ")";
  if (error == hipErrorInsufficientDriver)
    return "no GPU available: no GPU driver was found, or it is older than the runtime this program was built "
           "with" +
           code;
  if (error == hipErrorNoDevice) return "no GPU available: the driver reports no GPU" + code;
  return "no GPU available: the runtime could not count the GPUs" + code;
}

/// True when the runtime reports at least one device. Otherwise false, with the reason (no
/// driver, no device, runtime error) in `*reason` when given. Clears the runtime's sticky
/// last-error so that later calls are not confused by the probe.
inline bool gpu_available(std::string* reason = nullptr) {
  int count = 0;
  const hipError_t error = hipGetDeviceCount(&count);
  (void)hipGetLastError();
  if (error != hipSuccess || count <= 0) {
    if (reason)
      *reason =
          error != hipSuccess ? no_gpu_reason(error) : std::string("no GPU available: the runtime reports 0 devices");
    return false;
  }
  if (reason) reason->clear();
  return true;
}

/// For executables: prints one line to stderr and returns false when no GPU can be used.
inline bool require_gpu(const char* program) {
  std::string reason;
  if (gpu_available(&reason)) return true;
  std::fprintf(stderr, "%s: %s\n", program, reason.c_str());
  return false;
}

/// Name and compute capability (or gfx architecture) of the current device, for reports.
inline std::string device_description() {
  int device = 0;
  hipDeviceProp_t prop{};
  if (hipGetDevice(&device) != hipSuccess || hipGetDeviceProperties(&prop, device) != hipSuccess) {
    (void)hipGetLastError();
    return "unknown device";
  }
  return std::string(prop.name) + " (" + std::to_string(prop.multiProcessorCount) + " SMs/CUs, cc " +
         std::to_string(prop.major) + "." + std::to_string(prop.minor) + ")";
}

}  // namespace hipgrad::host
