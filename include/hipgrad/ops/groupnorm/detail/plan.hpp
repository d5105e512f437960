/// @file plan.hpp
/// @brief Host-side choices shared by the GroupNorm ops: which layout path, which vector width,
///        how large a tile, and the workspace carve-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "hipgrad/core/cluster.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/groupnorm/detail/geometry.hpp"
#include "hipgrad/ops/groupnorm/detail/tiles.hpp"
#include "hipgrad/ops/groupnorm/detail/one_read_channels_last_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/one_read_planes_kernels.hpp"
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

/// Spatial positions per tile: about 16 K elements per block, fewer (but never so few that the
/// per-tile partials grow to a sizeable fraction of the data) when that would leave the GPU with
/// fewer than ~4 blocks per multiprocessor. Planes tiles are a multiple of `granule` (the widest
/// vector) whatever vector a call ends up using, so that the tile count, and with it the
/// workspace size, depends on the layout only. `block_channels` is the channels one
/// channels-last block covers (ColumnMapping).
inline Index choose_tile(Path path, const TensorShape& x, int granule, Index block_channels, Index column_tiles,
                         int multiprocessors) {
  const bool last = path == Path::kChannelsLast;
  const Index spatial = x.spatial_size();
  const Index per_position = last ? block_channels : 1;  // elements per position in one block
  const Index blocks_per_tile = last ? x.n() * column_tiles : x.n() * x.c();
  const Index min_tile = last ? 16 : 512;
  Index tile = ceil_div(Index{16384}, per_position);
  tile = tile < min_tile ? min_tile : tile;
  const Index wanted_blocks = 4 * static_cast<Index>(multiprocessors);
  while (tile / 2 >= min_tile && blocks_per_tile * ceil_div(spatial, tile) < wanted_blocks) tile /= 2;
  if (!last) tile = round_up(tile, Index{granule});
  return tile;
}

/// Everything an op decides before launching: the layout path, the vector width, the tiling
/// and the number of blocks of its tile-walking launches.
struct Plan {
  const DeviceInfo* device;  ///< the GPU it is for (current_device_info())
  Path path;
  int vector;
  int plane_threads;  ///< planes paths: threads per tile (the block, or a warp for small planes)
  Geometry geometry;
  Index tiles;   ///< planes paths: N·C·tiles per plane
  Index blocks;  ///< of the tile-walking launches
};

/// Planes up to this many positions are walked by one warp each (8 per block).
inline constexpr Index kSmallPlane = 2048;
inline constexpr int kSmallPlaneThreads = 32;

/// The plan for x and the `others` tensors that share its walk, with `pointers` to check for
/// vector alignment (none: assume aligned, for sizing).
template <typename T>
Plan make_plan(const DeviceInfo& device, const TensorShape& x, Index groups, const TensorShape* others, int count,
               std::initializer_list<const void*> pointers) {
  constexpr int kV = kVector16<T>;
  Plan pl;
  pl.device = &device;
  pl.path = choose_path(x, others, count);
  pl.vector = choose_vector<T>(pl.path, x, pointers);
  // Column tiles depend on the vector width actually used; the tile count must not (see
  // choose_tile), so channels-last tiles are sized for the widest vector.
  const ColumnMapping<kBlockThreads, kV> widest(x.c());
  const Index block_channels = static_cast<Index>(widest.columns_per_block) * kV;
  const bool small_planes = pl.path == Path::kPlanesPacked && x.spatial_size() <= kSmallPlane;
  pl.plane_threads = small_planes ? kSmallPlaneThreads : kBlockThreads;
  const Index tile = small_planes
                         ? x.spatial_size()
                         : choose_tile(pl.path, x, kV, block_channels, widest.column_tiles(), device.multiprocessors);
  pl.geometry = make_geometry(x, groups, tile);
  pl.tiles = x.n() * x.c() * pl.geometry.tiles_per_sample_channel;
  if (pl.path == Path::kChannelsLast) {
    const Index column_tiles =
        pl.vector == kV ? widest.column_tiles() : ColumnMapping<kBlockThreads, 1>(x.c()).column_tiles();
    pl.blocks = x.n() * column_tiles * pl.geometry.tiles_per_sample_channel;
  } else {
    const Index tiles_per_block = kBlockThreads / pl.plane_threads;
    pl.blocks = ceil_div(pl.tiles, tiles_per_block);
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
    return wide ? launch(PlanesWalk<kV, true, kSmallPlaneThreads>{})
                : launch(PlanesWalk<1, true, kSmallPlaneThreads>{});
  }
  return wide ? launch(PlanesWalk<kV, true, kBlockThreads>{}) : launch(PlanesWalk<1, true, kBlockThreads>{});
}

