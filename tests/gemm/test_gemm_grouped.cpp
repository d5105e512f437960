/// @file test_gemm_grouped.cpp
/// @brief The grouped tile GEMM (GroupedGemmLauncher) on the GPU against the CPU reference:
///        many sub-problems of different sizes in one launch (M and N not multiples of any tile,
///        a single element, K = 0, M or N of 0, more tiles than multiprocessors), in fp32 exact
///        and TF32, fp16 and bf16, both pairs of operand layouts, on every path that runs them
///        (kAuto, gather, matrix, SIMT); every C poisoned (NaN) before the run, padding included,
///        and checked to be written exactly inside and untouched outside. CPU-only: the launcher
///        refuses what it cannot run, with a reason, and a workspace that is too small.

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "gemm/gemm_test_kinds.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/gemm.hpp"
#include "hipgrad/gemm/device/grouped_launcher.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using namespace hipgrad::host;
namespace hg = hipgrad::gemm;

struct Extent {
  int m, n, k;
};

/// Sizes of one launch: primes and other non-multiples of every tile, one element, K = 0, empty
/// outputs, exact tiles, and seeded random ones.
std::vector<Extent> sub_problem_extents(unsigned seed) {
  std::vector<Extent> e = {{67, 131, 257}, {1, 1, 1},    {300, 260, 0}, {129, 257, 33}, {0, 5, 7},   {128, 256, 64},
                           {5, 0, 3},      {1, 300, 77}, {257, 1, 130}, {2, 3, 0},      {37, 41, 1}, {513, 9, 24}};
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> size(1, 400), depth(0, 300);
  for (int i = 0; i < 8; ++i) e.push_back({size(random), size(random), depth(random)});
  return e;
}

/// Leading dimension of `contiguous` elements: a multiple of 8 elements (16-byte vectors) and 8 more.
Index padded(Index contiguous) { return (contiguous + 7) / 8 * 8 + 8; }

/// One sub-problem's host data: A (M × K), B (K × N) in the launch's layouts, C row-major with a
/// padded row, and its expected value.
template <typename T>
struct HostSubProblem {
  Extent e;
  Index lda, ldb, ldc;
  Tensor<T> a, b;
  std::vector<T> c;  ///< M rows of ldc elements, the last ldc − N of each outside the matrix
  Tensor<double> expected;
};

template <typename T, bool kAKContiguous, bool kBKContiguous>
HostSubProblem<T> make_host_sub_problem(Extent e, InitMethod init, unsigned seed) {
  HostSubProblem<T> h{e, 0, 0, 0, {}, {}, {}, {}};
  h.lda = padded(kAKContiguous ? e.k : e.m);
  h.ldb = padded(kBKContiguous ? e.k : e.n);
  h.ldc = e.n + 3;
  h.a = kAKContiguous ? Tensor<T>({e.m, e.k}, {h.lda, 1}) : Tensor<T>({e.m, e.k}, {1, h.lda});
  h.b = kBKContiguous ? Tensor<T>({e.k, e.n}, {1, h.ldb}) : Tensor<T>({e.k, e.n}, {h.ldb, 1});
  // Storage to the full leading dimension of every line, at least one element.
  h.a.storage().assign(static_cast<std::size_t>(h.lda * ((kAKContiguous ? e.m : e.k) + 1)), T{});
  h.b.storage().assign(static_cast<std::size_t>(h.ldb * ((kBKContiguous ? e.n : e.k) + 1)), T{});
  if (e.k > 0 && e.m > 0) fill(h.a, init, seed);
  if (e.k > 0 && e.n > 0) fill(h.b, init, seed + 1);
  h.c.assign(static_cast<std::size_t>(h.ldc * e.m + 1), T{});
  std::memset(h.c.data(), 0xff, h.c.size() * sizeof(T));  // NaN: every element must be written
  h.expected = Tensor<double>({e.m, e.n});
  if (e.k > 0 && e.m > 0 && e.n > 0) {
    h.expected = reference::gemm(h.a, h.b, 1.0, 0.0, Tensor<T>());
  } else {
    h.expected.for_each_index([&](const std::vector<Index>& i) { h.expected(i) = 0.0; });
  }
  return h;
}

