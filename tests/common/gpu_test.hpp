/// @file gpu_test.hpp
/// @brief Shared by GPU test suites: skip with the reason when no GPU is present.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "hipgrad/host/gpu_detect.hpp"

/// Skips the current test, naming why, when no GPU can be used.
#define HIPGRAD_SKIP_WITHOUT_GPU()                                                                  \
  do {                                                                                              \
    std::string hipgrad_gpu_reason_;                                                                \
    if (!::hipgrad::host::gpu_available(&hipgrad_gpu_reason_)) GTEST_SKIP() << hipgrad_gpu_reason_; \
  } while (0)

/// Asserts that a HIP runtime call succeeded, printing the error's name.
#define HIPGRAD_ASSERT_HIP(call)                                                           \
  do {                                                                                     \
    const hipError_t hipgrad_err_ = (call);                                                \
    ASSERT_EQ(hipgrad_err_, hipSuccess) << #call << ": " << hipGetErrorName(hipgrad_err_); \
  } while (0)
