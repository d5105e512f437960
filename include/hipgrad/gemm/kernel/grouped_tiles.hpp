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

/// The sub-problems of a grouped launch as a kernel sees them, in device memory: `count`
/// sub-problems and their item starts (grouped_tile_starts: count + 1 entries, the last `items`).
template <typename LoaderA, typename LoaderB, typename Epilogue>
struct GroupedProblems {
  const SubProblem<LoaderA, LoaderB, Epilogue>* problems;
  const long long* starts;
  int count;
  int items;
};

/// What a block does for work item `tile` of a sub-problem with loaders a, b: that output tile
/// (grouped_tile's order) over the whole K; grouped launches do not split K.
template <typename Cfg, typename LoaderA, typename LoaderB>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE TileWork sub_problem_work(const LoaderA& a, const LoaderB& b, long long tile) {
  const int tiles_m = ceil_div(a.mn_size(), Cfg::kBlockM), tiles_n = ceil_div(b.mn_size(), Cfg::kBlockN);
  return {grouped_tile(static_cast<int>(tile), tiles_m, tiles_n), 0, 0, ceil_div(a.k_size(), Cfg::kBlockK)};
}

/// The work items of a grouped launch (as ProductSchedule's of one product): visit(item, f)
/// finds the item's sub-problem, copies it from device memory, and calls f(a, b, epilogue, work).
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
struct GroupedSchedule {
  GroupedProblems<LoaderA, LoaderB, Epilogue> problems;
  int items;

  HIPGRAD_DEVICE explicit GroupedSchedule(const GroupedProblems<LoaderA, LoaderB, Epilogue>& p)
      : problems(p), items(p.items) {}

  template <typename Visit>
  HIPGRAD_DEVICE HIPGRAD_INLINE void visit(int item, Visit&& visit) const {
    const GroupedItem at = find_grouped_item(problems.starts, problems.count, item);
    // A copy, not a reference into device memory: read through a reference, the producer's
    // loader fields are reloaded after every cp.async (which the compiler must assume writes
    // memory); copied, they are registers or stack slots (bench/log/gemm.md).
    const SubProblem<LoaderA, LoaderB, Epilogue> p = problems.problems[at.group];
    visit(p.a, p.b, p.epilogue, sub_problem_work<Cfg>(p.a, p.b, at.tile));
  }
};

}  // namespace hipgrad::gemm
