/// @file launch_plan.hpp
/// @brief Host-side choices shared by the GroupNorm ops: which layout path, which vector width,
///        how large a tile, and the workspace carve-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/groupnorm/detail/geometry.hpp"

namespace hipgrad::groupnorm::detail {

inline constexpr int kBlockThreads = 256;

enum class Path { kPlanesPacked, kPlanesStrided, kChannelsLast };

inline const char* path_name(Path p) {
  switch (p) {
    case Path::kPlanesPacked: return "planes";
    case Path::kPlanesStrided: return "strided";
    case Path::kChannelsLast: return "channels_last";
  }
  return "unknown";
}

/// The path for a set of tensors that must all share it (x with y, or x with dy and dx).
inline Path choose_path(const TensorShape& x, const TensorShape* others, int count) {
  bool planes = x.channel_planes(), last = x.channels_last();
  for (int i = 0; i < count; ++i) {
    planes = planes && others[i].channel_planes();
    last = last && others[i].channels_last() && others[i].strides == x.strides;
  }
  // With one position (or one channel) both hold: walk whichever dimension is longer.
  if (planes && last) return x.spatial_size() >= x.c() ? Path::kPlanesPacked : Path::kChannelsLast;
  if (planes) return Path::kPlanesPacked;
  if (last) return Path::kChannelsLast;
  return Path::kPlanesStrided;
}

/// The widest vector (16 bytes, else scalar) that every pointer and the contiguous run allow.
template <typename T>
int choose_vector(Path path, const Geometry& g, std::initializer_list<const void*> pointers) {
  constexpr int V = kVector16<T>;
  const Index run = path == Path::kChannelsLast ? g.c : g.spatial;
  if (path == Path::kPlanesStrided || run % V != 0) return 1;
  for (const void* p : pointers)
    if (p != nullptr && !is_vector_aligned<T, V>(p)) return 1;
  return V;
}

inline int multiprocessors() {
  int device = 0, count = 0;
  if (hipGetDevice(&device) != hipSuccess || hipDeviceGetAttribute(&count, hipDeviceAttributeMultiprocessorCount, device) != hipSuccess) {
    (void)hipGetLastError();
    return 108;
  }
  return count;
}

/// Spatial positions per tile: about 16 K elements per block, fewer when that would leave the
/// GPU with fewer than ~4 blocks per multiprocessor. Planes tiles are a multiple of `granule`
/// (the widest vector), whatever vector a call ends up using, so that the tile count, and with
/// it the workspace size, depends on the layout only.
inline Index choose_tile(Path path, const TensorShape& x, int granule) {
  const Index spatial = x.spatial_size();
  const Index per_position = path == Path::kChannelsLast ? x.c() : 1;       // elements per position in a tile
  const Index blocks_per_tile_set = path == Path::kChannelsLast ? x.n() : x.n() * x.c();
  Index tile = (16384 + per_position - 1) / per_position;
  const Index wanted_blocks = 4 * static_cast<Index>(multiprocessors());
  while (tile > 512 / per_position + 1 && blocks_per_tile_set * ((spatial + tile - 1) / tile) < wanted_blocks) tile /= 2;
  if (path != Path::kChannelsLast) tile = (tile + granule - 1) / granule * granule;
  return tile < 1 ? 1 : tile;
}

/// Bump allocation inside the caller's workspace, 256-byte aligned.
class WorkspaceCarver {
 public:
  WorkspaceCarver(void* base, std::size_t bytes) : base_(static_cast<unsigned char*>(base)), bytes_(bytes) {}
  template <typename T>
  T* take(std::size_t count) {
    const std::size_t start = (used_ + 255) / 256 * 256;
    used_ = start + count * sizeof(T);
    return base_ == nullptr || used_ > bytes_ ? nullptr : reinterpret_cast<T*>(base_ + start);
  }
  std::size_t used() const { return used_; }

 private:
  unsigned char* base_;
  std::size_t bytes_;
  std::size_t used_ = 0;
};

inline Status check_workspace(std::size_t needed, const void* workspace, std::size_t bytes) {
  if (needed > 0 && (workspace == nullptr || bytes < needed)) {
    return Status::workspace_too_small("needs " + std::to_string(needed) + " bytes, got " + std::to_string(bytes) +
                                       (workspace == nullptr ? " (null)" : ""));
  }
  return Status::ok();
}

inline Status check_grid(Index blocks, const char* what) {
  if (blocks > 2147483647) return Status::not_supported(std::string(what) + ": more than 2^31 - 1 blocks");
  return Status::ok();
}

}  // namespace hipgrad::groupnorm::detail
