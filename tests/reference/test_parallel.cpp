/// @file test_parallel.cpp
/// @brief parallel_for: every index once, static contiguous chunks, the thread-count override and
///        exception propagation.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "hipgrad/host/parallel.hpp"
#include "reference_test_util.hpp"

namespace {

using hipgrad::host::cpu_thread_count;
using hipgrad::host::Index;
using hipgrad::host::parallel_for;
using hipgrad::test::ScopedThreadCount;

TEST(ParallelFor, CallsEveryIndexOnce) {
  for (int threads : {1, 2, 3, 7, 64}) {
    ScopedThreadCount scoped(threads);
    for (const auto& range : std::vector<std::pair<Index, Index>>{{0, 1}, {0, 5}, {-3, 4}, {10, 1009}}) {
      const Index begin = range.first, end = range.second;  // C++17 lambdas cannot capture bindings
      std::vector<std::atomic<int>> calls(static_cast<std::size_t>(end - begin));
      parallel_for(begin, end, [&](Index i) { calls[static_cast<std::size_t>(i - begin)].fetch_add(1); });
      for (Index i = begin; i < end; ++i) {
        ASSERT_EQ(calls[static_cast<std::size_t>(i - begin)].load(), 1)
            << "index " << i << " of [" << begin << ", " << end << ") with " << threads << " threads";
      }
    }
  }
}

TEST(ParallelFor, EmptyRangesCallNothing) {
  int calls = 0;
  parallel_for(0, 0, [&](Index) { ++calls; });
  parallel_for(5, 3, [&](Index) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// Chunks are contiguous, one per thread, and their sizes differ by at most one.
TEST(ParallelFor, SplitsIntoBalancedContiguousChunks) {
  ScopedThreadCount scoped(4);
  const Index count = 103;
  std::vector<std::thread::id> owner(static_cast<std::size_t>(count));
  parallel_for(0, count, [&](Index i) { owner[static_cast<std::size_t>(i)] = std::this_thread::get_id(); });
  std::vector<Index> run_lengths{1};
  for (std::size_t i = 1; i < owner.size(); ++i) {
    if (owner[i] == owner[i - 1]) {
      ++run_lengths.back();
    } else {
      run_lengths.push_back(1);
    }
  }
  ASSERT_EQ(run_lengths.size(), 4u);
  const auto [smallest, largest] = std::minmax_element(run_lengths.begin(), run_lengths.end());
  EXPECT_LE(*largest - *smallest, 1);
  EXPECT_EQ(owner.front(), std::this_thread::get_id()) << "the calling thread runs the first chunk";
}

TEST(ParallelFor, ThreadCountComesFromTheEnvironment) {
  {
    ScopedThreadCount scoped(3);
    EXPECT_EQ(cpu_thread_count(), 3);
  }
  const int hardware = std::max(1u, std::thread::hardware_concurrency());
  for (const char* ignored : {"0", "-2", "abc", "4x", ""}) {
    ScopedThreadCount scoped(1);
    setenv("HIPGRAD_CPU_THREADS", ignored, 1);
    EXPECT_EQ(cpu_thread_count(), hardware) << "HIPGRAD_CPU_THREADS='" << ignored << "' must be ignored";
  }
}

TEST(ParallelFor, RethrowsAnExceptionFromAWorker) {
  ScopedThreadCount scoped(4);
  std::atomic<int> calls{0};
  EXPECT_THROW(parallel_for(0, 100,
                            [&](Index i) {
                              calls.fetch_add(1);
                              if (i == 90) throw std::runtime_error("index 90");
                            }),
               std::runtime_error);
  // Chunks of 25: the other three ran to completion, the last one stopped at index 90.
  EXPECT_EQ(calls.load(), 3 * 25 + 16);
}

}  // namespace