// ---- one-read launches (one_read_planes_kernels.hpp, one_read_channels_last_kernels.hpp) ------------------------

/// One-read blocks are whole warps of the widest target (64 lanes).
inline constexpr Index kOneReadWarpGranule = 64;

/// A one-read kernel instantiation: bytes of each tensor a thread holds, and the most threads a
/// block may have (its __launch_bounds__, which sets the registers each thread gets).
template <int Bytes, int MaxThreads>
struct OneReadShape {
  static constexpr int kBytes = Bytes;
  static constexpr int kMaxThreads = MaxThreads;
};

/// Whether and how to run a one-read kernel: a cluster of `cluster` blocks of `threads` per unit
/// (a group on planes, a band of groups channels last).
struct OneReadPlan {
  bool usable = false;
  bool channels_last = false;
  int bytes = 0;  ///< the OneReadShape to launch
  OneReadMapping planes;
  OneReadRows rows;
  unsigned threads = 0;
  Index units = 0;
  int cluster = 1;
  Index fold_blocks = 0;  ///< the backward's in-grid fold of dγ/dβ (one_read_fold_blocks), or 0

  Index blocks() const { return units * cluster; }
  /// Channels last: whether a unit is more than one group in one block (the kSplit kernels).
  bool split() const { return cluster > 1 || rows.band_groups > 1; }
};

/// Blocks a one-read backward adds to its grid to fold dγ/dβ (fold_in_grid) over `channels`:
/// whole clusters, a block per kGammaBetaChannels channels, where the GPU holds the whole grid at
/// once (`resident_clusters` of the kernel), so that no data block can wait for room behind fold
/// blocks waiting for it. Such grids are small problems, where a second launch for the fold costs
/// the host as much as the first. 0 otherwise, and then a kernel of its own folds: where fold
/// blocks would have to take several chunks each (their chunks run one after another), and for
/// the 128-byte shape, whose kernel with fold blocks spills the most.
inline Index one_read_fold_blocks(const OneReadPlan& plan, int resident_clusters, Index channels) {
  const Index clusters = ceil_div(ceil_div(channels, Index{kGammaBetaChannels}), Index{plan.cluster});
  const bool fits = plan.units + clusters <= resident_clusters;
  return plan.usable && fits && plan.bytes < 128 ? clusters * plan.cluster : 0;
}

/// "_one_read_b<bytes>_t<threads>[_k<cluster>][_band<groups>]" for op names, "" when not usable.
inline std::string one_read_name(const OneReadPlan& plan) {
  if (!plan.usable) return "";
  std::string name = "_one_read_b" + std::to_string(plan.bytes) + "_t" + std::to_string(plan.threads);
  if (plan.cluster > 1) name += "_k" + std::to_string(plan.cluster);
  if (plan.channels_last && plan.rows.band_groups > 1) name += "_band" + std::to_string(plan.rows.band_groups);
  return name;
}

/// Planes: channel_threads (a power of two) × vectors ≥ the block's part of a plane.
inline bool fit_planes(OneReadPlan& plan, const TensorShape& x, Index groups, int vector, int vectors, int max_threads,
                       int cluster) {
  OneReadMapping m;
  m.plane_vectors = x.spatial_size() / vector;
  m.span = ceil_div(m.plane_vectors, Index{cluster});
  m.cluster = cluster;
  if (m.span * (cluster - 1) >= m.plane_vectors) return false;  // a block with nothing to do
  while (m.channel_threads * vectors < m.span && m.channel_threads < max_threads) {
    m.channel_threads *= 2;
    ++m.channel_shift;
  }
  const Index threads = round_up(x.c() / groups * m.channel_threads, kOneReadWarpGranule);
  if (m.channel_threads * vectors < m.span || threads > max_threads) return false;
  plan.planes = m;
  plan.threads = static_cast<unsigned>(threads);
  plan.units = x.n() * groups;
  plan.cluster = cluster;
  return true;
}

/// Adjacent groups per channels-last band: the fewest (a divisor of `groups`) whose row segment
/// is at least 64 bytes, so that it fills whole 32-byte sectors; else as many as the shared
/// arrays allow.
inline int choose_band_groups(Index groups, Index group_channels, Index element_bytes) {
  int band = 1;
  for (int b = 1; b <= kOneReadMaxBandGroups && b * group_channels <= kOneReadMaxBandChannels; ++b) {
    if (groups % b != 0) continue;
    band = b;
    if (b * group_channels * element_bytes >= 64) break;
  }
  return band;
}

