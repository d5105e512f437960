/// @file groupnorm_test_util.hpp
/// @brief Shared by the GroupNorm GPU tests: the data/parameter type pairings they run over, and
///        device copies of host tensors.
#pragma once

#include <gtest/gtest.h>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad_test {

template <typename T, typename TP>
struct TypePair {
  using Data = T;   ///< x, dy, y, dx
  using Param = TP; ///< γ, β, dγ, dβ
};

/// fp32, fp16 and bf16 data, each with parameters in its own type or in fp32 (fp32 only once).
using GroupNormTypePairs =
    ::testing::Types<TypePair<float, float>, TypePair<hipgrad::half, hipgrad::half>, TypePair<hipgrad::half, float>,
                     TypePair<hipgrad::bfloat16, float>, TypePair<hipgrad::bfloat16, hipgrad::bfloat16>>;

/// A device copy of t's storage (padding included).
template <typename T>
hipgrad::host::DeviceBuffer<T> upload(const hipgrad::host::Tensor<T>& t) {
  hipgrad::host::DeviceBuffer<T> b;
  EXPECT_TRUE(b.allocate(t.storage().size()).is_ok());
  EXPECT_TRUE(b.copy_from(t).is_ok());
  return b;
}

/// `like` with its storage overwritten by b's.
template <typename T>
hipgrad::host::Tensor<T> download(const hipgrad::host::DeviceBuffer<T>& b, hipgrad::host::Tensor<T> like) {
  EXPECT_TRUE(b.copy_to(like).is_ok());
  return like;
}

}  // namespace hipgrad_test
