/// @file bench_harness.hpp
/// @brief What every hipgrad benchmark shares: one JSON line per measured configuration, timed
///        with events (median of repeats after a warm-up) over inputs rotated beyond the L2.
///
/// The lines carry the configuration in the fields the PyTorch side needs to build the same
/// problem (bench/torch_compare.py reads them, times PyTorch and prints the side-by-side table).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/host/timer.hpp"

namespace hipgrad::bench {

/// One JSON object on one line; values are numbers or strings.
class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value) {
    fields_.emplace_back(key, "\"" + value + "\"");
    return *this;
  }
  JsonLine& add(const std::string& key, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.6g", value);
    fields_.emplace_back(key, buffer);
    return *this;
  }
  JsonLine& add_list(const std::string& key, const std::vector<long long>& values) {
    std::string s = "[";
    for (std::size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
    fields_.emplace_back(key, s + "]");
    return *this;
  }
  void print() const {
    std::string s = "{";
    for (std::size_t i = 0; i < fields_.size(); ++i)
      s += (i ? ", \"" : "\"") + fields_[i].first + "\": " + fields_[i].second;
    std::printf("%s}\n", s.c_str());
    std::fflush(stdout);
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// "a,b,,c" → {"a", "b", "c"}: the comma-separated lists of the benchmarks' options.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  for (char c : s + ",") {
    if (c != ',') {
      item += c;
    } else if (!item.empty()) {
      out.push_back(item);
      item.clear();
    }
  }
  return out;
}

/// Median milliseconds of `launch(copy)` where copy cycles through `copies` input sets; the
/// warm-up runs every copy once so that none is timed on its first touch.
template <typename Launch>
Status time_rotated(Launch&& launch, int copies, int repeats, float* median_ms) {
  host::TimingOptions options;
  options.warmup = copies > 3 ? copies : 3;
  options.repeats = repeats;
  return host::time_median_ms([&](int iteration) { return launch(iteration % copies); }, options, median_ms);
}

/// Host microseconds per call of `call()` (a Status-returning launch on the default stream): the
/// median over 5 rounds of the wall clock of `calls` back-to-back calls, without the final wait
/// for the GPU (whose longest *drain_us receives). With kernels shorter than a call's host time
/// the GPU never holds the host back, so this is what a call costs the host.
template <typename Call>
Status host_microseconds_per_call(Call&& call, int calls, double* per_call_us, double* drain_us) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 20; ++i) HIPGRAD_RETURN_IF_ERROR(call());
  HIPGRAD_RETURN_IF_HIP_ERROR(hipDeviceSynchronize());
  std::vector<double> rounds;
  *drain_us = 0;
  for (int round = 0; round < 5; ++round) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i) HIPGRAD_RETURN_IF_ERROR(call());
    const Clock::time_point issued = Clock::now();
    HIPGRAD_RETURN_IF_HIP_ERROR(hipDeviceSynchronize());
    const double drain = std::chrono::duration<double, std::micro>(Clock::now() - issued).count();
    *drain_us = drain > *drain_us ? drain : *drain_us;
    rounds.push_back(std::chrono::duration<double, std::micro>(issued - start).count() / calls);
  }
  std::sort(rounds.begin(), rounds.end());
  *per_call_us = rounds[rounds.size() / 2];
  return Status::ok();
}

/// A template, so that the header may define it in every benchmark that includes it.
template <int kUnused>
__global__ void empty_kernel() {}

/// The --host-overhead table's header and its first row, the floor under any op's host cost:
/// host microseconds per launch of an empty kernel.
inline Status print_host_overhead_header(int calls) {
  double us = 0, drain = 0;
  HIPGRAD_RETURN_IF_ERROR(host_microseconds_per_call(
      [] {
        empty_kernel<0><<<1, 32>>>();
        return status_from_hip(hipGetLastError(), "launch of empty_kernel", __FILE__, __LINE__);
      },
      calls, &us, &drain));
  std::printf("| op | problem | path | launches | run µs/call | can_implement µs/call | drain µs |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  std::printf("| empty kernel | 1 block | - | 1 | %.2f | - | %.0f |\n", us, drain);
  return Status::ok();
}

/// One row of the --host-overhead table: `run()` (the op's run, `launches` kernels a call) and
/// `check()` (its can_implement: the plan and the checks, nothing launched), per call.
template <typename Run, typename Check>
Status print_host_overhead_row(const std::string& op, const std::string& problem, const std::string& path, int launches,
                               Run&& run, Check&& check, int calls) {
  double run_us = 0, drain = 0;
  HIPGRAD_RETURN_IF_ERROR(host_microseconds_per_call(run, calls, &run_us, &drain));
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < calls; ++i) HIPGRAD_RETURN_IF_ERROR(check());
  const double check_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls;
  std::printf("| %s | %s | %s | %d | %.2f | %.2f | %.0f |\n", op.c_str(), problem.c_str(), path.c_str(), launches,
              run_us, check_us, drain);
  return Status::ok();
}

}  // namespace hipgrad::bench
