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

}  // namespace hipgrad::gemm
