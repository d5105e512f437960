/// @file test_gemm.cpp
/// @brief The GEMM op on the GPU against the CPU reference: fp32 (exact and TF32), fp16, bf16;
///        all A × B layouts with row-major C, column-major and padded C; odd sizes (1, primes,
///        non-multiples of every tile, K = 1, a few full tiles plus remainders); alpha/beta;
///        split-K; unaligned A/B on the SIMT path; integer inits compared exactly and decimal
///        inits within K-dependent tolerances; outputs and workspace poisoned (NaN) before every
///        run, every element around the matrices (gaps, one more row or column, a tail) poisoned
///        too, and C's checked byte for byte to be untouched; the TMA kernel, the cp.async
///        mainloop, more tiles than multiprocessors; each forced algorithm runs the path its name
///        says, and kAuto's name is the first forced one that can run. CPU-only: negative
///        can_implement cases (forced algorithms that cannot run included) and the reference.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/poison.hpp"
#include "gemm/gemm_test_kinds.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/gemm.hpp"
#include "hipgrad/ops/gemm/gemm.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using namespace hipgrad::host;
namespace hg = hipgrad::gemm;
using gemm_test::decimal_tolerance;
using gemm_test::is_exact_fp32;
using gemm_test::Kinds;
using hg::Algorithm;
using hg::Layout;

constexpr Layout kRow = Layout::kRowMajor;
constexpr Layout kCol = Layout::kColMajor;

struct Size {
  Index m, n, k;
};

/// 1, K = 1, primes, non-multiples of every tile size (8, 16, 32, 128, 256), full tiles plus remainders.
std::vector<Size> odd_sizes() {
  return {{1, 1, 1},      {1, 1, 37},      {7, 5, 1},    {67, 131, 257}, {129, 257, 33},  {255, 253, 67},
          {128, 256, 64}, {300, 520, 100}, {1, 300, 77}, {301, 1, 45},   {130, 260, 1000}};
}

struct LayoutCase {
  Layout a, b, c;
  bool padded;  ///< leading dimensions rounded up to a multiple of 8 (plus 8): the 16-byte path
};

/// Every A × B layout with row-major C, and column-major C for row-major A and B.
std::vector<LayoutCase> layout_cases() {
  return {{kRow, kRow, kRow, true},
          {kRow, kCol, kRow, true},
          {kCol, kRow, kRow, true},
          {kCol, kCol, kRow, true},
          {kRow, kRow, kCol, true}};
}

Index padded_ld(Index contiguous) { return (contiguous + 7) / 8 * 8 + 8; }

hg::Problem make_problem(Size s, const LayoutCase& l, bool tf32) {
  hg::Problem p = hg::Problem::packed(s.m, s.n, s.k, l.a, l.b, l.c);
  if (l.padded) {
    p.lda = padded_ld(p.a().contiguous_length());
    p.ldb = padded_ld(p.b().contiguous_length());
    p.ldc = padded_ld(p.c().contiguous_length()) + 1;  // C has no alignment needs
  }
  p.allow_tf32 = tf32;
  return p;
}

template <typename T>
Tensor<T> matrix_tensor(const hg::MatrixDesc& d) {
  return Tensor<T>({d.rows, d.cols}, {d.row_stride(), d.col_stride()});
}

/// The bits of a NaN whose payload no kernel computes, for every element around the matrices: a
/// stray read of one that reaches a result makes it NaN (NaN·0 too), and C's are checked to be
/// these very bytes after the run.
template <typename T>
T outside_poison() {
  return hipgrad::test::poison_nan<T>();
}

/// A matrix whose storage (and so its device buffer) runs past the last element: every row
/// (column) to its full leading dimension, one more, and 64 bytes, so that a kernel running
/// over any edge, the last one included, lands in the poison and inside the allocation. Every
/// element outside the matrix holds outside_poison.
template <typename T>
Tensor<T> guarded_matrix(const hg::MatrixDesc& d) {
  Tensor<T> t = matrix_tensor<T>(d);
  const Index lines = d.layout == Layout::kRowMajor ? d.rows : d.cols;
  const Index space = (lines + 1) * d.leading_dimension() + 64 / static_cast<Index>(sizeof(T));
  t.storage().assign(static_cast<std::size_t>(space), outside_poison<T>());
  return t;
}

/// Which storage elements of `t` are elements of the matrix.
template <typename T>
std::vector<bool> inside_mask(const Tensor<T>& t) {
  std::vector<bool> inside(t.storage().size(), false);
  t.for_each_index([&](const std::vector<Index>& i) { inside[static_cast<std::size_t>(t.offset(i))] = true; });
  return inside;
}

