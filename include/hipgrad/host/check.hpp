/// @file check.hpp
/// @brief Comparing a result tensor with a reference: dtype-aware tolerances, non-finite values
///        fail, and the first mismatches are reported with their logical indices.
///
/// Host-only. Elements are compared by logical index, so result and reference may have different
/// strides (an NHWC result against an NCHW reference) and different element types (a half result
/// against a double reference). All arithmetic is in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::host {

/// An element passes when |result − reference| ≤ atol + rtol·|reference|.
struct Tolerance {
  double rtol;
  double atol;
};

namespace detail {

/// The final rounding to T, plus a few ulps for the approximate fp32 transcendentals of fused ops
/// (rsqrt, exp): about two unit roundoffs of T for fp16 (2^-11) and bf16 (2^-8), 1e-5 for fp32,
/// 1e-12 for double.
template <typename T>
constexpr double storage_tolerance() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || is_16bit_float_v<T>,
                "tolerances: T must be float, double, half or bfloat16");
  if constexpr (std::is_same_v<T, float>)
    return 1e-5;
  else if constexpr (std::is_same_v<T, half>)
    return 1e-3;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return 8e-3;
  else
    return 1e-12;
}

/// The unit roundoff of the accumulation: fp32 for every stored type, double for double.
template <typename T>
constexpr double accumulation_roundoff() {
  return std::is_same_v<T, double> ? 0x1.0p-53 : 0x1.0p-24;
}

}  // namespace detail

/// For results stored as T that are averages, or elementwise functions of averages and of the
/// inputs: GroupNorm's y, dx, mean and rstd; anything elementwise (the default scale and the
/// defaults of the budget give the plain storage tolerance).
///
/// An average of n terms of magnitude up to `scale` computed in fp32 carries a rounding error
/// that does not grow with n: each partial sum of a blocked or tree-shaped reduction holds a run
/// of terms, its rounding errors add like a random walk relative to the run (√run·u), and dividing
/// by n takes the growth of the sum away. The budget is 64 unit roundoffs of the accumulation
/// (runs of up to a few thousand terms per partial) on top of the storage rounding; relative to
/// the result (rtol) and, for results that cancel to near 0, relative to `scale` (atol): `scale`
/// is the magnitude of the terms the result is made of (for the mean: |x|; for GroupNorm's y,
/// |γ|·(|x̂| + rstd·|x|) + |β|, the mean's error at the size of x scaled by γ·rstd), which the caller
/// knows and the result may hide.
/// Real indexing, synchronisation or formula bugs produce errors of the order of the terms.
template <typename T>
Tolerance averaged_tolerance(double scale = 1) {
  const double budget = detail::storage_tolerance<T>() + 64 * detail::accumulation_roundoff<T>();
  return Tolerance{budget, budget * scale};
}

/// For results stored as T that are sums of `terms` values of magnitude up to `term_scale` (a
/// GEMM's dot products of length K, GroupNorm's dγ and dβ over N·spatial).
///
/// For random data of either sign the sum itself is of order term_scale·√terms, and the rounding
/// errors of an fp32 sum grow like a random walk: relative to the result, like √terms·u (rtol,
/// with four unit roundoffs a step for the FMA, conversions and merges); in absolute terms, where
/// the sum cancels to near 0, the atol is the relative budget of averaged_tolerance applied to the
/// sum's natural size term_scale·√terms. Both grow like √terms. Integer data whose sums are exact
/// are checked with check_equal instead.
template <typename T>
Tolerance sum_tolerance(std::int64_t terms, double term_scale = 1) {
  const double n = static_cast<double>(std::max<std::int64_t>(terms, 1));
  const double u = detail::accumulation_roundoff<T>(), storage = detail::storage_tolerance<T>();
  return Tolerance{storage + 4 * u * std::sqrt(n), (storage + 64 * u) * term_scale * std::sqrt(n)};
}

struct CheckResult {
  bool ok = true;
  std::int64_t elements = 0;    ///< logical elements compared
  std::int64_t mismatches = 0;  ///< elements that failed (non-finite ones included)
  double max_abs_error = 0;     ///< over the finite elements; infinity when any value is non-finite
  double max_rel_error = 0;     ///< over the elements whose reference is non-zero
  std::string report;           ///< a summary line, then one line per reported mismatch
};

