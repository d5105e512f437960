/// @file test_groupnorm_large.cpp
/// @brief A GroupNorm of more than 2^31 elements (64-bit indexing), forward and fused backward,
///        NCHW and NHWC, on the three-pass path (a few huge groups) and the one-read path (many
///        small ones). Needs ~13 GB of GPU memory and ~13 GB of host memory; skipped otherwise.
///
/// A full CPU reference over 2^31 elements would take minutes, so the check is split: the
/// statistics (and dγ/dβ) are recomputed in double over every element on the host, while y and
/// dx are compared on a strided sample plus the last 2^15 positions (or all, if fewer) of every
/// channel of the last sample, which include elements past 2^31 in both layouts.

#include <gtest/gtest.h>

#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/device_fill.hpp"
#include "hipgrad/host/parallel.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "groupnorm_instances.hpp"

namespace {

using hipgrad::half;
using hipgrad::Index;
using hipgrad::host::DeviceBuffer;
namespace gn = hipgrad::groupnorm;

// [N, C, H, W] with N·C·H·W = 2,148,007,936 > 2^31: groups far larger than a block (three-pass).
const std::vector<Index> kLargeGroups = {2, 32, 8192, 4097};
// 65537·32·32·32 = 2,147,516,416 > 2^31 in 65537 groups of 32 K elements (one-read in both
// layouts: 32 fp16 channels make 64-byte channels-last rows; channels last runs the staged kernels
// under kAuto on a GPU with a block for each multiprocessor).
const std::vector<Index> kManyGroups = {65537, 32, 32, 32};

struct Host {
  std::vector<half> x, dy, out;
};

/// Offsets of logical (n, c, s) for either layout.
struct Layout {
  bool channels_last;
  Index n, c, s;
  Index offset(Index ni, Index ci, Index si) const {
    return channels_last ? (ni * s + si) * c + ci : (ni * c + ci) * s + si;
  }
};

double value(const std::vector<half>& v, Index o) { return static_cast<float>(v[static_cast<std::size_t>(o)]); }

void run_case(const std::vector<Index>& lengths, Index groups, bool channels_last, bool one_read) {
  SCOPED_TRACE(channels_last ? "NHWC" : "NCHW");
  const Layout L{channels_last, lengths[0], lengths[1], lengths[2] * lengths[3]};
  const Index tail = L.s < (1 << 15) ? L.s : (1 << 15);
  const Index count = L.n * L.c * L.s;
  ASSERT_GT(count, Index{1} << 31);
  std::size_t free_bytes = 0, total_bytes = 0;
  HIPGRAD_ASSERT_HIP(hipMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < static_cast<std::size_t>(count) * sizeof(half) * 3 + (1u << 30))
    GTEST_SKIP() << "needs ~13 GB of GPU memory";
  Host h;
  try {
    h.x.resize(static_cast<std::size_t>(count));
    h.dy.resize(static_cast<std::size_t>(count));
    h.out.resize(static_cast<std::size_t>(count));
  } catch (const std::bad_alloc&) {
    GTEST_SKIP() << "needs ~13 GB of host memory";
  }
  DeviceBuffer<half> x, dy, out;
  DeviceBuffer<float> gamma, beta, mean, rstd, dgamma, dbeta;
  DeviceBuffer<unsigned char> ws;
  ASSERT_TRUE(x.allocate(count).is_ok());
  ASSERT_TRUE(dy.allocate(count).is_ok());
  ASSERT_TRUE(out.allocate(count).is_ok());
  std::vector<float> g(L.c), b(L.c);
  for (Index c = 0; c < L.c; ++c) g[c] = 0.5f + 0.03f * c, b[c] = 0.1f * c - 1.0f;
  for (auto* buf : {&gamma, &beta, &dgamma, &dbeta}) ASSERT_TRUE(buf->allocate(L.c).is_ok());
  ASSERT_TRUE(mean.allocate(L.n * groups).is_ok());
  ASSERT_TRUE(rstd.allocate(L.n * groups).is_ok());
  ASSERT_TRUE(gamma.copy_from_host(g.data(), L.c).is_ok());
  ASSERT_TRUE(beta.copy_from_host(b.data(), L.c).is_ok());
  ASSERT_TRUE(hipgrad::host::fill_uniform_on_device(x.data(), count, 1).is_ok());
  ASSERT_TRUE(hipgrad::host::fill_uniform_on_device(dy.data(), count, 2).is_ok());
  ASSERT_TRUE(out.fill_bytes(0xff).is_ok());

  const auto fp = gn::ForwardProblem::packed(lengths, groups, channels_last);
  auto bp = gn::BackwardProblem::packed(lengths, groups, channels_last);
  using Fwd = gn::Forward<half, float>;
  using Bwd = gn::Backward<half, float>;
  // Either one-read design (registers, or shared memory: "staged") reads x once.
  auto reads_once = [](const std::string& name) {
    return name.find("one_read") != std::string::npos || name.find("_staged_") != std::string::npos;
  };
  EXPECT_EQ(reads_once(Fwd::name(fp)), one_read) << Fwd::name(fp);
  EXPECT_EQ(reads_once(Bwd::name(bp)), one_read) << Bwd::name(bp);
  ASSERT_TRUE(ws.allocate(std::max(Fwd::workspace_size(fp), Bwd::workspace_size(bp))).is_ok());
  auto st = Fwd::run(fp, {x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data()}, ws.data(),
                     ws.bytes(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_TRUE(x.copy_to_host(h.x.data(), count).is_ok());
  ASSERT_TRUE(dy.copy_to_host(h.dy.data(), count).is_ok());
  ASSERT_TRUE(out.copy_to_host(h.out.data(), count).is_ok());
  std::vector<float> gpu_mean(L.n * groups), gpu_rstd(L.n * groups);
  ASSERT_TRUE(mean.copy_to_host(gpu_mean.data(), gpu_mean.size()).is_ok());
  ASSERT_TRUE(rstd.copy_to_host(gpu_rstd.data(), gpu_rstd.size()).is_ok());

  // Statistics in double over every element.
  const Index cg = L.c / groups;
  std::vector<double> ref_mean(L.n * groups), ref_rstd(L.n * groups);
  hipgrad::host::parallel_for(0, L.n * groups, [&](Index ng) {
    const Index n = ng / groups, c0 = ng % groups * cg;
    double sum = 0, sq = 0;
    for (Index c = c0; c < c0 + cg; ++c)
      for (Index s = 0; s < L.s; ++s) sum += value(h.x, L.offset(n, c, s));
    const double m = sum / (cg * L.s);
    for (Index c = c0; c < c0 + cg; ++c)
      for (Index s = 0; s < L.s; ++s) sq += (value(h.x, L.offset(n, c, s)) - m) * (value(h.x, L.offset(n, c, s)) - m);
    ref_mean[ng] = m;
    ref_rstd[ng] = 1.0 / std::sqrt(sq / (cg * L.s) + 1e-5);
  });
  for (Index i = 0; i < L.n * groups; ++i) {
    EXPECT_NEAR(gpu_mean[i], ref_mean[i], 1e-5) << "group " << i;
    EXPECT_NEAR(gpu_rstd[i], ref_rstd[i], 1e-4 * ref_rstd[i]) << "group " << i;
  }
  // y on a sample, and on the last 2^15 (or all) positions of every channel of the last sample.
  auto check_y = [&](Index n, Index c, Index s) {
    const Index ng = n * groups + c / cg;
    const double ref = g[c] * (value(h.x, L.offset(n, c, s)) - ref_mean[ng]) * ref_rstd[ng] + b[c];
    const double got = value(h.out, L.offset(n, c, s));
    return std::fabs(got - ref) <= 2e-3 * (1.0 + std::fabs(ref));
  };
  Index bad = 0, checked = 0;
  for (Index i = 0; i < count; i += 1009, ++checked) bad += !check_y(i / (L.c * L.s), i / L.s % L.c, i % L.s);
  for (Index c = 0; c < L.c; ++c)
    for (Index s = L.s - tail; s < L.s; ++s, ++checked) bad += !check_y(L.n - 1, c, s);
  EXPECT_EQ(bad, 0) << "y mismatches among " << checked << " checked elements";

  // Fused backward: dx sampled the same way, dγ/dβ over every element.
  std::vector<float> mean_f(gpu_mean), rstd_f(gpu_rstd);
  ASSERT_TRUE(out.fill_bytes(0xff).is_ok());
  st = Bwd::run(bp,
                {dy.data(), x.data(), gamma.data(), beta.data(), mean.data(), rstd.data(), out.data(), dgamma.data(),
                 dbeta.data()},
                ws.data(), ws.bytes(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_TRUE(out.copy_to_host(h.out.data(), count).is_ok());
  std::vector<float> got_dg(L.c), got_db(L.c);
  ASSERT_TRUE(dgamma.copy_to_host(got_dg.data(), L.c).is_ok());
  ASSERT_TRUE(dbeta.copy_to_host(got_db.data(), L.c).is_ok());
  std::vector<double> s1(L.n * L.c), s2(L.n * L.c);  // Σdy, Σdy·(x − μ) per (n, c)
  hipgrad::host::parallel_for(0, L.n * L.c, [&](Index nc) {
    const Index n = nc / L.c, c = nc % L.c, ng = n * groups + c / cg;
    double a = 0, q = 0;
    for (Index s = 0; s < L.s; ++s) {
      const double d = value(h.dy, L.offset(n, c, s));
      a += d;
      q += d * (value(h.x, L.offset(n, c, s)) - mean_f[ng]);
    }
    s1[nc] = a;
    s2[nc] = q;
  });
  for (Index c = 0; c < L.c; ++c) {
    double dg = 0, db = 0;
    for (Index n = 0; n < L.n; ++n) dg += rstd_f[n * groups + c / cg] * s2[n * L.c + c], db += s1[n * L.c + c];
    EXPECT_NEAR(got_dg[c], dg, 1e-3 * (1.0 + std::fabs(dg))) << "dgamma " << c;
    EXPECT_NEAR(got_db[c], db, 1e-3 * (1.0 + std::fabs(db))) << "dbeta " << c;
  }
  std::vector<double> A(L.n * groups, 0.0), B(L.n * groups, 0.0);
  for (Index nc = 0; nc < L.n * L.c; ++nc) {
    const Index n = nc / L.c, c = nc % L.c, ng = n * groups + c / cg;
    A[ng] += g[c] * s1[nc];
    B[ng] += g[c] * s2[nc];
  }
  const double M = static_cast<double>(cg * L.s);
  auto check_dx = [&](Index n, Index c, Index s) {
    const Index ng = n * groups + c / cg;
    const double r = rstd_f[ng], xm = value(h.x, L.offset(n, c, s)) - mean_f[ng];
    const double ref = r * g[c] * value(h.dy, L.offset(n, c, s)) - r * A[ng] / M - r * r * r * B[ng] / M * xm;
    return std::fabs(value(h.out, L.offset(n, c, s)) - ref) <= 2e-3 * (1.0 + std::fabs(ref));
  };
  bad = 0;
  checked = 0;
  for (Index i = 0; i < count; i += 1009, ++checked) bad += !check_dx(i / (L.c * L.s), i / L.s % L.c, i % L.s);
  for (Index c = 0; c < L.c; ++c)
    for (Index s = L.s - tail; s < L.s; ++s, ++checked) bad += !check_dx(L.n - 1, c, s);
  EXPECT_EQ(bad, 0) << "dx mismatches among " << checked << " checked elements";
}

TEST(GroupNormLarge, MoreThan2Pow31ElementsNCHW) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  run_case(kLargeGroups, 8, /*channels_last=*/false, /*one_read=*/false);
}

TEST(GroupNormLarge, MoreThan2Pow31ElementsNHWC) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  run_case(kLargeGroups, 8, /*channels_last=*/true, /*one_read=*/false);
}

TEST(GroupNormLarge, MoreThan2Pow31ElementsOneReadNCHW) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  run_case(kManyGroups, 1, /*channels_last=*/false, /*one_read=*/true);
}

TEST(GroupNormLarge, MoreThan2Pow31ElementsOneReadNHWC) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  run_case(kManyGroups, 1, /*channels_last=*/true, /*one_read=*/true);
}

}  // namespace
