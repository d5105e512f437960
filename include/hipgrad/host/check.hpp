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

/// The tolerance for results stored as T that come out of sums of `accumulation_length` terms
/// (the reduction length of a GroupNorm group, C·filter size of a convolution; 1 for elementwise).
///
/// Two error sources are budgeted:
///  * the final rounding to T, plus a few ulps for the approximate fp32 transcendentals of fused
///    ops (rsqrt, exp): a fixed relative term, about two unit roundoffs of T for fp16 (2^-11) and
///    bf16 (2^-8), 1e-5 for fp32 and 1e-12 for double;
///  * the fp32 accumulation (double for double results). Rounding errors of a sum behave like a
///    random walk, so their relative size grows like sqrt(n)·u; tree-shaped reductions grow only
///    like log2(n)·u, which sqrt(n) bounds from n = 16 on. The worst-case bound n·u is far too
///    pessimistic for data from fill(). With cancellation the result can be much smaller than the
///    partial sums, whose size is about sqrt(n) for zero-mean terms of order one, so the absolute
///    term grows like n·u. That assumes |terms| of order one (what fill() produces); callers with
///    larger data scale atol with it.
/// Real indexing or synchronisation bugs produce errors of the order of the terms themselves,
/// far above these bounds.
template <typename T>
Tolerance default_tolerance(std::int64_t accumulation_length = 1) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || is_16bit_float_v<T>,
                "default_tolerance: T must be float, double, half or bfloat16");
  double storage = 0;
  if constexpr (std::is_same_v<T, float>) storage = 1e-5;
  else if constexpr (std::is_same_v<T, half>) storage = 1e-3;
  else if constexpr (std::is_same_v<T, bfloat16>) storage = 8e-3;
  else storage = 1e-12;
  // Four unit roundoffs of the accumulation type: slack for the few roundings per step (an FMA,
  // a conversion, the merge of partial sums).
  const double accumulation = std::is_same_v<T, double> ? 4 * 0x1.0p-53 : 4 * 0x1.0p-24;
  const double n = static_cast<double>(std::max<std::int64_t>(accumulation_length, 1));
  return Tolerance{storage + accumulation * std::sqrt(n), storage + accumulation * n};
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
CheckResult compare_tensors(const Tensor<T>& result, const Tensor<R>& reference, int max_reported,
                            Compare&& compare) {
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
      out.report += "\n  " + format_index(index) + ": result " + format_value(o) + ", reference " +
                    format_value(r) + " (" + why + ")";
    }
  });
  out.ok = out.mismatches == 0;
  return out;
}

/// Puts "ok: …" or "FAILED: …" with the criterion and the largest errors before the mismatch lines.
inline void add_summary(CheckResult* c, const std::string& criterion, int max_reported) {
  if (!c->ok && c->mismatches == 0) return;  // the lengths differ: the report says so already
  std::string head = c->ok ? "ok: " + std::to_string(c->elements) + " elements"
                           : "FAILED: " + std::to_string(c->mismatches) + " of " + std::to_string(c->elements) +
                                 " elements mismatch";
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
