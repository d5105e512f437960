/// @file timer.hpp
/// @brief GPU timing with events: warm-up runs, then timed repeats, reported as the median.
///
/// The median rather than the mean: one run disturbed by a clock change or another process
/// would otherwise move the figure. Every call returns a Status; nothing throws.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/status.hpp"

namespace hipgrad::host {

struct TimingOptions {
  int warmup = 5;    ///< untimed runs first: first-launch costs, caches, clocks ramping up
  int repeats = 20;  ///< timed runs
};

/// One hipEvent_t, created on demand and destroyed with the object. Move-only.
class Event {
 public:
  Event() = default;
  ~Event() { reset(); }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Creates the event unless it exists already.
  Status create() {
    if (event_ != nullptr) return Status::ok();
    return checked(hipEventCreate(&event_), "hipEventCreate");
  }
  Status record(hipStream_t stream = nullptr) {
    HIPGRAD_RETURN_IF_ERROR(create());
    return checked(hipEventRecord(event_, stream), "hipEventRecord");
  }
  /// Waits until the work recorded before the event has completed.
  Status synchronize() const {
    if (event_ == nullptr) return Status::invalid_argument("Event::synchronize: the event was never recorded");
    return checked(hipEventSynchronize(event_), "hipEventSynchronize");
  }
  hipEvent_t get() const { return event_; }

  /// Milliseconds between two recorded events; waits for `stop` to complete.
  static Status elapsed_ms(const Event& start, const Event& stop, float* ms) {
    if (start.event_ == nullptr || stop.event_ == nullptr) {
      return Status::invalid_argument("elapsed_ms: start or stop was never recorded");
    }
    HIPGRAD_RETURN_IF_ERROR(stop.synchronize());
    return checked(hipEventElapsedTime(ms, start.event_, stop.event_), "hipEventElapsedTime");
  }

 private:
  void reset() {
    if (event_ != nullptr) (void)hipEventDestroy(event_);
    event_ = nullptr;
  }
  /// A failed call also leaves its error as the runtime's last error; clear it so that a later
  /// launch check does not report it as its own.
  static Status checked(hipError_t error, const char* call) {
    if (error == hipSuccess) return Status::ok();
    (void)hipGetLastError();
    return status_from_hip(error, call, __FILE__, __LINE__);
  }

  hipEvent_t event_ = nullptr;
};

/// Times the work enqueued between start() and stop() on one stream. The events are created by
/// the first start()/stop() (so that creation can report a Status) and destroyed with the timer.
class EventTimer {
 public:
  Status start(hipStream_t stream = nullptr) { return start_.record(stream); }
  Status stop(hipStream_t stream = nullptr) { return stop_.record(stream); }
  /// Waits for the stop event, then gives the milliseconds between the two.
  Status elapsed_ms(float* ms) const { return Event::elapsed_ms(start_, stop_, ms); }

 private:
  Event start_;
  Event stop_;
};

namespace detail {

template <typename F>
Status run_launch(F& launch, int iteration) {
  static_assert(std::is_convertible_v<std::invoke_result_t<F&, int>, Status>,
                "the timed launch must be callable as launch(int iteration) and return a hipgrad::Status");
  return launch(iteration);
}

}  // namespace detail

/// Runs launch(i) for i = 0, 1, … : `warmup` untimed runs, then `repeats` timed ones, and puts
/// the milliseconds of each timed run in *samples_ms. `launch` must enqueue its work on `stream`
/// and return a Status; the first failure is returned at once. The running index lets a launch
/// alternate between buffers, e.g. to keep its inputs out of the cache.
///
/// The timed runs are enqueued back to back between repeats + 1 events and synchronised once at
/// the end, so the GPU never idles between runs waiting for the host: each sample is GPU time of
/// one run, not the host's launch latency.
template <typename F>
Status time_each(F&& launch, TimingOptions options, std::vector<float>* samples_ms, hipStream_t stream = nullptr) {
  if (samples_ms == nullptr) return Status::invalid_argument("time_each: samples_ms is null");
  if (options.warmup < 0 || options.repeats < 1) {
    return Status::invalid_argument("time_each: need warmup >= 0 and repeats >= 1, got warmup " +
                                    std::to_string(options.warmup) + ", repeats " + std::to_string(options.repeats));
  }
  samples_ms->clear();
  int iteration = 0;
  for (; iteration < options.warmup; ++iteration) HIPGRAD_RETURN_IF_ERROR(detail::run_launch(launch, iteration));

  std::vector<Event> events(static_cast<std::size_t>(options.repeats) + 1);
  for (Event& e : events) HIPGRAD_RETURN_IF_ERROR(e.create());
  HIPGRAD_RETURN_IF_ERROR(events[0].record(stream));
  for (int r = 0; r < options.repeats; ++r, ++iteration) {
    HIPGRAD_RETURN_IF_ERROR(detail::run_launch(launch, iteration));
    HIPGRAD_RETURN_IF_ERROR(events[static_cast<std::size_t>(r) + 1].record(stream));
  }
  samples_ms->resize(static_cast<std::size_t>(options.repeats));
  for (std::size_t r = 0; r < samples_ms->size(); ++r) {
    HIPGRAD_RETURN_IF_ERROR(Event::elapsed_ms(events[r], events[r + 1], &(*samples_ms)[r]));
  }
  return Status::ok();
}

/// The median of samples (the mean of the middle two for an even count); 0 when empty.
inline float median(std::vector<float> samples) {
  if (samples.empty()) return 0.0f;
  const std::size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid), samples.end());
  const float upper = samples[mid];
  if (samples.size() % 2 == 1) return upper;
  const float lower = *std::max_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5f * (lower + upper);
}

/// time_each, reduced to the median run time in milliseconds.
template <typename F>
Status time_median_ms(F&& launch, TimingOptions options, float* median_ms, hipStream_t stream = nullptr) {
  if (median_ms == nullptr) return Status::invalid_argument("time_median_ms: median_ms is null");
  std::vector<float> samples;
  HIPGRAD_RETURN_IF_ERROR(time_each(std::forward<F>(launch), options, &samples, stream));
  *median_ms = median(std::move(samples));
  return Status::ok();
}

/// How many copies of a working set of `bytes_per_set` bytes to rotate through so that a timed
/// run never finds its inputs in the L2 cache left warm by the previous one: enough copies to
/// span twice the device's L2 (at least 1, at most `max_copies`).
inline int l2_rotation_copies(std::size_t bytes_per_set, int max_copies = 64) {
  int device = 0, l2_bytes = 0;
  if (hipGetDevice(&device) != hipSuccess ||
      hipDeviceGetAttribute(&l2_bytes, hipDeviceAttributeL2CacheSize, device) != hipSuccess) {
    (void)hipGetLastError();
    l2_bytes = 64 << 20;  // a generous guess when the device cannot be asked
  }
  if (bytes_per_set == 0) return 1;
  const std::size_t needed = (2 * static_cast<std::size_t>(l2_bytes) + bytes_per_set - 1) / bytes_per_set;
  return static_cast<int>(
      std::max<std::size_t>(1, std::min<std::size_t>(needed, static_cast<std::size_t>(max_copies))));
}

}  // namespace hipgrad::host
