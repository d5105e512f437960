/// @file problem.hpp
/// @brief The GEMM problem C[M, N] = alpha·A[M, K]·B[K, N] + beta·C: sizes, the layout and leading
///        dimension of each matrix, alpha/beta, the TF32 opt-in, the K split and the algorithm,
///        with validation.
///
/// Host-only. Row-major X[r, c] lies at x[r·ld + c], column-major at x[r + c·ld]; ld = 0 means
/// packed (the contiguous dimension's length). The GEMM is the test vehicle of the shared tile
/// GEMM primitive and a plain op of its own.
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/status.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::gemm {

enum class Layout { kRowMajor, kColMajor };

inline const char* layout_name(Layout l) { return l == Layout::kRowMajor ? "row" : "col"; }
/// One letter per matrix, as BLAS does from the row-major point of view: 'n' row-major, 't' column-major.
inline char layout_letter(Layout l) { return l == Layout::kRowMajor ? 'n' : 't'; }

/// Which mainloop a GEMM runs.
enum class Algorithm {
  /// The op's own choice for the device and the problem: kTma where it can run, else kMatrix,
  /// else kSimt.
  kAuto,
  /// The warp-specialised, persistent TMA kernel of sm_90a (an sm_90a build on an sm_90 GPU,
  /// fp16/bf16 or fp32 with allow_tf32, A and B 16-byte aligned, a configuration of at most two
  /// consumer warpgroups whose tiles wgmma reads in these layouts).
  kTma,
  /// The same warp-specialised kernel with a producer warpgroup that copies 16-byte vectors by
  /// cp.async through the operand loaders (the path of gathered operands, such as a
  /// convolution's; here the dense matrices read that way): the conditions of kMatrix, on an
  /// sm_90a build and GPU, for the configurations kTma runs. Only where forced, for now: it
  /// runs below kMatrix's speed.
  kGather,
  /// The cp.async matrix mainloops: wgmma on sm_90a, mma.sync on NVIDIA sm_80+, MFMA on
  /// gfx90a/gfx94x (fp16/bf16 or fp32 with allow_tf32, A and B 16-byte aligned: pointers and
  /// leading dimensions).
  kMatrix,
  /// The FMA mainloop: any device, data type, alignment and stride; exact fp32.
  kSimt,
};

inline const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kTma: return "tma";
    case Algorithm::kGather: return "gather";
    case Algorithm::kMatrix: return "matrix";
    case Algorithm::kSimt: return "simt";
  }
  return "unknown";
}

/// One matrix of the problem: rows × cols in `layout` with leading dimension `ld`.
struct MatrixDesc {
  Index rows = 0, cols = 0;
  Layout layout = Layout::kRowMajor;
  Index ld = 0;

  Index contiguous_length() const { return layout == Layout::kRowMajor ? cols : rows; }
  Index leading_dimension() const { return ld != 0 ? ld : contiguous_length(); }
  Index row_stride() const { return layout == Layout::kRowMajor ? leading_dimension() : 1; }
  Index col_stride() const { return layout == Layout::kRowMajor ? 1 : leading_dimension(); }
  /// Elements of memory the matrix spans (0 when empty).
  Index element_space() const {
    if (rows <= 0 || cols <= 0) return 0;
    return (rows - 1) * row_stride() + (cols - 1) * col_stride() + 1;
  }
};

struct Problem {
  Index m = 0, n = 0, k = 0;
  Layout a_layout = Layout::kRowMajor, b_layout = Layout::kRowMajor, c_layout = Layout::kRowMajor;
  Index lda = 0, ldb = 0, ldc = 0;  ///< 0: packed
  float alpha = 1.0f;
  float beta = 0.0f;        ///< 0: C is only written (its old contents are never read)
  bool allow_tf32 = false;  ///< fp32 only: let the matrix units round inputs to TF32 (NVIDIA) / use MFMA (AMD)
  int split_k = 1;          ///< K slices computed by separate blocks, summed in a fixed order
  Algorithm algorithm = Algorithm::kAuto;  ///< else forced: not_supported where it cannot run

  static Problem packed(Index m, Index n, Index k, Layout a = Layout::kRowMajor, Layout b = Layout::kRowMajor,
                        Layout c = Layout::kRowMajor) {
    Problem p;
    p.m = m, p.n = n, p.k = k;
    p.a_layout = a, p.b_layout = b, p.c_layout = c;
    return p;
  }

  MatrixDesc a() const { return {m, k, a_layout, lda}; }
  MatrixDesc b() const { return {k, n, b_layout, ldb}; }
  MatrixDesc c() const { return {m, n, c_layout, ldc}; }
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }

  /// "gemm 67x131x257 nnn" for messages (" algorithm=simt" appended when one is forced).
  std::string to_string() const {
    return "gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
           layout_letter(a_layout) + layout_letter(b_layout) + layout_letter(c_layout) +
           (algorithm == Algorithm::kAuto ? "" : std::string(" algorithm=") + algorithm_name(algorithm));
  }

  Status validate() const {
    if (m <= 0 || n <= 0 || k <= 0) {
      return Status::invalid_argument("M, N and K must be positive, got M=" + std::to_string(m) +
                                      " N=" + std::to_string(n) + " K=" + std::to_string(k));
    }
    constexpr Index kMaxExtent = 2147483647;  // tile coordinates are 32-bit
    if (m > kMaxExtent || n > kMaxExtent || k > kMaxExtent) {
      return Status::not_supported("M, N and K must each be below 2^31");
    }
    HIPGRAD_RETURN_IF_ERROR(check_ld(a(), "A", "lda"));
    HIPGRAD_RETURN_IF_ERROR(check_ld(b(), "B", "ldb"));
    HIPGRAD_RETURN_IF_ERROR(check_ld(c(), "C", "ldc"));
    if (split_k < 1) return Status::invalid_argument("split_k must be at least 1, got " + std::to_string(split_k));
    if (split_k > k) {
      return Status::invalid_argument("split_k=" + std::to_string(split_k) + " exceeds K=" + std::to_string(k));
    }
    if (static_cast<int>(algorithm) < static_cast<int>(Algorithm::kAuto) ||
        static_cast<int>(algorithm) > static_cast<int>(Algorithm::kSimt)) {
      return Status::invalid_argument("algorithm " + std::to_string(static_cast<int>(algorithm)) +
                                      " is not a gemm::Algorithm");
    }
    return Status::ok();
  }

 private:
  static Status check_ld(const MatrixDesc& d, const char* matrix, const char* name) {
    if (d.ld < 0) return Status::invalid_argument(std::string(name) + " must not be negative");
    if (d.ld != 0 && d.ld < d.contiguous_length()) {
      return Status::invalid_argument(std::string(name) + "=" + std::to_string(d.ld) + " is smaller than the " +
                                      (d.layout == Layout::kRowMajor ? "columns" : "rows") + " of " + matrix + " (" +
                                      std::to_string(d.contiguous_length()) + ")");
    }
    return Status::ok();
  }
};

}  // namespace hipgrad::gemm
