/// @file grouped_tiles.hpp
/// @brief Work items over the output tiles of several sub-problems in one launch (a grouped
///        GEMM: a convolution's groups, backward-data's stride phases): the tiles of sub-problem
///        g are the items [starts[g], starts[g + 1]), in order, so that one grid (or one
///        persistent walk) covers them all and a block finds its sub-problem by a binary search.
///
/// A sub-problem with no output (M = 0 or N = 0) has no tiles and no items. One with K = 0 has
/// its tiles like any other: its blocks run no K tile and store the zero product, so its output
/// is written without a read of A or B.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/gemm/collective/tile_work.hpp"
#include "hipgrad/gemm/kernel/tile_scheduler.hpp"

namespace hipgrad::gemm {

/// Which sub-problem work item `item` belongs to and its tile within it (row-major over the
/// sub-problem's tiles_m × tiles_n, as grouped_tile orders a plain grid).
struct GroupedItem {
  int group;
  long long tile;
};

/// The sub-problem of `item` (0 ≤ item < starts[groups]): the last g with starts[g] ≤ item. Empty
/// sub-problems share their start with the next one and are passed over. `starts` holds
/// groups + 1 non-decreasing entries from 0.
HIPGRAD_HOST_DEVICE inline GroupedItem find_grouped_item(const long long* starts, int groups, long long item) {
  int low = 0, high = groups;  // starts[low] ≤ item < starts[high]
  while (high - low > 1) {
    const int middle = low + (high - low) / 2;
    if (starts[middle] <= item) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return {low, item - starts[low]};
}

/// One sub-problem's output extent.
struct GroupedExtent {
  long long m;
  long long n;
};

/// starts[g] for every sub-problem (groups + 1 entries, the last the total of work items) for
/// block tiles of block_m × block_n.
inline std::vector<long long> grouped_tile_starts(const std::vector<GroupedExtent>& extents, int block_m, int block_n) {
  std::vector<long long> starts(extents.size() + 1, 0);
  for (std::size_t g = 0; g < extents.size(); ++g) {
    const long long m = extents[g].m > 0 ? extents[g].m : 0, n = extents[g].n > 0 ? extents[g].n : 0;
    starts[g + 1] =
        starts[g] + ceil_div(m, static_cast<long long>(block_m)) * ceil_div(n, static_cast<long long>(block_n));
  }
  return starts;
}

/// One sub-problem of a grouped launch: C = epilogue(A·B) with its own loaders (sizes, addresses,
/// strides) and output placement. A.k_size() is its K; 0 writes the zero product.
template <typename LoaderA, typename LoaderB, typename Epilogue>
struct SubProblem {
  LoaderA a;
  LoaderB b;
  Epilogue epilogue;
};

/// Bytes of a grouped launch's table (its sub-problems, their item starts and the tail behind
/// them, device/grouped_launcher.hpp's layout) that travel in the kernel's parameters: within
/// the 4 KB of parameters every target takes, beside GroupedProblems' other fields and a kernel's
/// own. A table that fits needs no copy to the workspace before the launch, hence no host-side
/// staging and nothing a captured graph would read from freed host memory.
inline constexpr int kParameterTableBytes = 3584;

/// Whether Operand refers to a tensor map in the table's tail (`map`, the box operands).
template <typename Operand, typename = void>
struct RefersToMap {
  static constexpr bool value = false;
};
template <typename Operand>
struct RefersToMap<Operand, decltype(void(static_cast<const void*>(std::declval<Operand&>().map)))> {
  static constexpr bool value = true;
};

/// The sub-problems of a grouped launch as a kernel sees them: `count` sub-problems at the
/// table's start and their item starts (grouped_tile_starts: count + 1 entries, the last `items`)
/// `starts_offset` bytes in, the table either in the parameters (`in_parameters`) or copied to
/// device memory at `staged`. Operands' tensor maps point into the table as staged at `staged`;
/// read from the parameters, they are moved there.
template <typename LoaderA, typename LoaderB, typename Epilogue>
struct GroupedProblems {
  using Problem = SubProblem<LoaderA, LoaderB, Epilogue>;
  const unsigned char* staged;
  int count;
  int items;
  int starts_offset;
  bool in_parameters;
  alignas(64) unsigned char table[kParameterTableBytes];  // 64: a tensor map's alignment

  /// Sub-problem g of a table in the parameters, its operands' maps moved there.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE Problem problem_in_parameters(int g) const {
    Problem p = reinterpret_cast<const Problem*>(table)[g];
    place_map(p.a);
    place_map(p.b);
    return p;
  }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE const long long* starts_in_parameters() const {
    return reinterpret_cast<const long long*>(table + starts_offset);
  }

 private:
  template <typename Operand>
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void place_map(Operand& operand) const {
    if constexpr (RefersToMap<Operand>::value)
      operand.map = table + (static_cast<const unsigned char*>(operand.map) - staged);
  }
};

/// What a block does for work item `tile` of a sub-problem with loaders a, b: that output tile
/// (grouped_tile's order) over the whole K; grouped launches do not split K.
template <typename Cfg, typename LoaderA, typename LoaderB>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE TileWork sub_problem_work(const LoaderA& a, const LoaderB& b, long long tile) {
  const int tiles_m = ceil_div(a.mn_size(), Cfg::kBlockM), tiles_n = ceil_div(b.mn_size(), Cfg::kBlockN);
  return {grouped_tile(static_cast<int>(tile), tiles_m, tiles_n), 0, 0, ceil_div(a.k_size(), Cfg::kBlockK)};
}

/// The work items of a grouped launch (as ProductSchedule's of one product): visit(item, f)
/// finds the item's sub-problem, copies it from the table, and calls f(a, b, epilogue, work).
/// Each grouped kernel is compiled for a table in its parameters (kInParameters) and for one in
/// device memory, so that every read of the table is a parameter load or a global one: through
/// a pointer that may be either, the reads spill.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue, bool kInParameters>
struct GroupedSchedule {
  using Problems = GroupedProblems<LoaderA, LoaderB, Epilogue>;
  using Problem = typename Problems::Problem;
  const Problems* parameters;  ///< the kernel's parameter, read in place (kInParameters)
  // Else the staged table's fields as values: read through `parameters`, the compiler could not
  // keep them in registers across the mainloop's stores.
  const Problem* staged;
  const long long* starts;
  int count;
  int items;

  HIPGRAD_DEVICE explicit GroupedSchedule(const Problems& p)
      : parameters(&p),
        staged(reinterpret_cast<const Problem*>(p.staged)),
        starts(reinterpret_cast<const long long*>(p.staged + p.starts_offset)),
        count(p.count),
        items(p.items) {}

  template <typename Visit>
  HIPGRAD_DEVICE HIPGRAD_INLINE void visit(int item, Visit&& visit) const {
    const GroupedItem at = find_grouped_item(kInParameters ? parameters->starts_in_parameters() : starts, count, item);
    // A copy, not a reference into the table: read through a reference, the producer's loader
    // fields are reloaded after every cp.async (which the compiler must assume writes memory);
    // copied, they are registers or stack slots (bench/log/gemm.md).
    const Problem p = kInParameters ? parameters->problem_in_parameters(at.group) : staged[at.group];
    visit(p.a, p.b, p.epilogue, sub_problem_work<Cfg>(p.a, p.b, at.tile));
  }
};

}  // namespace hipgrad::gemm