namespace detail {

inline std::string format_index(const std::vector<Index>& index) {
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

inline std::string format_value(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.9g", v);
  return buffer;
}

/// Walks both tensors by logical index; `compare(result, reference, o, r)` returns "" when the
/// pair passes, else the reason. Fills everything of CheckResult; `report` gets the mismatch
/// lines only (add_summary puts the summary in front).
template <typename T, typename R, typename Compare>
CheckResult compare_tensors(const Tensor<T>& result, const Tensor<R>& reference, int max_reported, Compare&& compare) {
  CheckResult out;
  if (result.lengths() != reference.lengths()) {
    out.ok = false;
    out.report = "FAILED: lengths differ: result " + format_index(result.lengths()) + ", reference " +
                 format_index(reference.lengths());
    return out;
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  result.for_each_index([&](const std::vector<Index>& index) {
    ++out.elements;
    const double o = type_convert<double>(result(index));
    const double r = type_convert<double>(reference(index));
    std::string why;
    if (std::isfinite(o) && std::isfinite(r)) {
      const double abs_error = std::fabs(o - r);
      out.max_abs_error = std::max(out.max_abs_error, abs_error);
      if (r != 0) out.max_rel_error = std::max(out.max_rel_error, abs_error / std::fabs(r));
      why = compare(result(index), reference(index), o, r);
    } else {
      out.max_abs_error = out.max_rel_error = kInf;
      why = std::isfinite(o) ? "reference is not finite" : "result is not finite";
    }
    if (why.empty()) return;
    if (out.mismatches++ < max_reported) {
      out.report += "\n  " + format_index(index) + ": result " + format_value(o) + ", reference " + format_value(r) +
                    " (" + why + ")";
    }
  });
  out.ok = out.mismatches == 0;
  return out;
}

/// Puts "ok: …" or "FAILED: …" with the criterion and the largest errors before the mismatch lines.
inline void add_summary(CheckResult* c, const std::string& criterion, int max_reported) {
  if (!c->ok && c->mismatches == 0) return;  // the lengths differ: the report says so already
  std::string head =
      c->ok ? "ok: " + std::to_string(c->elements) + " elements"
            : "FAILED: " + std::to_string(c->mismatches) + " of " + std::to_string(c->elements) + " elements mismatch";
  head += " (" + criterion + "), max abs error " + format_value(c->max_abs_error) + ", max rel error " +
          format_value(c->max_rel_error);
  const std::int64_t shown = std::min<std::int64_t>(c->mismatches, std::max(max_reported, 0));
  if (shown < c->mismatches) head += "; first " + std::to_string(shown) + " listed";
  c->report = head + c->report;
}

}  // namespace detail

/// Compares every logical element: |o − r| ≤ atol + rtol·|r|. Fails on any non-finite value
/// (a NaN from an unwritten, poisoned output must never pass) and when the lengths differ.
/// Reports the first `max_reported` mismatches with their logical multi-indices.
template <typename T, typename R>
CheckResult check_close(const Tensor<T>& result, const Tensor<R>& reference, Tolerance tol, int max_reported = 8) {
  CheckResult c = detail::compare_tensors(result, reference, max_reported, [&](const T&, const R&, double o, double r) {
    const double abs_error = std::fabs(o - r);
    return abs_error <= tol.atol + tol.rtol * std::fabs(r) ? std::string()
                                                           : "abs error " + detail::format_value(abs_error);
  });
  detail::add_summary(&c, "rtol " + detail::format_value(tol.rtol) + ", atol " + detail::format_value(tol.atol),
                      max_reported);
  return c;
}

/// Exact comparison, for integer-valued data where every sum is representable. Values are
/// compared as numbers (in double, which holds every value of the storage types exactly); when
/// both tensors hold the same 16-bit type their bits are compared, so that a −0 where the
/// reference has +0 is reported too. Non-finite values fail here as well.
template <typename T, typename R>
CheckResult check_equal(const Tensor<T>& result, const Tensor<R>& reference, int max_reported = 8) {
  CheckResult c = detail::compare_tensors(result, reference, max_reported,
                                          [](const T& a, const R& b, double o, double r) -> std::string {
                                            if constexpr (std::is_same_v<T, R> && is_16bit_float_v<T>) {
                                              if (a.bits != b.bits) return "bits differ";
                                            } else if constexpr (std::is_same_v<T, R> && std::is_integral_v<T>) {
                                              // 64-bit integers beyond 2^53 are not distinct as doubles.
                                              if (a != b) return "not equal";
                                            } else {
                                              (void)a;
                                              (void)b;
                                            }
                                            return o == r ? std::string() : "not equal";
                                          });
  detail::add_summary(&c, "exact", max_reported);
  return c;
}

}  // namespace hipgrad::host
