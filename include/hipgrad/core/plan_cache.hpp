/// @file plan_cache.hpp
/// @brief The plans an op made most recently on this host thread, keyed by everything a plan
///        depends on: a repeated call finds its plan instead of weighing configurations again.
///
/// Ops plan from the problem, the pointers' alignment and the device (DeviceInfo); a key holds
/// all three, so a hit is exactly the plan the call would make. Per thread, hence no lock: the
/// cache is a handful of entries searched in order, replaced round-robin.
#pragma once

#include <array>

#include "hipgrad/core/strides.hpp"

namespace hipgrad {

/// A plan's key: integers appended in a fixed order by the op (sizes, strides, enums, the
/// device, pointer residues modulo 16); equal keys mean equal plans.
template <int kWords>
class PlanKey {
 public:
  PlanKey& add(Index value) {
    if (size_ < kWords) words_[size_] = value;
    ++size_;  // an overfull key compares by its size too, and never equal to a shorter one
    return *this;
  }
  bool fits() const { return size_ <= kWords; }
  bool operator==(const PlanKey& other) const {
    if (size_ != other.size_ || !fits()) return false;
    for (int i = 0; i < size_; ++i)
      if (words_[i] != other.words_[i]) return false;
    return true;
  }

 private:
  std::array<Index, kWords> words_{};
  int size_ = 0;
};

/// The last kEntries (key, plan) pairs of one op on this thread. `Plan` is copied out, so a
/// caller's plan stays valid whatever later calls do.
template <typename Key, typename Plan, int kEntries = 8>
class RecentPlans {
 public:
  /// The plan kept for `key`, or make()'s, then kept.
  template <typename Make>
  Plan find_or_make(const Key& key, Make&& make) {
    for (int i = 0; i < count_; ++i)
      if (keys_[i] == key) return plans_[i];
    const Plan plan = make();
    if (!key.fits()) return plan;
    keys_[next_] = key;
    plans_[next_] = plan;
    next_ = (next_ + 1) % kEntries;
    if (count_ < kEntries) ++count_;
    return plan;
  }

 private:
  std::array<Key, kEntries> keys_{};
  std::array<Plan, kEntries> plans_{};
  int count_ = 0;
  int next_ = 0;
};

}  // namespace hipgrad
