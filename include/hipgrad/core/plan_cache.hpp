/// @file plan_cache.hpp
/// @brief The plans an op made most recently on this host thread, keyed by everything a plan
///        depends on: a repeated call finds its plan instead of weighing configurations again.
///
/// Ops plan from the problem, the pointers' alignment and the device (DeviceInfo); a key holds
/// all three, so a hit is exactly the plan the call would make. Per thread, hence no lock: the
/// cache is a list of entries searched in order, replaced round-robin once full.
#pragma once

#include <array>
#include <vector>

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

/// The last kEntries (key, plan) pairs of one op on this thread: as many as the distinct layers
/// of a network, so that a training step finds every plan. Entries are allocated as they come.
/// `Plan` is copied out, so a caller's plan stays valid whatever later calls do.
template <typename Key, typename Plan, int kEntries = 64>
class RecentPlans {
 public:
  /// The plan kept for `key`, or make()'s, then kept.
  template <typename Make>
  Plan find_or_make(const Key& key, Make&& make) {
    for (const Entry& entry : entries_)
      if (entry.key == key) return entry.plan;
    const Plan plan = make();
    if (!key.fits()) return plan;
    if (static_cast<int>(entries_.size()) < kEntries) {
      entries_.push_back({key, plan});
    } else {
      entries_[next_] = {key, plan};
      next_ = (next_ + 1) % kEntries;
    }
    return plan;
  }

 private:
  struct Entry {
    Key key;
    Plan plan;
  };
  std::vector<Entry> entries_;
  int next_ = 0;
};

}  // namespace hipgrad
