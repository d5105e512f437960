/// @file reference_test_util.hpp
/// @brief Helpers shared by the CPU reference tests: filling, copying and comparing host tensors
///        by logical index (whatever their strides), and setting the reference thread count.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::test {

using host::Index;
using host::Tensor;

/// Logical values uniform in [lo, hi).
template <typename T>
void fill_uniform(Tensor<T>& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  t.for_each_index([&](const std::vector<Index>& i) { t(i) = type_convert<T>(dist(rng)); });
}

/// Logical values drawn from the integers lo..hi (exact in every storage type for small ranges).
template <typename T>
void fill_integers(Tensor<T>& t, std::mt19937_64& rng, int lo, int hi) {
  std::uniform_int_distribution<int> dist(lo, hi);
  t.for_each_index([&](const std::vector<Index>& i) { t(i) = type_convert<T>(static_cast<double>(dist(rng))); });
}

/// Every storage element, padding gaps included, set to NaN: a result element that a reference
/// forgets to write then poisons whatever is computed from it.
template <typename T>
void fill_nan(Tensor<T>& t) {
  for (T& v : t.storage()) v = type_convert<T>(std::numeric_limits<double>::quiet_NaN());
}

/// Copies the logical elements of src into dst, which may have other strides and another type.
template <typename TSrc, typename TDst>
void copy_logical(const Tensor<TSrc>& src, Tensor<TDst>& dst) {
  ASSERT_EQ(src.lengths(), dst.lengths());
  src.for_each_index([&](const std::vector<Index>& i) { dst(i) = type_convert<TDst>(src(i)); });
}

/// A tensor with the lengths of `t`, new strides and the same logical values.
template <typename T>
Tensor<T> relayout(const Tensor<T>& t, const std::vector<Index>& strides) {
  Tensor<T> out(t.lengths(), strides);
  copy_logical(t, out);
  return out;
}

/// Σ a·b over the logical elements, in double.
template <typename TA, typename TB>
double inner_product(const Tensor<TA>& a, const Tensor<TB>& b) {
  double sum = 0.0;
  a.for_each_index(
      [&](const std::vector<Index>& i) { sum += type_convert<double>(a(i)) * type_convert<double>(b(i)); });
  return sum;
}

/// Whether the logical elements are bitwise equal (layouts may differ).
template <typename T>
::testing::AssertionResult bitwise_equal(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.lengths() != b.lengths()) return ::testing::AssertionFailure() << "lengths differ";
  std::string first_mismatch;
  a.for_each_index([&](const std::vector<Index>& i) {
    if (first_mismatch.empty() && std::memcmp(&a(i), &b(i), sizeof(T)) != 0) {
      first_mismatch = "element " + std::to_string(b.offset(i)) +
                       " (storage offset in b) differs: " + std::to_string(type_convert<double>(a(i))) + " vs " +
                       std::to_string(type_convert<double>(b(i)));
    }
  });
  if (first_mismatch.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << first_mismatch;
}

/// Strides that leave a gap after every dimension: each length is padded by one before packing in
/// `order`, so no tensor built this way is contiguous.
inline std::vector<Index> padded_strides(const std::vector<Index>& lengths, const std::vector<int>& order) {
  std::vector<Index> padded = lengths;
  for (Index& l : padded) l += 1;
  return host::strides_for_order(padded, order);
}

/// Layouts of a GroupNorm tensor [N, C, spatial...].
enum class NormLayout { kNCHW, kNHWC, kPaddedNHWC };

inline const char* layout_name(NormLayout layout) {
  switch (layout) {
    case NormLayout::kNCHW: return "NCHW";
    case NormLayout::kNHWC: return "NHWC";
    case NormLayout::kPaddedNHWC: return "PaddedNHWC";
  }
  return "?";
}

inline std::vector<Index> norm_strides(const std::vector<Index>& lengths, NormLayout layout) {
  if (layout == NormLayout::kNCHW) return host::packed_strides(lengths);
  std::vector<int> order{0};
  for (int d = 2; d < static_cast<int>(lengths.size()); ++d) order.push_back(d);
  order.push_back(1);
  return layout == NormLayout::kNHWC ? host::strides_for_order(lengths, order) : padded_strides(lengths, order);
}

/// Sets HIPGRAD_CPU_THREADS for the lifetime of the object, then restores the previous value.
class ScopedThreadCount {
 public:
  explicit ScopedThreadCount(int threads) {
    if (const char* old = std::getenv(kName)) {
      had_value_ = true;
      old_value_ = old;
    }
    setenv(kName, std::to_string(threads).c_str(), 1);
  }
  ~ScopedThreadCount() {
    if (had_value_) {
      setenv(kName, old_value_.c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }
  ScopedThreadCount(const ScopedThreadCount&) = delete;
  ScopedThreadCount& operator=(const ScopedThreadCount&) = delete;

 private:
  static constexpr const char* kName = "HIPGRAD_CPU_THREADS";
  bool had_value_ = false;
  std::string old_value_;
};

}  // namespace hipgrad::test