/// Runs one grouped launch of sub_problem_extents(seed) on `forced` (or kAuto) and checks every C.
template <typename T, bool kAKContiguous, bool kBKContiguous>
void check_grouped(std::optional<hg::Path> forced, bool tf32, InitMethod init, unsigned seed) {
  using LoaderA = hg::DenseOperand<T, kAKContiguous>;
  using LoaderB = hg::DenseOperand<T, kBKContiguous>;
  using Epilogue = hg::LinearCombination<T>;
  using Launcher = hg::GroupedGemmLauncher<hg::DefaultConfigFor<T>, LoaderA, LoaderB, Epilogue>;
  SCOPED_TRACE(std::string("path ") + (forced ? hg::path_name(*forced) : "auto") + (tf32 ? " tf32 " : " ") +
               init_method_name(init) + " A " + (kAKContiguous ? "K" : "M") + "-contiguous, B " +
               (kBKContiguous ? "K" : "N") + "-contiguous");
  const std::vector<Extent> extents = sub_problem_extents(seed);
  std::vector<HostSubProblem<T>> host;
  std::vector<DeviceBuffer<T>> da(extents.size()), db(extents.size()), dc(extents.size());
  std::vector<hg::SubProblem<LoaderA, LoaderB, Epilogue>> problems;
  for (std::size_t g = 0; g < extents.size(); ++g) {
    host.push_back(make_host_sub_problem<T, kAKContiguous, kBKContiguous>(extents[g], init, seed + 10 * g));
    const HostSubProblem<T>& h = host.back();
    ASSERT_TRUE(da[g].allocate(h.a.storage().size()).is_ok());
    ASSERT_TRUE(da[g].copy_from_host(h.a.storage().data(), h.a.storage().size()).is_ok());
    ASSERT_TRUE(db[g].allocate(h.b.storage().size()).is_ok());
    ASSERT_TRUE(db[g].copy_from_host(h.b.storage().data(), h.b.storage().size()).is_ok());
    ASSERT_TRUE(dc[g].allocate(h.c.size()).is_ok());
    ASSERT_TRUE(dc[g].copy_from_host(h.c.data(), h.c.size()).is_ok());
    problems.push_back({LoaderA{da[g].data(), h.lda, h.e.m, h.e.k}, LoaderB{db[g].data(), h.ldb, h.e.n, h.e.k},
                        Epilogue{dc[g].data(), h.ldc, 1, h.e.m, h.e.n, 1.0f, 0.0f, nullptr}});
  }
  hg::TileGemmRequest request;
  request.matrix_units = !std::is_same_v<T, float> || tf32;
  request.forced = forced;
  const int count = static_cast<int>(problems.size());
  const hg::GroupedGemmPlan plan = Launcher::plan(problems.data(), count, request, hipgrad::current_device_info());
  ASSERT_TRUE(plan.status.is_ok()) << plan.status.to_string();
  if (forced) EXPECT_EQ(plan.path, *forced);
  DeviceBuffer<unsigned char> workspace;
  ASSERT_TRUE(workspace.allocate(plan.workspace_bytes).is_ok());
  ASSERT_TRUE(workspace.fill_bytes(0xff).is_ok());
  const Status s = Launcher::launch(plan, problems.data(), count, workspace.data(), workspace.bytes(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);

  for (std::size_t g = 0; g < host.size(); ++g) {
    const HostSubProblem<T>& h = host[g];
    SCOPED_TRACE("sub-problem " + std::to_string(g) + ": " + std::to_string(h.e.m) + "x" + std::to_string(h.e.n) + "x" +
                 std::to_string(h.e.k));
    std::vector<T> c(h.c.size());
    ASSERT_TRUE(dc[g].copy_to_host(c.data(), c.size()).is_ok());
    // Outside the matrix: the bytes of before.
    for (std::size_t i = 0; i < c.size(); ++i) {
      const Index row = static_cast<Index>(i) / h.ldc, column = static_cast<Index>(i) % h.ldc;
      if (row < h.e.m && column < h.e.n) continue;
      ASSERT_EQ(std::memcmp(&c[i], &h.c[i], sizeof(T)), 0) << "written outside C at storage element " << i;
    }
    Tensor<T> result({h.e.m, h.e.n});
    result.for_each_index(
        [&](const std::vector<Index>& i) { result(i) = c[static_cast<std::size_t>(i[0] * h.ldc + i[1])]; });
    if (init == InitMethod::kIntegers || h.e.k == 0) {
      Tensor<T> rounded({h.e.m, h.e.n});
      rounded.for_each_index(
          [&](const std::vector<Index>& i) { rounded(i) = hipgrad::type_convert<T>(h.expected(i)); });
      const CheckResult r = check_equal(result, rounded);
      EXPECT_TRUE(r.ok) << r.report;
    } else {
      const CheckResult r = check_close(result, h.expected, gemm_test::decimal_tolerance<T>(h.e.k, tf32));
      EXPECT_TRUE(r.ok) << r.report;
    }
  }
}

template <typename K>
class GroupedGemmTest : public ::testing::Test {};
TYPED_TEST_SUITE(GroupedGemmTest, gemm_test::Kinds);

/// Every path that runs these operands on this device: kAuto, the gather kernel (sm_90a), the
/// matrix kernels (matrix atoms), SIMT.
TYPED_TEST(GroupedGemmTest, SubProblemsOfEverySizeInOneLaunch) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  const hipgrad::DeviceInfo& device = hipgrad::current_device_info();
  const bool matrix = !gemm_test::is_exact_fp32<TypeParam>() && hg::device_has_matrix_atoms(device.device);
  const bool gather = matrix && hg::device_runs_wgmma(device.device);
  std::vector<std::optional<hg::Path>> paths = {std::nullopt, hg::Path::kSimt};
  if (matrix) paths.push_back(hg::Path::kMatrix);
  if (gather) paths.push_back(hg::Path::kGather);
  unsigned seed = 1;
  for (const std::optional<hg::Path>& path : paths) {
    for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
      check_grouped<T, true, false>(path, TypeParam::kAllowTf32, init, seed++);
      if (::testing::Test::HasFatalFailure()) return;
      check_grouped<T, false, true>(path, TypeParam::kAllowTf32, init, seed++);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

/// More work items than the gather kernel's persistent grid has blocks: 48 sub-problems of
/// 300 × 260 (six 128 × 256 tiles each) and K = 100.
TYPED_TEST(GroupedGemmTest, PersistentGatherWalksManySubProblems) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Type;
  if (gemm_test::is_exact_fp32<TypeParam>()) GTEST_SKIP() << "exact fp32 has no matrix path";
  if (!hg::device_runs_wgmma(hipgrad::current_device_info().device)) {
    GTEST_SKIP() << "the gather kernel needs an sm_90a build on an sm_90 GPU";
  }
  using LoaderA = hg::DenseOperand<T, true>;
  using LoaderB = hg::DenseOperand<T, false>;
  using Epilogue = hg::LinearCombination<T>;
  using Launcher = hg::GroupedGemmLauncher<hg::DefaultConfigFor<T>, LoaderA, LoaderB, Epilogue>;
  constexpr int kCount = 48, kM = 300, kN = 260, kK = 100;
  const Index lda = padded(kK), ldb = padded(kN);
  Tensor<T> a({kM, kK}, {lda, 1}), b({kK, kN}, {ldb, 1});
  a.storage().assign(static_cast<std::size_t>(lda * kM), T{});
  b.storage().assign(static_cast<std::size_t>(ldb * kK), T{});
  fill(a, InitMethod::kIntegers, 7);
  fill(b, InitMethod::kIntegers, 8);
  const Tensor<double> expected = reference::gemm(a, b, 1.0, 0.0, Tensor<T>());
  DeviceBuffer<T> da, db, dc;
  ASSERT_TRUE(da.allocate(a.storage().size()).is_ok());
  ASSERT_TRUE(da.copy_from_host(a.storage().data(), a.storage().size()).is_ok());
  ASSERT_TRUE(db.allocate(b.storage().size()).is_ok());
  ASSERT_TRUE(db.copy_from_host(b.storage().data(), b.storage().size()).is_ok());
  ASSERT_TRUE(dc.allocate(static_cast<std::size_t>(kCount) * kM * kN).is_ok());
  ASSERT_TRUE(dc.fill_bytes(0xff).is_ok());
  std::vector<hg::SubProblem<LoaderA, LoaderB, Epilogue>> problems;
  for (int g = 0; g < kCount; ++g) {
    problems.push_back({LoaderA{da.data(), lda, kM, kK}, LoaderB{db.data(), ldb, kN, kK},
                        Epilogue{dc.data() + static_cast<Index>(g) * kM * kN, kN, 1, kM, kN, 1.0f, 0.0f, nullptr}});
  }
  hg::TileGemmRequest request;
  request.forced = hg::Path::kGather;
  const hg::GroupedGemmPlan plan = Launcher::plan(problems.data(), kCount, request, hipgrad::current_device_info());
  ASSERT_TRUE(plan.status.is_ok()) << plan.status.to_string();
  EXPECT_LT(static_cast<long long>(plan.blocks), plan.items);
  DeviceBuffer<unsigned char> workspace;
  ASSERT_TRUE(workspace.allocate(plan.workspace_bytes).is_ok());
  const Status s = Launcher::launch(plan, problems.data(), kCount, workspace.data(), workspace.bytes(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  std::vector<T> c(static_cast<std::size_t>(kCount) * kM * kN);
  ASSERT_TRUE(dc.copy_to_host(c.data(), c.size()).is_ok());
  for (int g = 0; g < kCount; ++g) {
    Tensor<T> result({kM, kN}), rounded({kM, kN});
    result.for_each_index([&](const std::vector<Index>& i) {
      result(i) = c[static_cast<std::size_t>((static_cast<Index>(g) * kM + i[0]) * kN + i[1])];
      rounded(i) = hipgrad::type_convert<T>(expected(i));
    });
    const CheckResult r = check_equal(result, rounded);
    ASSERT_TRUE(r.ok) << "sub-problem " << g << ": " << r.report;
  }
}

/// What the grouped launcher refuses, with a reason; none of it needs a GPU.
TEST(GroupedGemmPlan, RefusesWhatItCannotRun) {
  using T = hipgrad::half;
  using LoaderA = hg::DenseOperand<T, true>;
  using LoaderB = hg::DenseOperand<T, false>;
  using Epilogue = hg::LinearCombination<T>;
  using Launcher = hg::GroupedGemmLauncher<hg::DefaultConfigFor<T>, LoaderA, LoaderB, Epilogue>;
  const auto* fake = reinterpret_cast<const T*>(0x100000);
  auto* out = reinterpret_cast<T*>(0x200000);
  const hg::SubProblem<LoaderA, LoaderB, Epilogue> ok{LoaderA{fake, 72, 70, 64}, LoaderB{fake, 72, 60, 64},
                                                      Epilogue{out, 60, 1, 70, 60, 1.0f, 0.0f, nullptr}};
  const hipgrad::DeviceInfo& device = hipgrad::current_device_info();
  const auto refused = [&](std::vector<hg::SubProblem<LoaderA, LoaderB, Epilogue>> problems,
                           const hg::TileGemmRequest& request, int count) {
    const hg::GroupedGemmPlan plan =
        Launcher::plan(problems.empty() ? nullptr : problems.data(), count, request, device);
    EXPECT_EQ(plan.status.code(), hipgrad::StatusCode::kNotSupported) << plan.status.to_string();
    EXPECT_FALSE(plan.status.message().empty());
  };
  hg::TileGemmRequest split;
  split.split_k = 2;
  refused({ok}, split, 1);
  hg::TileGemmRequest tma;
  tma.forced = hg::Path::kTma;
  refused({ok}, tma, 1);
  refused({}, {}, -1);
  refused({}, {}, 2);  // null sub-problems
  hg::SubProblem<LoaderA, LoaderB, Epilogue> partials = ok;
  partials.epilogue.partials = reinterpret_cast<float*>(0x300000);
  refused({ok, partials}, {}, 2);
  hg::SubProblem<LoaderA, LoaderB, Epilogue> k_mismatch = ok;
  k_mismatch.b.k_extent = 63;
  refused({k_mismatch}, {}, 1);
  hg::TileGemmRequest unaligned_matrix;
  unaligned_matrix.forced = hg::Path::kMatrix;
  hg::SubProblem<LoaderA, LoaderB, Epilogue> unaligned = ok;
  unaligned.a.stride = 71;
  refused({ok, unaligned}, unaligned_matrix, 2);

  // A plan that runs (SIMT runs everywhere) and a workspace below its size.
  hg::TileGemmRequest simt;
  simt.forced = hg::Path::kSimt;
  const std::vector<hg::SubProblem<LoaderA, LoaderB, Epilogue>> two = {ok, ok};
  const hg::GroupedGemmPlan plan = Launcher::plan(two.data(), 2, simt, device);
  ASSERT_TRUE(plan.status.is_ok()) << plan.status.to_string();
  EXPECT_EQ(plan.items, 2);
  EXPECT_EQ(plan.workspace_bytes, Launcher::workspace_bytes(2));
  std::vector<unsigned char> small(plan.workspace_bytes - 1);
  const Status s = Launcher::launch(plan, two.data(), 2, small.data(), small.size(), nullptr);
  EXPECT_EQ(s.code(), hipgrad::StatusCode::kWorkspaceTooSmall) << s.to_string();
  // No sub-problems: nothing to launch.
  const hg::GroupedGemmPlan none = Launcher::plan(nullptr, 0, {}, device);
  EXPECT_TRUE(none.status.is_ok()) << none.status.to_string();
  EXPECT_EQ(none.items, 0);
}

}  // namespace