/// Channels last: a multiple of lcm(columns, 64) threads, whose rows × slots cover the block's rows.
inline bool fit_rows(OneReadPlan& plan, const TensorShape& x, Index groups, int band_groups, int channel_vector,
                     int slots, int max_threads, int cluster) {
  OneReadRows m;
  m.group_columns = x.c() / groups / channel_vector;
  m.columns = m.group_columns * band_groups;
  m.positions = x.spatial_size();
  m.deal_over(cluster);
  m.band_groups = band_groups;
  if (m.span * (cluster - 1) >= m.positions || m.columns * channel_vector > kOneReadMaxBandChannels) return false;
  const Index granule = m.columns / greatest_common_divisor(m.columns, kOneReadWarpGranule) * kOneReadWarpGranule;
  const Index granule_rows = granule / m.columns;
  const Index threads = ceil_div(m.span, granule_rows * slots) * granule;
  if (threads > max_threads) return false;
  m.rows_per_step = threads / m.columns;
  plan.rows = m;
  plan.threads = static_cast<unsigned>(threads);
  plan.units = x.n() * groups / band_groups;
  plan.cluster = cluster;
  return true;
}

/// The one-read instantiations of an op, fewest bytes first.
template <typename T, typename... Shapes>
struct OneReadKernels {
  static constexpr int kV = kVector16<T>;
  static constexpr int kChannelVector = kOneReadChannelVector;

  /// Packed planes read with 16-byte vectors, or packed channels last with an even number of
  /// channels per group (and pointers aligned for pairs), whose unit fits one of the Shapes over
  /// a cluster: the fewest blocks per cluster (one where the GPU has no clusters), then the
  /// fewest bytes per thread (the most threads, the fewest registers each), win.
  /// kAuto takes the plan only where it measured faster than three-pass: channels last when a
  /// band's row segment is at least 64 bytes (narrower segments leave most of each 32-byte sector
  /// to the neighbouring bands' blocks), and, for the forward, planes whose slots are at least
  /// nine tenths used (the forward saves a third of its
  /// traffic, not two fifths, and an idle quarter of the block costs more than that).
  static OneReadPlan plan(Algorithm algorithm, bool forward, const Plan& pl, const TensorShape& x, Index groups,
                          std::initializer_list<const void*> pointers) {
    OneReadPlan plan = fit(algorithm, pl, x, groups, pointers);
    plan.usable = plan.usable && plan.blocks() <= 2147483647;  // a 1-D grid
    if (algorithm != Algorithm::kAuto || !plan.usable) return plan;
    // Positions a block holds, and how many of them its part of the unit fills.
    const Index span = plan.channels_last ? plan.rows.span : plan.planes.span;
    const Index capacity =
        plan.channels_last ? plan.rows.rows_per_step * (plan.bytes / (kChannelVector * static_cast<Index>(sizeof(T))))
                           : plan.planes.channel_threads * (plan.bytes / 16);
    const bool well_filled = span * 10 >= capacity * 9;
    if (plan.channels_last) plan.usable = plan.rows.columns * kChannelVector * static_cast<Index>(sizeof(T)) >= 64;
    if (!plan.channels_last && forward) plan.usable = well_filled;
    // Clusters paid off for the planes backward and the channels-last forward of bands of at
    // most two groups, with well-filled blocks and enough of them for several waves; elsewhere
    // three-pass measured as fast or faster.
    if (plan.cluster > 1) {
      const bool measured_faster = plan.channels_last ? forward && plan.rows.band_groups <= 2 : !forward;
      plan.usable = plan.usable && measured_faster && well_filled &&
                    plan.blocks() >= 4 * static_cast<Index>(pl.device->multiprocessors);
    }
    return plan;
  }

