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
#include "hipgrad/ops/groupnorm/detail/tiles.hpp"
#include "hipgrad/ops/groupnorm/detail/unit_sync.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"

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
int choose_vector(Path path, const TensorShape& x, std::initializer_list<const void*> pointers) {
  constexpr int V = kVector16<T>;
  const Index run = path == Path::kChannelsLast ? x.c() : x.spatial_size();
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

/// Spatial positions per tile: about 16 K elements per block, fewer (but never so few that the
/// per-tile partials grow to a sizeable fraction of the data) when that would leave the GPU with
/// fewer than ~4 blocks per multiprocessor. Planes tiles are a multiple of `granule` (the widest
/// vector) whatever vector a call ends up using, so that the tile count, and with it the
/// workspace size, depends on the layout only. `block_channels` is the channels one
/// channels-last block covers (ColumnMapping).
inline Index choose_tile(Path path, const TensorShape& x, int granule, Index block_channels, Index column_tiles) {
  const bool last = path == Path::kChannelsLast;
  const Index spatial = x.spatial_size();
  const Index per_position = last ? block_channels : 1;  // elements per position in one block
  const Index blocks_per_tile = last ? x.n() * column_tiles : x.n() * x.c();
  const Index min_tile = last ? 16 : 512;
  Index tile = (16384 + per_position - 1) / per_position;
  tile = tile < min_tile ? min_tile : tile;
  const Index wanted_blocks = 4 * static_cast<Index>(multiprocessors());
  while (tile / 2 >= min_tile && blocks_per_tile * ((spatial + tile - 1) / tile) < wanted_blocks) tile /= 2;
  if (!last) tile = (tile + granule - 1) / granule * granule;
  return tile;
}

/// Everything an op decides before launching: the layout path, the vector width, the tiling
/// and the number of blocks of its tile-walking launches.
struct Plan {
  Path path;
  int vector;
  int plane_threads;  ///< planes paths: threads per tile (the block, or a warp for small planes)
  Geometry geometry;
  Index tiles;        ///< planes paths: N·C·tiles per plane
  Index blocks;       ///< of the tile-walking launches
};

/// Planes up to this many positions are walked by one warp each (8 per block).
inline constexpr Index kSmallPlane = 2048;
inline constexpr int kSmallPlaneThreads = 32;

/// The plan for x and the `others` tensors that share its walk, with `pointers` to check for
/// vector alignment (none: assume aligned, for sizing).
template <typename T>
Plan make_plan(const TensorShape& x, Index groups, const TensorShape* others, int count,
               std::initializer_list<const void*> pointers) {
  constexpr int kV = kVector16<T>;
  Plan pl;
  pl.path = choose_path(x, others, count);
  pl.vector = choose_vector<T>(pl.path, x, pointers);
  // Column tiles depend on the vector width actually used; the tile count must not (see
  // choose_tile), so channels-last tiles are sized for the widest vector.
  const ColumnMapping<kBlockThreads, kV> widest(x.c());
  const Index block_channels = static_cast<Index>(widest.columns_per_block) * kV;
  const bool small_planes = pl.path == Path::kPlanesPacked && x.spatial_size() <= kSmallPlane;
  pl.plane_threads = small_planes ? kSmallPlaneThreads : kBlockThreads;
  const Index tile = small_planes ? x.spatial_size() : choose_tile(pl.path, x, kV, block_channels, widest.column_tiles());
  pl.geometry = make_geometry(x, groups, tile);
  pl.tiles = x.n() * x.c() * pl.geometry.tiles_per_sample_channel;
  if (pl.path == Path::kChannelsLast) {
    const Index column_tiles =
        pl.vector == kV ? widest.column_tiles() : ColumnMapping<kBlockThreads, 1>(x.c()).column_tiles();
    pl.blocks = x.n() * column_tiles * pl.geometry.tiles_per_sample_channel;
  } else {
    const Index tiles_per_block = kBlockThreads / pl.plane_threads;
    pl.blocks = (pl.tiles + tiles_per_block - 1) / tiles_per_block;
  }
  return pl;
}

/// Walk tags: which kernel instantiation a plan calls for (visit_walk passes one to a launcher).
template <int V>
struct ChannelsLastWalk {
  static constexpr bool kChannelsLast = true;
  static constexpr int kVector = V;
};
template <int V, bool Packed, int PlaneThreads>
struct PlanesWalk {
  static constexpr bool kChannelsLast = false;
  static constexpr int kVector = V;
  static constexpr bool kPacked = Packed;
  static constexpr int kPlaneThreads = PlaneThreads;
};

/// Calls launch(walk) with the walk tag of `pl`; returns its Status.
template <typename T, typename Launch>
Status visit_walk(const Plan& pl, Launch&& launch) {
  constexpr int kV = kVector16<T>;
  const bool wide = pl.vector == kV;
  switch (pl.path) {
    case Path::kChannelsLast: return wide ? launch(ChannelsLastWalk<kV>{}) : launch(ChannelsLastWalk<1>{});
    case Path::kPlanesStrided: return launch(PlanesWalk<1, false, kBlockThreads>{});
    case Path::kPlanesPacked: break;
  }
  if (pl.plane_threads == kSmallPlaneThreads) {
    return wide ? launch(PlanesWalk<kV, true, kSmallPlaneThreads>{}) : launch(PlanesWalk<1, true, kSmallPlaneThreads>{});
  }
  return wide ? launch(PlanesWalk<kV, true, kBlockThreads>{}) : launch(PlanesWalk<1, true, kBlockThreads>{});
}

// ---- L2-reread launches (unit_sync.hpp) ---------------------------------------------------------

inline int device_warp_size() {
  int device = 0, lanes = 0;
  if (hipGetDevice(&device) != hipSuccess || hipDeviceGetAttribute(&lanes, hipDeviceAttributeWarpSize, device) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return lanes;
}

/// Tiles of an L2-reread launch: each plane cut into equal tiles of whole vectors, at most
/// `capacity` positions each (what a warp holds); a unit is the tiles of one (n, group).
struct RereadTiling {
  Geometry geometry;
  Index tiles = 0, units = 0, unit_tiles = 0;
};

inline RereadTiling reread_tiling(const TensorShape& x, Index groups, Index capacity, int vector) {
  const Index spatial = x.spatial_size();
  const Index per_plane = (spatial + capacity - 1) / capacity;
  const Index tile = ((spatial + per_plane - 1) / per_plane + vector - 1) / vector * vector;
  RereadTiling t;
  t.geometry = make_geometry(x, groups, tile);
  t.tiles = x.n() * x.c() * t.geometry.tiles_per_sample_channel;
  t.units = x.n() * groups;
  t.unit_tiles = t.geometry.group_channels * t.geometry.tiles_per_sample_channel;
  return t;
}

/// Whether and how to run an L2-reread kernel.
struct RereadPlan {
  bool usable = false;
  RereadTiling tiling;
  Index lag = 0;  ///< tiles between a tile's first and second read
  unsigned blocks = 0;
};

/// Packed planes read with the widest vector: the only L2-reread case.
inline bool reread_layout(const Plan& pl, int widest_vector) {
  return pl.path == Path::kPlanesPacked && pl.vector == widest_vector;
}

/// The tiling that sizes an L2-reread workspace: 32 lanes, the most tiles any warp size gives.
inline RereadTiling reread_sizing(const TensorShape& x, Index groups, int widest_vector, int vectors_per_lane) {
  return reread_tiling(x, groups, Index{32} * widest_vector * vectors_per_lane, widest_vector);
}

/// `vectors_per_lane`: vectors a lane of `kernel` holds per tensor. The grid is what the GPU
/// keeps resident; the lag is a unit plus one tile per warp of the grid, so that the unit of the
/// tile a warp finishes is, almost always, complete already.
template <typename Kernel>
RereadPlan make_reread_plan(Algorithm algorithm, const Plan& pl, const TensorShape& x, Index groups, int widest_vector,
                            int vectors_per_lane, Kernel kernel) {
  RereadPlan plan;
  const bool wanted_here = algorithm == Algorithm::kL2Reread && reread_layout(pl, widest_vector);
  const int lanes = wanted_here ? device_warp_size() : 0;
  int per_multiprocessor = 0;
  if (lanes <= 0 || hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, kRereadThreads, 0) != hipSuccess) {
    (void)hipGetLastError();
    return plan;
  }
  plan.tiling = reread_tiling(x, groups, static_cast<Index>(lanes) * widest_vector * vectors_per_lane, widest_vector);
  const Index warps_per_block = kRereadThreads / lanes;
  const Index resident = static_cast<Index>(per_multiprocessor) * multiprocessors();
  const Index wanted = (plan.tiling.tiles + plan.tiling.unit_tiles + warps_per_block - 1) / warps_per_block;
  const Index blocks = wanted < resident ? wanted : resident;
  plan.blocks = static_cast<unsigned>(blocks);
  plan.lag = plan.tiling.unit_tiles + blocks * warps_per_block;
  // The claim counter runs to tiles + lag + one claim per warp: keep it within 32 bits.
  plan.usable = blocks > 0 && plan.tiling.tiles + plan.lag + blocks * warps_per_block < (Index{1} << 32);
  return plan;
}

/// not_supported when kL2Reread was asked for and cannot be had.
inline Status check_algorithm(Algorithm algorithm, const RereadPlan& plan) {
  if (algorithm == Algorithm::kL2Reread && !plan.usable)
    return Status::not_supported(
        "the L2-reread algorithm needs packed planes (NCHW and kin) with 16-byte aligned pointers and a plane size "
        "divisible by the vector");
  return Status::ok();
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

/// The workspace of an L2-reread launch, which clear_unit_sync sets to 0xff before the launch.
template <typename Partial, typename Result>
UnitSync<Partial, Result> carve_unit_sync(const RereadTiling& t, Index lag, WorkspaceCarver& carver) {
  UnitSync<Partial, Result> sync;
  sync.counter = carver.take<unsigned>(1);
  sync.partials = carver.take<Partial>(static_cast<std::size_t>(t.tiles));
  sync.results = carver.take<Result>(static_cast<std::size_t>(t.units));
  sync.unit_tiles = t.unit_tiles;
  sync.lag = lag;
  return sync;
}

/// One memset over the counter and both slot arrays, which carve_unit_sync took in a row.
template <typename Partial, typename Result>
Status clear_unit_sync(const UnitSync<Partial, Result>& sync, const RereadTiling& t, hipStream_t stream) {
  const auto begin = reinterpret_cast<unsigned char*>(sync.counter);
  const auto end = reinterpret_cast<unsigned char*>(sync.results + t.units);
  HIPGRAD_RETURN_IF_HIP_ERROR(hipMemsetAsync(begin, 0xff, static_cast<std::size_t>(end - begin), stream));
  return Status::ok();
}

/// not_supported when a launch of the plan (or the per-group one, `group_blocks`) would need more
/// blocks than a 1-D grid holds.
inline Status check_grid(const Plan& plan, Index group_blocks, const char* what) {
  if (plan.blocks > 2147483647 || group_blocks > 2147483647)
    return Status::not_supported(std::string(what) + ": more than 2^31 - 1 blocks");
  return Status::ok();
}

}  // namespace hipgrad::groupnorm::detail
