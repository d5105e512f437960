/// @file parallel.hpp
/// @brief parallel_for: a range of indices split over CPU threads in static contiguous chunks.
///
/// Used by the CPU references. Each index is handed to exactly one call of f, and which thread
/// makes that call never changes what f computes, so a caller that computes every result element
/// in one sequential loop gets bitwise the same results for any thread count. The count is
/// std::thread::hardware_concurrency(), or the environment variable HIPGRAD_CPU_THREADS when it
/// holds a positive integer (to compare thread counts, or to keep a test runner's load down).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace hipgrad::host {

using Index = std::int64_t;

/// The number of threads parallel_for uses (at least 1); read on every call, so tests may change
/// HIPGRAD_CPU_THREADS between calls.
inline int cpu_thread_count() {
  if (const char* env = std::getenv("HIPGRAD_CPU_THREADS")) {
    char* end = nullptr;
    const long requested = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && requested > 0 && requested <= 4096) return static_cast<int>(requested);
  }
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? static_cast<int>(hardware) : 1;
}

/// Calls f(i) once for every i in [begin, end). Thread t of T gets the t-th of T contiguous
/// chunks whose sizes differ by at most one; the calling thread runs chunk 0. An exception thrown
/// by f is rethrown here after all threads have finished (the first one, by chunk order).
template <typename F>
void parallel_for(Index begin, Index end, F f) {
  if (end <= begin) return;
  const Index count = end - begin;
  const Index available = cpu_thread_count();
  const Index threads = count < available ? count : available;
  const Index base = count / threads;
  const Index remainder = count % threads;
  auto chunk_begin = [&](Index t) { return begin + t * base + (t < remainder ? t : remainder); };

  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  auto run_chunk = [&](Index t) {
    try {
      for (Index i = chunk_begin(t), stop = chunk_begin(t + 1); i < stop; ++i) f(i);
    } catch (...) {
      errors[static_cast<std::size_t>(t)] = std::current_exception();
    }
  };
  // Where the system refuses another thread, this thread runs the chunks that are left.
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads - 1));  // so that only starting a thread can fail below
  Index spawned = 1;
  for (; spawned < threads; ++spawned) {
    try {
      workers.emplace_back(run_chunk, spawned);
    } catch (const std::system_error&) {
      break;
    }
  }
  run_chunk(0);
  for (Index t = spawned; t < threads; ++t) run_chunk(t);
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace hipgrad::host
