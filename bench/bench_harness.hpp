/// @file bench_harness.hpp
/// @brief What every hipgrad benchmark shares: one JSON line per measured configuration, timed
///        with events (median of repeats after a warm-up) over inputs rotated beyond the L2.
///
/// The lines carry the configuration in the fields the PyTorch side needs to build the same
/// problem (bench/torch_compare.py reads them, times PyTorch and prints the side-by-side table).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

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
    for (std::size_t i = 0; i < fields_.size(); ++i) s += (i ? ", \"" : "\"") + fields_[i].first + "\": " + fields_[i].second;
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

}  // namespace hipgrad::bench