 private:
  static OneReadPlan fit(Algorithm algorithm, const Plan& pl, const TensorShape& x, Index groups,
                         std::initializer_list<const void*> pointers) {
    OneReadPlan plan;
    if (algorithm == Algorithm::kThreePass || algorithm == Algorithm::kStaged) return plan;
    const int bytes[] = {Shapes::kBytes...}, max_threads[] = {Shapes::kMaxThreads...};
    const int most_blocks = pl.device->clusters ? kPortableClusterBlocks : 1;
    const bool planes = pl.path == Path::kPlanesPacked && pl.vector == kV;
    if (!planes && pl.path != Path::kChannelsLast) return plan;
    const Index group_channels = x.c() / groups;
    bool aligned = planes || group_channels % kChannelVector == 0;
    for (const void* p : pointers)
      aligned = aligned &&
                (planes || p == nullptr || reinterpret_cast<std::uintptr_t>(p) % (kChannelVector * sizeof(T)) == 0);
    if (!aligned) return plan;
    plan.channels_last = !planes;
    const int band = planes ? 1 : choose_band_groups(groups, group_channels, static_cast<Index>(sizeof(T)));
    const int pair_bytes = kChannelVector * static_cast<int>(sizeof(T));
    // Fewest blocks first: with the fewest bytes first, units spread over eight blocks of small
    // slots, which measured up to twice as slow.
    for (int cluster = 1; cluster <= most_blocks && !plan.usable; cluster *= 2) {
      for (std::size_t i = 0; i < sizeof...(Shapes) && !plan.usable; ++i) {
        plan.usable =
            planes ? fit_planes(plan, x, groups, kV, bytes[i] / 16, max_threads[i], cluster)
                   : fit_rows(plan, x, groups, band, kChannelVector, bytes[i] / pair_bytes, max_threads[i], cluster);
        plan.bytes = bytes[i];
      }
    }
    return plan;
  }

 public:
  /// Calls launch(shape, split) with the OneReadShape of `plan` and std::bool_constant of
  /// plan.split() (which channels-last kernel: see the kSplit kernels); returns its Status.
  template <typename Launch>
  static Status visit(const OneReadPlan& plan, Launch&& launch) {
    Status status;
    bool launched = false;
    auto try_shape = [&](auto shape) {
      if (launched || plan.bytes != decltype(shape)::kBytes) return;
      launched = true;
      status = plan.split() ? launch(shape, std::true_type{}) : launch(shape, std::false_type{});
    };
    (try_shape(Shapes{}), ...);
    return launched ? status : Status::runtime_error("no one-read kernel of " + std::to_string(plan.bytes) + " bytes");
  }
};

/// not_supported when kOneRead was asked for and cannot be had.
inline Status check_algorithm(Algorithm algorithm, const OneReadPlan& plan) {
  if (algorithm == Algorithm::kOneRead && !plan.usable)
    return Status::not_supported(
        "the one-read algorithm needs packed planes (NCHW and kin) with 16-byte aligned pointers and a plane size "
        "divisible by the vector, or packed channels last (NHWC and kin) with an even number of channels per group and "
        "pointers aligned for pairs, "
        "and a group (or band of groups) small enough for the registers of one block, or of a cluster of up to " +
        std::to_string(kPortableClusterBlocks) + " blocks where the GPU has clusters");
  return Status::ok();
}

/// The key of an op's plans (core/plan_cache.hpp): what the op adds, then its tensors' shapes and
/// its pointers' residues modulo 16 (all a plan asks of alignment).
using OpPlanKey = PlanKey<48>;

inline void add_shape(OpPlanKey& key, const TensorShape& t) {
  key.add(t.rank);
  for (int d = 0; d < t.rank && d < kMaxRank; ++d) key.add(t.lengths[d]).add(t.strides[d]);
}

/// The key of `problem`'s plans on `device`: its groups, algorithm and activation, `shapes`, and
/// the residues of `pointers` modulo 16 (all that a plan asks of alignment).
template <typename Problem>
OpPlanKey plan_key(const DeviceInfo& device, const Problem& problem, std::initializer_list<const TensorShape*> shapes,
                   std::initializer_list<const void*> pointers) {
  OpPlanKey key;
  key.add(device.device).add(problem.groups);
  key.add(static_cast<Index>(problem.algorithm)).add(static_cast<Index>(problem.activation));
  for (const TensorShape* shape : shapes) add_shape(key, *shape);
  for (const void* p : pointers) key.add(static_cast<Index>(reinterpret_cast<std::uintptr_t>(p) % 16));
  return key;
}

/// not_supported when a launch of the plan (or the per-group one, `group_blocks`) would need more
/// blocks than a 1-D grid holds.
inline Status check_grid(const Plan& plan, Index group_blocks, const char* what) {
  if (plan.blocks > 2147483647 || group_blocks > 2147483647)
    return Status::not_supported(std::string(what) + ": more than 2^31 - 1 blocks");
  return Status::ok();
}

}  // namespace hipgrad::groupnorm::detail
