/// @file workspace_piece.hpp
/// @brief Host: the conv routes' buffers in the caller's workspace (unfolded windows, staged
///        tensors), each at an offset from the workspace's first 256-byte-aligned byte, and the
///        stand-in address a plan takes for them before the workspace is known.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hipgrad/core/integer_math.hpp"

namespace hipgrad::conv::detail {

/// A piece of the workspace at `offset` from its first 256-byte-aligned byte.
template <typename P>
P* workspace_piece(void* workspace, std::size_t offset) {
  const auto address = round_up(reinterpret_cast<std::uintptr_t>(workspace), std::uintptr_t{256});
  return reinterpret_cast<P*>(address + offset);
}

/// What a plan may take for a workspace piece before the workspace is known: an address as
/// aligned as workspace_piece's (never dereferenced).
template <typename P>
const P* workspace_stand_in() {
  return reinterpret_cast<const P*>(std::uintptr_t{256});
}

}  // namespace hipgrad::conv::detail
