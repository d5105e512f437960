/// @file per_device.hpp
/// @brief A yes/no fact about a GPU (what its architecture runs, what the loaded code holds),
///        asked once per device and remembered for the life of the process.
#pragma once

#include <atomic>

namespace hipgrad {

/// `ask()` for `device`, remembered: every call site passes its own lambda, whose type keys its
/// own table. Threads that race on the first call each ask; they get the same answer. Devices
/// beyond the table are asked every time.
template <typename Ask>
bool remembered_per_device(int device, Ask ask) {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0 not asked yet, 1 no, 2 yes
  if (device < 0 || device >= kDevices) return ask();
  int answer = known[device].load(std::memory_order_relaxed);
  if (answer == 0) {
    answer = ask() ? 2 : 1;
    known[device].store(answer, std::memory_order_relaxed);
  }
  return answer == 2;
}

}  // namespace hipgrad