/// The storage elements of C outside the matrix whose bytes are no longer outside_poison's, the
/// first few listed with their line (row or column) and position in it; empty when none.
template <typename T>
std::string written_outside(const Tensor<T>& c, const hg::MatrixDesc& d) {
  const std::vector<bool> inside = inside_mask(c);
  const T poison = outside_poison<T>();
  std::string report;
  std::size_t written = 0;
  for (std::size_t i = 0; i < inside.size(); ++i) {
    if (inside[i] || std::memcmp(&c.storage()[i], &poison, sizeof(T)) == 0) continue;
    if (written++ < 8) {
      const Index ld = d.leading_dimension(), e = static_cast<Index>(i);
      report += "\n  storage element " + std::to_string(e) + " (" +
                (d.layout == Layout::kRowMajor ? "row " : "column ") + std::to_string(e / ld) + ", position " +
                std::to_string(e % ld) + ")";
    }
  }
  return written == 0 ? std::string() : std::to_string(written) + " elements outside C written:" + report;
}

/// Copies a guarded matrix to the device `offset` elements past the (256-byte aligned) start of
/// `buffer`, the elements before it poisoned too; returns where the matrix starts there.
template <typename T>
const T* upload(const Tensor<T>& t, Index offset, DeviceBuffer<T>* buffer, Status* status) {
  std::vector<T> staged(static_cast<std::size_t>(offset), outside_poison<T>());
  staged.insert(staged.end(), t.storage().begin(), t.storage().end());
  *status = buffer->allocate(staged.size());
  if (status->is_ok()) *status = buffer->copy_from_host(staged.data(), staged.size());
  return status->is_ok() ? buffer->data() + offset : nullptr;
}

/// What check_gemm requires of the path run() takes.
enum class ExpectPath { kEither, kMatrix, kSimt };

/// Whether an op's name says it runs the SIMT mainloop ("..._simt_128x128x8_t256").
bool names_simt(const std::string& name) { return name.find("_simt_") != std::string::npos; }

/// Where A and B start: this many elements past a 16-byte boundary.
struct OperandOffsets {
  Index a = 0, b = 0;
};

