/// @file mapped_copy.hpp
/// @brief Device: a copy through an index map between a tensor at the caller's strides and a
///        packed form of it in the workspace — the weight spread into (or gathered from) the
///        packed groups' block-diagonal weight and the unfolded route's weight columns — and its
///        host launch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"

namespace hipgrad::conv::detail {

/// One thread per element of the packed form (Params::elements of them): `spread` writes every
/// packed element from `from` at mapped_offset(p, i), zero where that is -1; else it writes each
/// `to` element that some packed element maps to. Params holds from, to, spread and elements,
/// and an overload of mapped_offset names its map.
template <typename Params>
__global__ void __launch_bounds__(256) mapped_copy_kernel(const Params p) {
  using T = std::remove_const_t<std::remove_pointer_t<decltype(p.from)>>;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < p.elements; i += step) {
    const std::int64_t mapped = mapped_offset(p, i);
    if (p.spread) {
      p.to[i] = mapped < 0 ? type_convert<T>(0.0f) : p.from[mapped];
    } else if (mapped >= 0) {
      p.to[mapped] = p.from[i];
    }
  }
}

/// Launches the copy of `p` (from and to set) on `stream`.
template <typename Params>
Status launch_mapped_copy(const Params& p, hipStream_t stream) {
  const std::int64_t blocks =
      std::min<std::int64_t>(std::max<std::int64_t>(ceil_div<std::int64_t>(p.elements, 256), 1), 65536);
  mapped_copy_kernel<Params><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("mapped_copy_kernel");
  return Status::ok();
}

}  // namespace hipgrad::conv::detail