/// Runs `p` once on the GPU (on the path p.algorithm asks for) and compares C with the reference,
/// and C's storage outside the matrix with its poison.
template <typename T, typename Cfg = hg::DefaultConfigFor<T>>
void check_gemm(const hg::Problem& p, InitMethod init, ExpectPath expect, OperandOffsets offsets = {}) {
  using Op = hg::Gemm<T, Cfg>;
  SCOPED_TRACE(p.to_string() + " lda " + std::to_string(p.a().leading_dimension()) + " ldb " +
               std::to_string(p.b().leading_dimension()) + " ldc " + std::to_string(p.c().leading_dimension()) +
               " offsets " + std::to_string(offsets.a) + "/" + std::to_string(offsets.b) + " alpha " +
               std::to_string(p.alpha) + " beta " + std::to_string(p.beta) + " split_k " + std::to_string(p.split_k) +
               (p.allow_tf32 ? " tf32 " : " ") + init_method_name(init));
  Tensor<T> a = guarded_matrix<T>(p.a()), b = guarded_matrix<T>(p.b()), c = guarded_matrix<T>(p.c());
  fill(a, init, 1);
  fill(b, init, 2);
  if (p.beta != 0) {
    fill(c, init, 3);
  } else {
    // All-ones NaN, unlike the poison around C: must never be read, and every element written.
    c.for_each_index([&](const std::vector<Index>& i) { std::memset(&c(i), 0xff, sizeof(T)); });
  }
  const Tensor<double> expected = reference::gemm(a, b, p.alpha, p.beta, c);

  DeviceBuffer<T> da, db, dc;
  DeviceBuffer<unsigned char> workspace;
  Status uploaded;
  const T* a_start = upload(a, offsets.a, &da, &uploaded);
  ASSERT_TRUE(uploaded.is_ok()) << uploaded.to_string();
  const T* b_start = upload(b, offsets.b, &db, &uploaded);
  ASSERT_TRUE(uploaded.is_ok()) << uploaded.to_string();
  // C from the start of its buffer, which its storage covers whole: everything copied back is checked.
  ASSERT_TRUE(dc.allocate(c.storage().size()).is_ok());
  ASSERT_TRUE(dc.copy_from(c).is_ok());
  ASSERT_TRUE(workspace.allocate(Op::workspace_size(p)).is_ok());
  ASSERT_TRUE(workspace.fill_bytes(0xff).is_ok());

  const typename Op::Args args{a_start, b_start, dc.data()};
  ASSERT_TRUE(Op::can_implement(p, args).is_ok()) << Op::can_implement(p, args).to_string();
  if (expect == ExpectPath::kMatrix) EXPECT_FALSE(names_simt(Op::name(p, args))) << Op::name(p, args);
  if (expect == ExpectPath::kSimt) ASSERT_TRUE(names_simt(Op::name(p, args))) << Op::name(p, args);
  const Status s = Op::run(p, args, workspace.data(), workspace.bytes(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  ASSERT_TRUE(dc.copy_to(c).is_ok());

  const std::string outside = written_outside(c, p.c());
  EXPECT_TRUE(outside.empty()) << Op::name(p, args) << ": " << outside;

  if (init == InitMethod::kIntegers) {
    // Integer products and sums are exact in fp32 (and TF32), so C is the reference rounded once.
    Tensor<T> rounded = matrix_tensor<T>(p.c());
    rounded.for_each_index([&](const std::vector<Index>& i) { rounded(i) = hipgrad::type_convert<T>(expected(i)); });
    const CheckResult r = check_equal(c, rounded);
    EXPECT_TRUE(r.ok) << Op::name(p, args) << ": " << r.report;
  } else {
    const CheckResult r = check_close(c, expected, decimal_tolerance<T>(p.k, p.allow_tf32));
    EXPECT_TRUE(r.ok) << Op::name(p, args) << ": " << r.report;
  }
}

/// kMatrix where kAuto must take a matrix path (aligned operands on a device with matrix atoms).
template <typename T>
ExpectPath matrix_path_expected(const hg::Problem& p, bool padded) {
  const hipgrad::DeviceInfo& device = hipgrad::current_device_info();
  if (!padded || !device.known) return ExpectPath::kEither;
  const bool matrix = (!std::is_same_v<T, float> || p.allow_tf32) && hg::device_has_matrix_atoms(device.device);
  return matrix ? ExpectPath::kMatrix : ExpectPath::kEither;
}

/// Whether a forced kMatrix of configuration Cfg must run on this device: it has matrix atoms
/// and the shared memory the configuration's stages take.
template <typename T, typename Cfg>
bool matrix_config_fits() {
  const hipgrad::DeviceInfo& device = hipgrad::current_device_info();
  return device.known && hg::device_has_matrix_atoms(device.device) &&
         static_cast<std::size_t>(Cfg::template shared_bytes<T>()) <= device.shared_per_block_opt_in;
}

template <typename K>
class GemmTest : public ::testing::Test {};
TYPED_TEST_SUITE(GemmTest, Kinds);

TYPED_TEST(GemmTest, OddSizesEveryLayout) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  for (const Size& s : odd_sizes()) {
    for (const LayoutCase& l : layout_cases()) {
      const hg::Problem p = make_problem(s, l, TypeParam::kAllowTf32);
      for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
        check_gemm<T>(p, init, matrix_path_expected<T>(p, l.padded));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TYPED_TEST(GemmTest, PackedLeadingDimensions) {  // mostly unaligned: the SIMT path for 16-bit data
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  for (const Size& s : {Size{67, 131, 257}, Size{33, 17, 5}, Size{200, 300, 64}}) {
    for (const LayoutCase& l : {LayoutCase{kRow, kRow, kRow, false}, LayoutCase{kCol, kCol, kCol, false}}) {
      check_gemm<T>(make_problem(s, l, TypeParam::kAllowTf32), InitMethod::kDecimals, ExpectPath::kEither);
    }
  }
}

/// A and B that the matrix path cannot take (its 16-byte copies need 16-byte aligned pointers
/// and leading dimensions): a pointer one element or 8 bytes (half a 16-byte vector: the SIMT
/// path's 4-element vectors of 16-bit data still aligned) past a 16-byte boundary, or a leading
/// dimension one element longer than the aligned padding. Every case must run the SIMT path.
struct UnalignedCase {
  LayoutCase layouts;
  OperandOffsets offsets;
  Index lda_extra, ldb_extra;
};

TYPED_TEST(GemmTest, UnalignedOperandsRunTheSimtPath) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  constexpr Index kHalfVector = 8 / sizeof(T);
  const UnalignedCase cases[] = {
      {{kRow, kRow, kRow, true}, {1, 0}, 0, 0},                      // A's pointer
      {{kCol, kCol, kRow, true}, {0, 1}, 0, 0},                      // B's pointer
      {{kRow, kCol, kCol, true}, {1, 1}, 0, 0},                      // both
      {{kCol, kRow, kRow, true}, {kHalfVector, kHalfVector}, 0, 0},  // both 8 bytes off
      {{kRow, kRow, kRow, true}, {}, 1, 0},                          // lda
      {{kCol, kCol, kCol, true}, {}, 0, 1},                          // ldb
  };
  for (const Size& s : {Size{67, 131, 257}, Size{33, 17, 5}, Size{1, 1, 1}, Size{130, 9, 41}}) {
    for (const UnalignedCase& u : cases) {
      hg::Problem p = make_problem(s, u.layouts, TypeParam::kAllowTf32);
      p.lda += u.lda_extra;
      p.ldb += u.ldb_extra;
      for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
        check_gemm<T>(p, init, ExpectPath::kSimt, u.offsets);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TYPED_TEST(GemmTest, AlphaBetaAccumulateIntoC) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  for (const Size& s : {Size{67, 131, 257}, Size{130, 260, 40}}) {
    for (const LayoutCase& l : {LayoutCase{kRow, kRow, kRow, true}, LayoutCase{kCol, kRow, kCol, true}}) {
      hg::Problem p = make_problem(s, l, TypeParam::kAllowTf32);
      p.alpha = 2.0f, p.beta = -1.0f;
      check_gemm<T>(p, InitMethod::kIntegers, matrix_path_expected<T>(p, true));
      p.alpha = 0.5f, p.beta = 0.25f;
      check_gemm<T>(p, InitMethod::kDecimals, matrix_path_expected<T>(p, true));
    }
  }
}

/// K = 1000 leaves every split non-empty, the last one shorter (splits = ceil(K tiles / tiles per
/// split): 7 asked of 16 tiles of 64 give 6 splits, the last tile 15 alone, k 960..999), so
/// with integer data a reduction that skipped or repeated a split, the last one included,
/// changes C exactly; a split the reduction reads but no block wrote is NaN (the workspace).
TYPED_TEST(GemmTest, SplitKPartialsAddUpInAFixedOrder) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  for (int split : {2, 3, 7}) {
    for (const LayoutCase& l : {LayoutCase{kRow, kRow, kRow, true}, LayoutCase{kCol, kCol, kRow, false}}) {
      hg::Problem p = make_problem(Size{129, 257, 1000}, l, TypeParam::kAllowTf32);
      p.split_k = split;
      p.beta = 1.0f;
      check_gemm<T>(p, InitMethod::kIntegers, matrix_path_expected<T>(p, l.padded));
      check_gemm<T>(p, InitMethod::kDecimals, matrix_path_expected<T>(p, l.padded));
    }
  }
}

/// A second tile configuration per type: for fp16/bf16 two warpgroups of 128 × 128 rows (two
/// 64-row wgmmas each, N = 128), for TF32 one warpgroup of a 128 × 128 tile (with B row-major the
/// swapped Cᵀ product).
template <typename T>
using SecondConfig =
    std::conditional_t<std::is_same_v<T, float>, hg::Config<128, 128, 32, 2, 2, 4>, hg::Config<256, 128, 64, 4, 2, 4>>;

TYPED_TEST(GemmTest, SecondTileConfigEveryLayout) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  if (is_exact_fp32<TypeParam>()) GTEST_SKIP() << "exact fp32 has one (SIMT) configuration";
  if constexpr (!hg::fits_build_targets<SecondConfig<T>, T>()) {
    GTEST_SKIP() << "the second configuration needs more shared memory than this build's targets have";
  } else {
    for (const Size& s : {Size{67, 131, 257}, Size{300, 260, 200}, Size{1, 1, 1}}) {
      for (const LayoutCase& l : layout_cases()) {
        if (!l.padded) continue;
        const hg::Problem p = make_problem(s, l, TypeParam::kAllowTf32);
        for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
          check_gemm<T, SecondConfig<T>>(p, init, matrix_path_expected<T>(p, true));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

/// The cp.async wgmma mainloop (the one operand loaders without TMA take on sm_90a; kAuto takes
/// the TMA kernel wherever it can, so the test forces kMatrix) in its own three-warpgroup
/// configuration; elsewhere the same configuration on mma.sync or MFMA.
TYPED_TEST(GemmTest, CpAsyncMainloopEveryLayout) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  if (is_exact_fp32<TypeParam>()) GTEST_SKIP() << "exact fp32 has one (SIMT) configuration";
  if (!matrix_config_fits<T, hg::CpAsyncWgmmaConfigFor<T>>())
    GTEST_SKIP() << "no matrix atoms or too little shared memory";
  for (const Size& s : {Size{67, 131, 257}, Size{300, 260, 200}, Size{1, 1, 1}}) {
    for (const LayoutCase& l : layout_cases()) {
      hg::Problem p = make_problem(s, l, TypeParam::kAllowTf32);
      p.split_k = s.k > 200 ? 2 : 1;
      p.algorithm = Algorithm::kMatrix;
      for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
        check_gemm<T, hg::CpAsyncWgmmaConfigFor<T>>(p, init, matrix_path_expected<T>(p, true));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

/// More output tiles (and K splits) than an H100 has multiprocessors: the persistent TMA kernel's
/// blocks each walk several work items, the stage ring and its barrier phases carrying over from
/// one item to the next (17 × 10 tiles of 128 × 256, 9 × 19 of 256 × 128; × 3 with split-K).
TYPED_TEST(GemmTest, PersistentBlocksWalkSeveralTiles) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  if (is_exact_fp32<TypeParam>()) GTEST_SKIP() << "exact fp32 has no persistent kernel";
  for (int split : {1, 3}) {
    for (const LayoutCase& l : layout_cases()) {
      hg::Problem p = make_problem(Size{2053, 2311, 67}, l, TypeParam::kAllowTf32);
      p.split_k = split;
      check_gemm<T>(p, InitMethod::kIntegers, matrix_path_expected<T>(p, true));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  const hg::Problem p = make_problem(Size{2053, 2311, 67}, layout_cases()[0], TypeParam::kAllowTf32);
  check_gemm<T>(p, InitMethod::kDecimals, matrix_path_expected<T>(p, true));
}

/// The gather kernel (forced kGather: the TMA kernel's consumers with a cp.async producer
/// warpgroup, the path of operands without tensor maps) on every layout the TMA kernel runs:
/// edge tiles (zero-filled chunks), a single element, split-K, and more work items than
/// multiprocessors (the persistent blocks walk several, the ring's phases carrying over).
TYPED_TEST(GemmTest, GatherKernelEveryLayout) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  using Op = hg::Gemm<T>;
  if (is_exact_fp32<TypeParam>()) GTEST_SKIP() << "exact fp32 has no matrix path";
  if (!hg::device_runs_wgmma(hipgrad::current_device_info().device))
    GTEST_SKIP() << "the gather kernel needs an sm_90a build on an sm_90 GPU";
  // Aligned, disjoint fake pointers: can_implement and name never dereference them.
  const typename Op::Args fake{reinterpret_cast<const T*>(0x1000000), reinterpret_cast<const T*>(0x2000000),
                               reinterpret_cast<T*>(0x3000000)};
  int runs = 0;
  for (const Size& s : {Size{67, 131, 257}, Size{300, 260, 200}, Size{1, 1, 1}, Size{2053, 2311, 67}}) {
    for (const LayoutCase& l : layout_cases()) {
      if (!l.padded) continue;
      for (int split : {1, 3}) {
        hg::Problem p = make_problem(s, l, TypeParam::kAllowTf32);
        p.split_k = split;
        p.algorithm = Algorithm::kTma;
        const bool tma_runs = Op::can_implement(p, fake).is_ok();
        p.algorithm = Algorithm::kGather;
        const Status can = Op::can_implement(p, fake);
        // Wherever the TMA kernel runs, so does the gather kernel (the same consumers).
        if (tma_runs) EXPECT_TRUE(can.is_ok()) << p.to_string() << ": " << can.to_string();
        if (!can.is_ok()) continue;
        EXPECT_NE(Op::name(p, fake).find("_wgmma_gather_"), std::string::npos) << Op::name(p, fake);
        for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
          check_gemm<T>(p, init, ExpectPath::kMatrix);
          if (::testing::Test::HasFatalFailure()) return;
        }
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 0) << "no layout ran the gather kernel";
}

/// A forced kSimt runs the SIMT mainloop for aligned operands too, where kAuto would take a
/// matrix path.
TYPED_TEST(GemmTest, ForcedSimtRunsTheSimtPath) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  for (const Size& s : {Size{67, 131, 257}, Size{300, 260, 200}}) {
    for (const LayoutCase& l : {LayoutCase{kRow, kRow, kRow, true}, LayoutCase{kCol, kRow, kCol, true}}) {
      hg::Problem p = make_problem(s, l, TypeParam::kAllowTf32);
      p.algorithm = Algorithm::kSimt;
      p.split_k = s.k > 200 ? 3 : 1;
      for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
        check_gemm<T>(p, init, ExpectPath::kSimt);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

/// name() names the kernel of the path run() takes: each forced algorithm that can run names its
/// own kernel and computes C; kAuto's name is that of the first of kTma, kMatrix, kSimt that can
/// run; default (null) Args name the path of aligned operands. On a device running the sm_90a
/// image, kTma must run fp16, bf16 and TF32 with the default configuration.
TYPED_TEST(GemmTest, NameIsThePathRunTakes) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  using Op = hg::Gemm<T>;
  const hipgrad::DeviceInfo& device = hipgrad::current_device_info();
  for (const LayoutCase& l : layout_cases()) {
    hg::Problem p = make_problem(Size{130, 260, 100}, l, TypeParam::kAllowTf32);
    // Aligned, disjoint fake pointers: can_implement and name never dereference them.
    const typename Op::Args fake{reinterpret_cast<const T*>(0x1000000), reinterpret_cast<const T*>(0x2000000),
                                 reinterpret_cast<T*>(0x3000000)};
    std::string first_runnable;
    for (Algorithm algorithm : {Algorithm::kTma, Algorithm::kGather, Algorithm::kMatrix, Algorithm::kSimt}) {
      p.algorithm = algorithm;
      const Status can = Op::can_implement(p, fake);
      const std::string name = Op::name(p, fake);
      SCOPED_TRACE(p.to_string() + ": " + name + ": " + can.to_string());
      if (!can.is_ok()) {
        EXPECT_EQ(can.code(), hipgrad::StatusCode::kNotSupported);
        EXPECT_NE(algorithm, Algorithm::kSimt);
        continue;
      }
      if (first_runnable.empty() && algorithm != Algorithm::kGather) first_runnable = name;  // kAuto skips gather
      EXPECT_EQ(name.find("_wgmma_tma_") != std::string::npos, algorithm == Algorithm::kTma);
      EXPECT_EQ(name.find("_wgmma_gather_") != std::string::npos, algorithm == Algorithm::kGather);
      EXPECT_EQ(names_simt(name), algorithm == Algorithm::kSimt);
      EXPECT_EQ(Op::name(p), name) << "null Args must name the path of aligned operands";
      check_gemm<T>(p, InitMethod::kIntegers, algorithm == Algorithm::kSimt ? ExpectPath::kSimt : ExpectPath::kMatrix);
      if (::testing::Test::HasFatalFailure()) return;
    }
    p.algorithm = Algorithm::kAuto;
    EXPECT_EQ(Op::name(p, fake), first_runnable) << p.to_string();
    p.algorithm = Algorithm::kTma;
    const bool tma_layouts = l.a == kRow && l.b == kRow && l.c == kRow;
    if (tma_layouts && !is_exact_fp32<TypeParam>() && hg::device_runs_wgmma(device.device)) {
      EXPECT_TRUE(Op::can_implement(p, fake).is_ok()) << Op::can_implement(p, fake).to_string();
    }
  }
}

// ---- CPU only -------------------------------------------------------------------------------------

/// A fake but well-aligned device address: can_implement never dereferences pointers.
template <typename T>
T* fake_pointer(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

TEST(GemmProblem, CanImplementRejectsWithAReason) {
  using Op = hg::Gemm<hipgrad::half>;
  const Op::Args ok{fake_pointer<const hipgrad::half>(0x100000), fake_pointer<const hipgrad::half>(0x200000),
                    fake_pointer<hipgrad::half>(0x300000)};
  const hg::Problem good = hg::Problem::packed(64, 64, 64);
  ASSERT_TRUE(Op::can_implement(good, ok).is_ok()) << Op::can_implement(good, ok).to_string();

  auto rejects = [&](hg::Problem p, Op::Args a, const std::string& reason) {
    const Status s = Op::can_implement(p, a);
    EXPECT_FALSE(s.is_ok()) << p.to_string() << " should be rejected for " << reason;
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.to_string();
  };
  rejects(hg::Problem::packed(0, 4, 4), ok, "must be positive");
  rejects(hg::Problem::packed(4, 4, -1), ok, "must be positive");
  rejects(good, Op::Args{nullptr, ok.b, ok.c}, "must not be null");
  rejects(good, Op::Args{ok.a, ok.b, nullptr}, "must not be null");
  hg::Problem p = good;
  p.lda = 32;
  rejects(p, ok, "lda=32 is smaller than the columns of A");
  p = good;
  p.b_layout = kCol;
  p.ldb = 10;
  rejects(p, ok, "ldb=10 is smaller than the rows of B");
  p = good;
  p.ldc = -1;
  rejects(p, ok, "ldc must not be negative");
  p = good;
  p.allow_tf32 = true;
  rejects(p, ok, "allow_tf32 applies to fp32 only");
  p = good;
  p.split_k = 0;
  rejects(p, ok, "split_k must be at least 1");
  p.split_k = 65;
  rejects(p, ok, "exceeds K=64");
  rejects(good, Op::Args{ok.a, ok.b, fake_pointer<hipgrad::half>(0x100000 + 64)}, "C overlaps A");
  // A pointer off its element's alignment would fault the GPU: refused by name.
  rejects(good, Op::Args{fake_pointer<const hipgrad::half>(0x100001), ok.b, ok.c}, "A is not aligned to its 2-byte");
  rejects(good, Op::Args{ok.a, ok.b, fake_pointer<hipgrad::half>(0x300003)}, "C is not aligned to its 2-byte");
  EXPECT_EQ(Op::workspace_size(good), 0u);
  p = good;
  p.split_k = 4;
  EXPECT_EQ(Op::workspace_size(p), 4u * 64 * 64 * sizeof(float));
  EXPECT_EQ(Op::workspace_size(hg::Problem::packed(0, 1, 1)), 0u);
}

/// A forced algorithm that cannot run is refused with the reason (never a silent fallback); the
/// reasons about the data and the operands come before any about the device, so these hold with
/// or without a GPU.
TEST(GemmProblem, ForcedAlgorithmThatCannotRunIsNotSupported) {
  using Op = hg::Gemm<hipgrad::half>;
  const Op::Args ok{fake_pointer<const hipgrad::half>(0x100000), fake_pointer<const hipgrad::half>(0x200000),
                    fake_pointer<hipgrad::half>(0x300000)};
  const Op::Args unaligned{fake_pointer<const hipgrad::half>(0x100002), ok.b, ok.c};
  hg::Problem p = hg::Problem::packed(64, 64, 64);

  auto refuses = [](const Status& s, const std::string& reason) {
    EXPECT_EQ(s.code(), hipgrad::StatusCode::kNotSupported) << s.to_string();
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.to_string();
  };
  p.algorithm = Algorithm::kMatrix;
  refuses(Op::can_implement(p, unaligned), "16-byte aligned");
  refuses(Op::run(p, unaligned, nullptr, 0, nullptr), "16-byte aligned");
  p.lda = 65;  // a leading dimension of 130 bytes
  refuses(Op::can_implement(p, ok), "16-byte aligned");
  p.lda = 0;
  p.algorithm = Algorithm::kTma;
  refuses(Op::can_implement(p, unaligned), "algorithm tma cannot run");
  refuses(Op::run(p, unaligned, nullptr, 0, nullptr), "algorithm tma cannot run");

  // fp32 without allow_tf32 has no matrix path.
  using Op32 = hg::Gemm<float>;
  const Op32::Args ok32{fake_pointer<const float>(0x100000), fake_pointer<const float>(0x200000),
                        fake_pointer<float>(0x300000)};
  p.algorithm = Algorithm::kMatrix;
  refuses(Op32::can_implement(p, ok32), "allow_tf32");
  p.algorithm = Algorithm::kTma;
  refuses(Op32::can_implement(p, ok32), "algorithm tma cannot run");

  // TF32 on 16-bit data is a wrong argument whatever the algorithm.
  p.allow_tf32 = true;
  const Status tf32 = Op::can_implement(p, ok);
  EXPECT_EQ(tf32.code(), hipgrad::StatusCode::kInvalidArgument) << tf32.to_string();
  EXPECT_NE(tf32.message().find("allow_tf32 applies to fp32 only"), std::string::npos) << tf32.to_string();
  p.allow_tf32 = false;

  // SIMT runs anything, and says so.
  p.algorithm = Algorithm::kSimt;
  EXPECT_TRUE(Op::can_implement(p, unaligned).is_ok()) << Op::can_implement(p, unaligned).to_string();
  EXPECT_TRUE(Op32::can_implement(p, ok32).is_ok()) << Op32::can_implement(p, ok32).to_string();
  EXPECT_TRUE(names_simt(Op::name(p))) << Op::name(p);
  EXPECT_TRUE(names_simt(Op::name(p, unaligned))) << Op::name(p, unaligned);

  p.algorithm = static_cast<Algorithm>(7);
  const Status unknown = Op::can_implement(p, ok);
  EXPECT_EQ(unknown.code(), hipgrad::StatusCode::kInvalidArgument) << unknown.to_string();
  EXPECT_STREQ(hg::algorithm_name(Algorithm::kMatrix), "matrix");
}

/// Every output tile of every sub-problem is exactly one work item, in order, with empty
/// sub-problems (M or N of 0) passed over; K plays no part (a K = 0 sub-problem has its tiles).
TEST(GroupedTiles, EveryTileOfEverySubProblemIsOneItem) {
  std::mt19937 random(20261127);
  std::uniform_int_distribution<int> extent(0, 700), count(1, 40);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<hg::GroupedExtent> extents(static_cast<std::size_t>(count(random)));
    for (hg::GroupedExtent& e : extents) e = {extent(random) % 5 == 0 ? 0 : extent(random), extent(random)};
    if (trial == 0) extents = {{0, 5}, {1, 1}, {0, 0}, {129, 257}, {3, 0}, {128, 256}};
    const int block_m = trial % 2 ? 128 : 256, block_n = trial % 3 ? 256 : 64;
    const std::vector<long long> starts = hg::grouped_tile_starts(extents, block_m, block_n);
    ASSERT_EQ(starts.size(), extents.size() + 1);
    long long item = 0;
    for (std::size_t g = 0; g < extents.size(); ++g) {
      const long long tiles = hipgrad::ceil_div(extents[g].m, static_cast<long long>(block_m)) *
                              hipgrad::ceil_div(extents[g].n, static_cast<long long>(block_n));
      for (long long t = 0; t < tiles; ++t, ++item) {
        const hg::GroupedItem found = hg::find_grouped_item(starts.data(), static_cast<int>(extents.size()), item);
        ASSERT_EQ(found.group, static_cast<int>(g)) << "trial " << trial << ", item " << item;
        ASSERT_EQ(found.tile, t) << "trial " << trial << ", item " << item;
      }
    }
    EXPECT_EQ(starts.back(), item) << "trial " << trial;
  }
  // Counts past 2^31 work items stay exact.
  const std::vector<long long> big = hg::grouped_tile_starts({{1LL << 22, 1LL << 22}, {64, 64}}, 64, 64);
  EXPECT_EQ(big[1], 1LL << 32);
  EXPECT_EQ(hg::find_grouped_item(big.data(), 2, (1LL << 32) - 1).group, 0);
  EXPECT_EQ(hg::find_grouped_item(big.data(), 2, 1LL << 32).group, 1);
}

TEST(GemmReference, SmallProductByHandAndLayoutIndependence) {
  Tensor<float> a({2, 3}), b({3, 2});
  const float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {7, 8, 9, 10, 11, 12};
  std::memcpy(a.data(), av, sizeof(av));
  std::memcpy(b.data(), bv, sizeof(bv));
  Tensor<float> c({2, 2});
  const float cv[] = {1, 1, 1, 1};
  std::memcpy(c.data(), cv, sizeof(cv));
  const Tensor<double> r = reference::gemm(a, b, 2.0, -1.0, c);
  EXPECT_EQ(r.at(0, 0), 2 * 58.0 - 1);
  EXPECT_EQ(r.at(0, 1), 2 * 64.0 - 1);
  EXPECT_EQ(r.at(1, 0), 2 * 139.0 - 1);
  EXPECT_EQ(r.at(1, 1), 2 * 154.0 - 1);

  // The same logical data column-major (and padded) gives the same result.
  Tensor<float> a_col({2, 3}, {1, 5}), b_col({3, 2}, {1, 4});
  a.for_each_index([&](const std::vector<Index>& i) { a_col(i) = a(i); });
  b.for_each_index([&](const std::vector<Index>& i) { b_col(i) = b(i); });
  const Tensor<double> r_col = reference::gemm(a_col, b_col, 2.0, -1.0, c);
  EXPECT_TRUE(check_equal(r_col, r).ok);
  const Tensor<double> no_c = reference::gemm(a, b, 1.0, 0.0, Tensor<float>());
  EXPECT_EQ(no_c.at(1, 1), 154.0);
}

}  // namespace
