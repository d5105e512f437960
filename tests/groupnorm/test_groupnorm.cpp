/// @file test_groupnorm.cpp
/// @brief GroupNorm forward and backward on the GPU against the CPU reference: every data/parameter
///        type pairing, NCHW, NHWC and padded strided layouts, identity and Swish, odd shapes.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"
#include "groupnorm/groupnorm_test_util.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/groupnorm.hpp"
#include "hipgrad/host/reference/groupnorm_tolerance.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/backward_data.hpp"
#include "hipgrad/ops/groupnorm/backward_gamma_beta.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "groupnorm_instances.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::groupnorm::Activation;
using namespace hipgrad::host;
namespace gn = hipgrad::groupnorm;

enum class Layout { kNCHW, kNHWC, kPadded };

const char* layout_name(Layout l) { return l == Layout::kNCHW ? "NCHW" : l == Layout::kNHWC ? "NHWC" : "padded"; }

/// Strides of logical [N, C, spatial...]: packed NCHW, packed NHWC, or NHWC whose channels and
/// rows are padded (gaps between elements, which must stay untouched).
std::vector<Index> layout_strides(const std::vector<Index>& lengths, Layout layout) {
  std::vector<int> order(lengths.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  if (layout == Layout::kNCHW) return strides_for_order(lengths, order);
  order.erase(order.begin() + 1);
  order.push_back(1);
  if (layout == Layout::kNHWC) return strides_for_order(lengths, order);
  std::vector<Index> padded = lengths;
  padded[1] += 3;  // channel padding
  std::vector<Index> strides = strides_for_order(padded, order);
  if (lengths.size() > 2) {  // and a gap after every sample
    strides[0] += 5;
  }
  return strides;
}

/// Packed layouts run every algorithm (kOneRead and kStaged where the shape allows them: see
/// OneReadWhereItApplies and StagedWhereItApplies); padded strides have only the three-pass one,
/// which kAuto picks.
std::vector<gn::Algorithm> algorithms_for(Layout layout) {
  if (layout == Layout::kPadded) return {gn::Algorithm::kAuto};
  return {gn::Algorithm::kThreePass, gn::Algorithm::kOneRead, gn::Algorithm::kStaged};
}

/// Whether a kOneRead or kStaged run was refused as not applicable (a plane not a multiple of the
/// vector, planes for kStaged, or a group too large for a block): the only failure the algorithm
/// choice may add, and only on a shape that was not chosen for that algorithm (Chosen).
bool not_applicable(gn::Algorithm algorithm, const Status& st) {
  return (algorithm == gn::Algorithm::kOneRead || algorithm == gn::Algorithm::kStaged) &&
         st.code() == hipgrad::StatusCode::kNotSupported;
}

/// A path a case exists for: forced, `algorithm` on `layout` must run (a refusal fails the test),
/// over a cluster of at least `min_cluster` blocks where the GPU has clusters; for data of
/// `element_bytes` bytes only, where that is not 0.
struct Chosen {
  Layout layout;
  gn::Algorithm algorithm;
  int min_cluster = 1;
  int element_bytes = 0;
};

struct Case {
  std::vector<Index> lengths;  // [N, C, spatial...]
  Index groups;
  std::vector<Chosen> chosen = {};
};

/// The rule of `c` for `algorithm` on `layout` with data of `element_bytes`, or null where it may
/// be refused.
const Chosen* chosen_for(const Case& c, Layout layout, gn::Algorithm algorithm, int element_bytes) {
  for (const Chosen& k : c.chosen)
    if (k.layout == layout && k.algorithm == algorithm && (k.element_bytes == 0 || k.element_bytes == element_bytes))
      return &k;
  return nullptr;
}

/// The cluster size in a one-read or staged op name ("…_one_read_b<bytes>_t<threads>_k<blocks>…",
/// "…_staged_t<threads>_k<blocks>…"): 1 without "_k", 0 where the name has neither plan.
Index cluster_in_name(const std::string& name) {
  std::size_t plan = name.find("_one_read_");
  if (plan == std::string::npos) plan = name.find("_staged_");
  if (plan == std::string::npos) return 0;
  const std::size_t k = name.find("_k", plan);
  return k == std::string::npos ? 1 : std::atol(name.c_str() + k + 2);
}

/// The marker of `algorithm`'s plan in an op's name.
const char* plan_marker(gn::Algorithm algorithm) {
  return algorithm == gn::Algorithm::kStaged ? "_staged_" : "_one_read_";
}

/// Checks that an op named `name` runs the path `rule` asks for.
void expect_chosen_path(const std::string& name, const Chosen& rule) {
  EXPECT_NE(name.find(plan_marker(rule.algorithm)), std::string::npos) << name;
  if (hipgrad::cluster_launch_supported()) EXPECT_GE(cluster_in_name(name), rule.min_cluster) << name;
}

constexpr gn::Algorithm kOneRead = gn::Algorithm::kOneRead;
constexpr gn::Algorithm kStaged = gn::Algorithm::kStaged;

/// The shapes of the tests, written [N, C, spatial...] (CK's {N, H, W, G, C per group} in
/// comments), with the paths each was chosen for (`chosen`: forced, they must run).
std::vector<Case> cases() {
  const Chosen planes{Layout::kNCHW, kOneRead}, rows{Layout::kNHWC, kOneRead}, staged{Layout::kNHWC, kStaged};
  return {
      {{1, 1, 1, 1}, 1},                                // {1,1,1,1,1}
      {{1, 20, 2, 3}, 4},                               // {1,2,3,4,5}
      {{256, 81, 9, 9}, 9},                             // {256,9,9,9,9}
      {{1, 320, 64, 32}, 32, {planes, rows, staged}},   // {1,64,64,32,10} (H halved)
      {{1, 640, 32, 32}, 32, {planes, rows, staged}},   // {1,32,32,32,20}
      {{1, 1280, 16, 16}, 32, {planes, rows, staged}},  // {1,16,16,32,40}
      {{3, 12, 37}, 3},                                 // 1-D, prime length
      {{2, 8, 3, 5, 7}, 4, {rows, staged}},             // 3-D
      {{2, 16, 8, 8}, 16, {planes, staged}},            // one channel per group
      {{1, 2048, 4, 4}, 2, {planes, rows}},             // 1024 channels per group
      {{4, 64}, 8},                                     // spatial rank 0
      {{5, 24, 1, 1}, 6},                               // spatial 1
      {{2, 6, 131}, 2},                                 // odd C, prime spatial (no vector path)
      // planes of a prime number of vectors, split over a cluster
      {{1, 6, 8, 4099}, 3, {{Layout::kNCHW, kOneRead, 2}}},
      // groups larger than a block: one-read over a cluster
      {{2, 16, 128, 128}, 2, {{Layout::kNCHW, kOneRead, 2}}},
      // narrow channels-last groups, banded, over a cluster
      {{2, 160, 48, 64}, 16, {{Layout::kNHWC, kOneRead, 2}, staged}},
      // prime spatial: 16-bit channels-last rows split unevenly over a cluster (fp32's do not fit 8 blocks)
      {{1, 8, 131, 257}, 2, {{Layout::kNHWC, kOneRead, 2, 2}}},
      // the same for the staged kernels (a band that fits 8 blocks)
      {{1, 32, 61, 67}, 2, {{Layout::kNHWC, kStaged, 2}}},
      // a staged unit too large for 8 blocks: a larger cluster (sm_90 has room for up to 16)
      {{1, 32, 128, 128}, 2, {{Layout::kNHWC, kStaged, 9}}},
      {{2, 56, 9, 11}, 8, {staged}},                         // 7 channels per group: 16-bit vectors straddle two groups
      {{2, 12, 5, 7}, 4, {{Layout::kNHWC, kStaged, 1, 4}}},  // 3 channels per group: fp32 vectors straddle two groups
      {{2, 96, 17, 19}, 8, {rows, staged}},  // 12 channels per group: bands of 6 vectors a row, a prime number of rows
  };
}

template <typename T>
void poison(DeviceBuffer<T>& b) {
  ASSERT_TRUE(b.fill_bytes(0xff).is_ok());
}

using hipgrad_test::download;
using hipgrad_test::upload;

template <typename Types>
class GroupNormTest : public ::testing::Test {};

TYPED_TEST_SUITE(GroupNormTest, hipgrad_test::GroupNormTypePairs);

using hipgrad_test::Data;
using hipgrad_test::data_name;
using hipgrad_test::fill_data;
using hipgrad_test::init_of;

/// The case of cases() with these lengths and groups (and so its chosen paths).
Case case_of(const std::vector<Index>& lengths, Index groups) {
  for (const Case& c : cases())
    if (c.lengths == lengths && c.groups == groups) return c;
  ADD_FAILURE() << hipgrad::lengths_to_string(lengths) << " G" << groups << " is not in cases()";
  return Case{lengths, groups};
}

/// Whether `st`, the answer of an op forced to run `algorithm` on `c` laid out as `layout`, ends
/// the check: a refusal as not applicable where the case was not chosen for that algorithm.
/// Anything else must be ok, and where the case was chosen for the path, the op's name must say
/// that it runs it.
template <typename T>
bool refused_where_allowed(const Case& c, Layout layout, gn::Algorithm algorithm, const Status& st,
                           const std::string& name) {
  const Chosen* rule = chosen_for(c, layout, algorithm, static_cast<int>(sizeof(T)));
  if (!rule && not_applicable(algorithm, st)) return true;
  EXPECT_TRUE(st.is_ok()) << name << ": " << st.to_string();
  if (rule) expect_chosen_path(name, *rule);
  return !st.is_ok();
}

/// y's padding (the elements of its storage outside the logical ones) must still hold the
/// poison, all sizeof(T) bytes of each.
template <typename T>
void expect_padding_poisoned(const Tensor<T>& out) {
  std::vector<bool> logical(out.storage().size(), false);
  out.for_each_index([&](const std::vector<Index>& i) { logical[static_cast<std::size_t>(out.offset(i))] = true; });
  EXPECT_EQ(hipgrad_test::written_outside(out.data(), logical.size(), logical), 0) << "padding elements were written";
}

/// y computed in double from statistics saved in fp32 (mean_f, rstd_f: the op's own), into *y;
/// returns its tolerance, scaled by the largest |γ·x̂| + |β| alone. A kernel holds the mean no
/// more precisely than fp32 does, which far from zero (|μ|·rstd in the thousands) is the largest
/// error of an exact kernel; against this reference what remains is the affine step's own.
template <typename T, typename TP>
Tolerance y_from_saved_statistics(const Tensor<T>& x, const Tensor<TP>& gamma, const Tensor<TP>& beta,
                                  const Tensor<float>& mean_f, const Tensor<float>& rstd_f, Index groups,
                                  Activation act, float swish_beta, Tensor<T>* y) {
  const Index group_channels = x.length(1) / groups;
  double terms = 0;
  x.for_each_index([&](const std::vector<Index>& i) {
    const double g = hipgrad::type_convert<double>(gamma.at(i[1])), b = hipgrad::type_convert<double>(beta.at(i[1]));
    const Index group = i[1] / group_channels;
    const double x_hat = (hipgrad::type_convert<double>(x(i)) - mean_f.at(i[0], group)) * rstd_f.at(i[0], group);
    const double z = g * x_hat + b;
    terms = std::max(terms, std::fabs(g * x_hat) + std::fabs(b));
    (*y)(i) = hipgrad::type_convert<T>(act == Activation::kSwish ? gn::swish(z, static_cast<double>(swish_beta)) : z);
  });
  return averaged_tolerance<T>(terms);
}

template <typename T, typename TP>
void check_forward(const Case& c, Layout layout, Activation act, Data data, gn::Algorithm algorithm,
                   float swish_beta = 0.8f, Index nan_gamma_channel = -1, float x_offset = 0.0f) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " " + gn::algorithm_name(algorithm) + " " + gn::activation_name(act) +
               " " + data_name(data) + " " + hipgrad::lengths_to_string(c.lengths) + " G" + std::to_string(c.groups) +
               " beta " + std::to_string(swish_beta));
  const std::vector<Index> strides = layout_strides(c.lengths, layout);
  Tensor<T> x(c.lengths, strides), y(c.lengths, strides);
  Tensor<TP> gamma({c.lengths[1]}), beta({c.lengths[1]});
  fill_data(x, static_cast<Tensor<T>*>(nullptr), c.groups, data, 11);
  if (x_offset != 0.0f)
    x.for_each_index([&](const std::vector<Index>& i) {
      x(i) = hipgrad::type_convert<T>(hipgrad::type_convert<float>(x(i)) + x_offset);
    });
  fill(gamma, init_of(data), 12);
  fill(beta, init_of(data), 13);
  const Index n = c.lengths[0];
  Tensor<float> mean({n, c.groups}), rstd({n, c.groups});
  Tensor<T> y_ref(c.lengths, strides);
  Tensor<float> mean_ref({n, c.groups}), rstd_ref({n, c.groups});
  ASSERT_TRUE(
      reference::groupnorm_forward(x, gamma, beta, c.groups, 1e-5, act, swish_beta, y_ref, mean_ref, rstd_ref).is_ok());
  reference::GroupNormTolerances tol;
  ASSERT_TRUE(
      (reference::groupnorm_tolerances<T, TP>(x, nullptr, gamma, beta, mean_ref, rstd_ref, c.groups, &tol).is_ok()));

  gn::ForwardProblem p;
  ASSERT_TRUE(gn::make_tensor_shape(c.lengths, strides, "x", &p.x).is_ok());
  p.y = p.x;
  p.groups = c.groups;
  p.activation = act;
  p.swish_beta = swish_beta;
  p.algorithm = algorithm;
  using Op = gn::Forward<T, TP>;
  auto dx = upload(x), dy = upload(y);
  // With nan_gamma_channel, the op gets a NaN γ there: that channel's y must be NaN, the others as
  // the reference computed them with the finite γ.
  Tensor<TP> op_gamma = gamma;
  if (nan_gamma_channel >= 0)
    op_gamma.at(nan_gamma_channel) = hipgrad::type_convert<TP>(std::numeric_limits<float>::quiet_NaN());
  auto dgamma = upload(op_gamma), dbeta = upload(beta);
  DeviceBuffer<float> dmean, drstd;
  DeviceBuffer<unsigned char> workspace;
  ASSERT_TRUE(dmean.allocate(n * c.groups).is_ok());
  ASSERT_TRUE(drstd.allocate(n * c.groups).is_ok());
  ASSERT_TRUE(workspace.allocate(Op::workspace_size(p)).is_ok());
  poison(dy);
  poison(dmean);
  poison(drstd);
  poison(workspace);
  const typename Op::Args args{dx.data(), dgamma.data(), dbeta.data(), dy.data(), dmean.data(), drstd.data()};
  const Status st = Op::run(p, args, workspace.data(), workspace.bytes(), nullptr);
  if (refused_where_allowed<T>(c, layout, algorithm, st, Op::name(p))) return;
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  Tensor<T> y_out = download(dy, y);
  if (nan_gamma_channel >= 0) {
    std::int64_t finite_in_channel = 0;
    y_out.for_each_index([&](const std::vector<Index>& i) {
      if (i[1] != nan_gamma_channel) return;
      if (!std::isnan(hipgrad::type_convert<float>(y_out(i)))) ++finite_in_channel;
      y_out(i) = y_ref(i);
    });
    EXPECT_EQ(finite_in_channel, 0) << Op::name(p) << ": y of the channel whose gamma is NaN";
  }
  const Tensor<float> mean_out = download(dmean, mean), rstd_out = download(drstd, rstd);
  // Far from zero, y against the statistics the op saved (y_from_saved_statistics).
  if (x_offset != 0.0f)
    tol.y = y_from_saved_statistics(x, gamma, beta, mean_out, rstd_out, c.groups, act, swish_beta, &y_ref);
  const auto ym = check_close(y_out, y_ref, tol.y);
  EXPECT_TRUE(ym.ok) << Op::name(p) << " y: " << ym.report;
  const auto mm = check_close(mean_out, mean_ref, tol.mean);
  EXPECT_TRUE(mm.ok) << Op::name(p) << " mean: " << mm.report;
  const auto rm = check_close(rstd_out, rstd_ref, tol.rstd);
  EXPECT_TRUE(rm.ok) << Op::name(p) << " rstd: " << rm.report;
  // Padding of y must stay poisoned: the op writes only the logical elements.
  if (layout == Layout::kPadded) expect_padding_poisoned(y_out);
}

/// A backward call's device buffers: inputs uploaded, outputs and workspace allocated (in this
/// order, for structured bindings).
template <typename T, typename TP>
struct BackwardBuffers {
  DeviceBuffer<T> x, dy;
  DeviceBuffer<TP> gamma, beta;
  DeviceBuffer<float> mean, rstd;
  DeviceBuffer<T> dx;
  DeviceBuffer<TP> dgamma, dbeta;
  DeviceBuffer<unsigned char> workspace;

  BackwardBuffers(const Tensor<T>& x_in, const Tensor<T>& dy_in, const Tensor<TP>& gamma_in, const Tensor<TP>& beta_in,
                  const Tensor<float>& mean_in, const Tensor<float>& rstd_in, std::size_t workspace_bytes)
      : x(upload(x_in)),
        dy(upload(dy_in)),
        gamma(upload(gamma_in)),
        beta(upload(beta_in)),
        mean(upload(mean_in)),
        rstd(upload(rstd_in)) {
    hipgrad_test::require(dx.allocate(x_in.storage().size()), "dx");
    hipgrad_test::require(dgamma.allocate(gamma_in.storage().size()), "dgamma");
    hipgrad_test::require(dbeta.allocate(gamma_in.storage().size()), "dbeta");
    hipgrad_test::require(workspace.allocate(workspace_bytes), "workspace");
  }
};

/// A backward's inputs on the host from seeds first_seed, first_seed + 1, …: x and dy exposing the
/// reductions (fill_exposing_reductions, decimals), γ, β, mean and rstd decimals.
template <typename T, typename TP>
struct BackwardInputs {
  Tensor<T> x, dy;
  Tensor<TP> gamma, beta;
  Tensor<float> mean, rstd;

  BackwardInputs(const std::vector<Index>& lengths, const std::vector<Index>& strides, Index groups, int first_seed)
      : x(lengths, strides),
        dy(lengths, strides),
        gamma({lengths[1]}),
        beta({lengths[1]}),
        mean({lengths[0], groups}),
        rstd({lengths[0], groups}) {
    hipgrad_test::fill_exposing_reductions(x, &dy, groups, /*integers=*/false, first_seed);
    fill(gamma, InitMethod::kDecimals, first_seed + 2);
    fill(beta, InitMethod::kDecimals, first_seed + 3);
    fill(mean, InitMethod::kDecimals, first_seed + 4);
    fill(rstd, InitMethod::kDecimals, first_seed + 5);
  }
  BackwardBuffers<T, TP> on_device(std::size_t workspace_bytes) const {
    return BackwardBuffers<T, TP>(x, dy, gamma, beta, mean, rstd, workspace_bytes);
  }
};

enum class Outputs { kFused, kDataOnly, kGammaBetaOnly };

template <typename T, typename TP>
void check_backward(const Case& c, Layout layout, Activation act, Data data, Outputs outputs,
                    gn::Algorithm algorithm = gn::Algorithm::kAuto, float swish_beta = 0.8f) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " " + gn::algorithm_name(algorithm) + " " + gn::activation_name(act) +
               " " + data_name(data) + " " + hipgrad::lengths_to_string(c.lengths) + " G" + std::to_string(c.groups) +
               " beta " + std::to_string(swish_beta) + " outputs " + std::to_string(static_cast<int>(outputs)));
  const std::vector<Index> strides = layout_strides(c.lengths, layout);
  const Index n = c.lengths[0], channels = c.lengths[1];
  Tensor<T> x(c.lengths, strides), dy(c.lengths, strides), y(c.lengths, strides);
  Tensor<TP> gamma({channels}), beta({channels});
  fill_data(x, &dy, c.groups, data, 21);
  fill(gamma, init_of(data), 23);
  fill(beta, init_of(data), 24);
  Tensor<float> mean({n, c.groups}), rstd({n, c.groups});
  ASSERT_TRUE(reference::groupnorm_forward(x, gamma, beta, c.groups, 1e-5, act, swish_beta, y, mean, rstd).is_ok());
  Tensor<T> dx_ref(c.lengths, strides);
  Tensor<TP> dgamma_ref({channels}), dbeta_ref({channels});
  ASSERT_TRUE(
      reference::groupnorm_backward_data(dy, x, gamma, beta, mean, rstd, c.groups, act, swish_beta, dx_ref).is_ok());
  ASSERT_TRUE(reference::groupnorm_backward_gamma_beta(dy, x, gamma, beta, mean, rstd, c.groups, act, swish_beta,
                                                       dgamma_ref, dbeta_ref)
                  .is_ok());
  reference::GroupNormTolerances tol;
  ASSERT_TRUE(reference::groupnorm_tolerances(x, &dy, gamma, beta, mean, rstd, c.groups, &tol).is_ok());

  gn::BackwardProblem p;
  ASSERT_TRUE(gn::make_tensor_shape(c.lengths, strides, "x", &p.x).is_ok());
  p.dy = p.dx = p.x;
  p.groups = c.groups;
  p.activation = act;
  p.swish_beta = swish_beta;
  p.algorithm = algorithm;
  using Op = gn::Backward<T, TP>;
  BackwardBuffers<T, TP> d(x, dy, gamma, beta, mean, rstd, Op::workspace_size(p));
  auto& [d_x, d_dy, d_gamma, d_beta, d_mean, d_rstd, d_dx, d_dgamma, d_dbeta, workspace] = d;
  poison(d_dx);
  poison(d_dgamma);
  poison(d_dbeta);
  poison(workspace);
  Status st;
  std::string name;
  if (outputs == Outputs::kFused) {
    name = Op::name(p);
    st = Op::run(p,
                 {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(), d_dx.data(),
                  d_dgamma.data(), d_dbeta.data()},
                 workspace.data(), workspace.bytes(), nullptr);
  } else if (outputs == Outputs::kDataOnly) {
    using DataOp = gn::BackwardData<T, TP>;
    name = DataOp::name(p);
    st = DataOp::run(
        p, {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(), d_dx.data()},
        workspace.data(), workspace.bytes(), nullptr);
  } else {
    using GammaBetaOp = gn::BackwardGammaBeta<T, TP>;
    name = GammaBetaOp::name(p);
    st = GammaBetaOp::run(p,
                          {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(),
                           d_dgamma.data(), d_dbeta.data()},
                          workspace.data(), workspace.bytes(), nullptr);
  }
  if (refused_where_allowed<T>(c, layout, algorithm, st, name)) return;
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  if (outputs != Outputs::kGammaBetaOnly) {
    const Tensor<T> dx_out = download(d_dx, dx_ref);
    const auto m = check_close(dx_out, dx_ref, tol.dx);
    EXPECT_TRUE(m.ok) << name << " dx: " << m.report;
    if (layout == Layout::kPadded) expect_padding_poisoned(dx_out);
  }
  if (outputs != Outputs::kDataOnly) {
    const auto g = check_close(download(d_dgamma, dgamma_ref), dgamma_ref, tol.dgamma);
    EXPECT_TRUE(g.ok) << name << " dgamma: " << g.report;
    const auto b = check_close(download(d_dbeta, dbeta_ref), dbeta_ref, tol.dbeta);
    EXPECT_TRUE(b.ok) << name << " dbeta: " << b.report;
  }
}

TYPED_TEST(GroupNormTest, ForwardMatchesReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (const Case& c : cases())
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kPadded})
      for (gn::Algorithm algorithm : algorithms_for(layout))
        for (Activation act : {Activation::kIdentity, Activation::kSwish})
          for (Data data : {Data::kIntegers, Data::kDecimals, Data::kGroupedIntegers})
            check_forward<T, TP>(c, layout, act, data, algorithm);
}

TYPED_TEST(GroupNormTest, BackwardMatchesReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (const Case& c : cases())
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kPadded})
      for (gn::Algorithm algorithm : algorithms_for(layout))
        for (Activation act : {Activation::kIdentity, Activation::kSwish})
          for (Data data : {Data::kDecimals, Data::kGroupedDecimals})
            check_backward<T, TP>(c, layout, act, data, Outputs::kFused, algorithm);
}

// Swish's β of either sign, and 0: the forward kernels take σ(β·z) from exp(−|β·z|) for two or
// four values at a time (fast_swish_pair, fast_scaled_swish), which must follow the sign of β; the
// staged 16-bit forward scales the affine step by β where 2^-4 ≤ |β| ≤ 2^16 (-0.75, 2.5, 40) and
// keeps it unscaled elsewhere (0, 0.03).
TYPED_TEST(GroupNormTest, SwishOfAnyBeta) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (float swish_beta : {-0.75f, 0.0f, 2.5f, 0.03f, 40.0f})
    for (const Case& c : {case_of({1, 20, 2, 3}, 4), case_of({2, 16, 8, 8}, 16), case_of({2, 160, 48, 64}, 16)})
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
        for (gn::Algorithm algorithm : algorithms_for(layout)) {
          check_forward<T, TP>(c, layout, Activation::kSwish, Data::kGroupedDecimals, algorithm, swish_beta);
          check_backward<T, TP>(c, layout, Activation::kSwish, Data::kGroupedDecimals, Outputs::kFused, algorithm,
                                swish_beta);
        }
}

// A NaN γ makes its channel's y NaN and no other channel's: the staged forward shares one
// reciprocal between two values of a channel (fast_swish_pair), never between channels.
TYPED_TEST(GroupNormTest, SwishKeepsNaNInItsChannel) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  const Case c = case_of({2, 160, 48, 64}, 16);
  for (Index channel : {Index{2}, Index{3}})
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (gn::Algorithm algorithm : algorithms_for(layout))
        check_forward<T, TP>(c, layout, Activation::kSwish, Data::kDecimals, algorithm, 0.8f, channel);
}

// Precision when the mean lies far from 0 next to σ (x = offset + integers in [−5, 5]). fp32 takes
// z = γ·rstd·(x − μ) + β centred (affine.hpp): at offset 16384, |μ|·rstd ≈ 5000, the folded
// γ·rstd·x + (β − μ·γ·rstd) would be off by ~2^-24·|μ|·rstd·|γ|, far above fp32's tolerance.
// 16-bit data take the folded form, whose rounding stays below their own output's at the scale of
// the terms (|γ|·|x̂|) while |μ|·rstd < 2^12 (fp16) or 2^15 (bf16): checked at offsets where every
// value is exact and |μ|·rstd is as large as the type allows with a spread of ±5 (fp16: 2000, ~630;
// bf16: 200, ~63; its 8-bit significand keeps |μ|·rstd far below 2^15). y is compared with the one
// the saved fp32 statistics give (y_from_saved_statistics): the mean's own rounding, 2^-24·|μ|, is
// the same for both forms. A one-pass variance (E[x²] − μ²) would lose 2^-24·|μ|²/σ² of it.
TYPED_TEST(GroupNormTest, ForwardKeepsPrecisionFarFromZero) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  const float offset = std::is_same_v<T, float> ? 16384.0f : std::is_same_v<T, hipgrad::half> ? 2000.0f : 200.0f;
  const Chosen planes{Layout::kNCHW, kOneRead}, rows{Layout::kNHWC, kOneRead}, staged{Layout::kNHWC, kStaged};
  std::vector<Case> shapes = {Case{{2, 32, 8, 8}, 4, {planes, rows, staged}}, case_of({2, 160, 48, 64}, 16)};
  // Groups of one value (rstd = 1/√ε, so |μ|·rstd ≈ 300·|μ|): beyond the folded form's range.
  if (std::is_same_v<T, float>) shapes.push_back(Case{{4, 8}, 8});
  for (const Case& c : shapes)
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (gn::Algorithm algorithm : algorithms_for(layout))
        for (Activation act : {Activation::kIdentity, Activation::kSwish})
          check_forward<T, TP>(c, layout, act, Data::kIntegers, algorithm, 0.8f, -1, offset);
}

TYPED_TEST(GroupNormTest, BackwardDataAndGammaBetaAlone) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (const Case& c : {cases()[1], cases()[3], cases()[6], cases()[7]})
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Outputs o : {Outputs::kDataOnly, Outputs::kGammaBetaOnly})
        check_backward<T, TP>(c, layout, Activation::kSwish, Data::kGroupedIntegers, o);
}

/// The same call three times, the workspace poisoned differently before each, gives the same
/// bits: no result depends on the order blocks ran in, nor on the workspace's old contents.
/// `may_refuse`: the shape was not chosen for `algorithm`, which may then answer not_supported.
template <typename T, typename TP>
void check_backward_repeatable(const std::vector<Index>& lengths, Index groups, bool channels_last,
                               gn::Algorithm algorithm, bool may_refuse = false) {
  SCOPED_TRACE(std::string(gn::algorithm_name(algorithm)) + (channels_last ? " NHWC " : " NCHW ") +
               hipgrad::lengths_to_string(lengths) + " G" + std::to_string(groups));
  gn::BackwardProblem p = gn::BackwardProblem::packed(lengths, groups, channels_last);
  p.algorithm = algorithm;
  using Op = gn::Backward<T, TP>;
  const Index channels = lengths[1], stats = lengths[0] * groups;
  const std::vector<Index> strides(p.x.strides.begin(), p.x.strides.begin() + p.x.rank);
  BackwardBuffers<T, TP> d = BackwardInputs<T, TP>(lengths, strides, groups, 31).on_device(Op::workspace_size(p));
  auto& [d_x, d_dy, d_gamma, d_beta, d_mean, d_rstd, d_dx, d_dgamma, d_dbeta, workspace] = d;
  ASSERT_GT(stats, 0);
  Tensor<T> first_dx(lengths, strides), dx_run(lengths, strides);
  Tensor<TP> first_dgamma({channels}), first_dbeta({channels}), dgamma_run({channels}), dbeta_run({channels});
  for (int run = 0; run < 3; ++run) {
    poison(d_dx);
    poison(d_dgamma);
    poison(d_dbeta);
    ASSERT_TRUE(workspace.fill_bytes(static_cast<unsigned char>(0x5a + 0x33 * run)).is_ok());
    const Status st = Op::run(p,
                              {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(),
                               d_dx.data(), d_dgamma.data(), d_dbeta.data()},
                              workspace.data(), workspace.bytes(), nullptr);
    if (may_refuse && not_applicable(algorithm, st)) return;
    ASSERT_TRUE(st.is_ok()) << Op::name(p) << ": " << st.to_string();
    Tensor<T>& dx_out = run == 0 ? first_dx : dx_run;
    Tensor<TP>& dgamma_out = run == 0 ? first_dgamma : dgamma_run;
    Tensor<TP>& dbeta_out = run == 0 ? first_dbeta : dbeta_run;
    ASSERT_TRUE(d_dx.copy_to(dx_out).is_ok());
    ASSERT_TRUE(d_dgamma.copy_to(dgamma_out).is_ok());
    ASSERT_TRUE(d_dbeta.copy_to(dbeta_out).is_ok());
    if (run == 0) continue;
    EXPECT_EQ(std::memcmp(first_dx.data(), dx_run.data(), first_dx.storage().size() * sizeof(T)), 0)
        << "dx, run " << run;
    EXPECT_EQ(std::memcmp(first_dgamma.data(), dgamma_run.data(), channels * sizeof(TP)), 0) << "dgamma, run " << run;
    EXPECT_EQ(std::memcmp(first_dbeta.data(), dbeta_run.data(), channels * sizeof(TP)), 0) << "dbeta, run " << run;
  }
}

/// A backward grid's fold blocks (staged, or one-read where the GPU holds the grid at once) take
/// each row of totals once its block releases a flag in the workspace (detail::TotalsFlags), and
/// no one zeroes the flags: a call on a workspace that still holds another call's totals and
/// flags must wait for its own. B on a poisoned workspace, then A (another dy), then B again on
/// what A left: B's bits both times. The fold runs beside the grid's last blocks and would read
/// A's rows had it taken A's flags.
template <typename T, typename TP>
void check_fold_waits_for_its_own_totals(const std::vector<Index>& lengths, Index groups,
                                         gn::Algorithm algorithm = gn::Algorithm::kStaged, bool channels_last = true) {
  SCOPED_TRACE(hipgrad::lengths_to_string(lengths) + " G" + std::to_string(groups) +
               (channels_last ? " channels last" : " planes"));
  gn::BackwardProblem p = gn::BackwardProblem::packed(lengths, groups, channels_last);
  p.algorithm = algorithm;
  using Op = gn::Backward<T, TP>;
  const Index channels = lengths[1];
  const std::vector<Index> strides(p.x.strides.begin(), p.x.strides.begin() + p.x.rank);
  BackwardBuffers<T, TP> d = BackwardInputs<T, TP>(lengths, strides, groups, 61).on_device(Op::workspace_size(p));
  Tensor<T> other_dy(lengths, strides);
  fill(other_dy, InitMethod::kIntegers, 67);
  DeviceBuffer<T> d_other_dy = upload(other_dy);
  const auto run = [&](const T* dy_on_device) {
    poison(d.dx);
    poison(d.dgamma);
    poison(d.dbeta);
    return Op::run(p,
                   {dy_on_device, d.x.data(), d.gamma.data(), d.beta.data(), d.mean.data(), d.rstd.data(), d.dx.data(),
                    d.dgamma.data(), d.dbeta.data()},
                   d.workspace.data(), d.workspace.bytes(), nullptr);
  };
  ASSERT_TRUE(d.workspace.fill_bytes(0x5a).is_ok());
  const Status st = run(d.dy.data());
  ASSERT_TRUE(st.is_ok()) << Op::name(p) << ": " << st.to_string();  // a shape chosen for an in-grid fold
  EXPECT_NE(Op::name(p).find("_fold"), std::string::npos) << Op::name(p);
  Tensor<T> first_dx(lengths, strides), dx_again(lengths, strides);
  Tensor<TP> first_dgamma({channels}), first_dbeta({channels}), dgamma_again({channels}), dbeta_again({channels});
  ASSERT_TRUE(d.dx.copy_to(first_dx).is_ok());
  ASSERT_TRUE(d.dgamma.copy_to(first_dgamma).is_ok());
  ASSERT_TRUE(d.dbeta.copy_to(first_dbeta).is_ok());
  ASSERT_TRUE(run(d_other_dy.data()).is_ok());
  ASSERT_TRUE(d.dgamma.copy_to(dgamma_again).is_ok());
  EXPECT_NE(std::memcmp(first_dgamma.data(), dgamma_again.data(), channels * sizeof(TP)), 0) << "A's dγ equals B's";
  ASSERT_TRUE(run(d.dy.data()).is_ok());
  ASSERT_TRUE(d.dx.copy_to(dx_again).is_ok());
  ASSERT_TRUE(d.dgamma.copy_to(dgamma_again).is_ok());
  ASSERT_TRUE(d.dbeta.copy_to(dbeta_again).is_ok());
  EXPECT_EQ(std::memcmp(first_dx.data(), dx_again.data(), first_dx.storage().size() * sizeof(T)), 0) << "dx";
  EXPECT_EQ(std::memcmp(first_dgamma.data(), dgamma_again.data(), channels * sizeof(TP)), 0) << "dgamma";
  EXPECT_EQ(std::memcmp(first_dbeta.data(), dbeta_again.data(), channels * sizeof(TP)), 0) << "dbeta";
}

TYPED_TEST(GroupNormTest, StagedFoldWaitsForItsOwnTotals) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  check_fold_waits_for_its_own_totals<T, TP>({16, 320, 32, 48}, 32);  // 10-channel groups in bands, clusters
  check_fold_waits_for_its_own_totals<T, TP>({24, 64, 24, 24}, 4);    // a band of one group
}

// Small one-read backward grids, which the GPU holds at once, fold dγ/dβ in blocks of their own
// (detail::one_read_fold_blocks): planes, planes over a cluster, channels last in bands.
TYPED_TEST(GroupNormTest, OneReadFoldWaitsForItsOwnTotals) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  constexpr gn::Algorithm kOneRead = gn::Algorithm::kOneRead;
  check_fold_waits_for_its_own_totals<T, TP>({2, 64, 8, 8}, 32, kOneRead, /*channels_last=*/false);
  check_fold_waits_for_its_own_totals<T, TP>({1, 40, 96, 96}, 5, kOneRead, /*channels_last=*/false);
  check_fold_waits_for_its_own_totals<T, TP>({2, 256, 8, 8}, 32, kOneRead, /*channels_last=*/true);
  check_fold_waits_for_its_own_totals<T, TP>({2, 64, 8, 8}, 32, kOneRead, /*channels_last=*/true);
}

TYPED_TEST(GroupNormTest, BackwardIsBitwiseRepeatable) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (gn::Algorithm algorithm : {gn::Algorithm::kThreePass, gn::Algorithm::kOneRead, gn::Algorithm::kStaged}) {
    check_backward_repeatable<T, TP>({6, 160, 40, 48}, 16, /*channels_last=*/true,
                                     algorithm);        // banded, over a cluster
    if (algorithm == gn::Algorithm::kStaged) continue;  // channels last only
    check_backward_repeatable<T, TP>({3, 64, 72, 72}, 8, /*channels_last=*/false, algorithm);
    // dγ/dβ over many samples; planes of 36 values are not whole 16-byte vectors of 16-bit data
    check_backward_repeatable<T, TP>({200, 48, 6, 6}, 4, /*channels_last=*/false, algorithm,
                                     /*may_refuse=*/sizeof(T) == 2);
  }
}

/// Copies `b` into `t` on `stream`, ordered after the work enqueued there before.
template <typename T>
void copy_back_on(hipStream_t stream, const DeviceBuffer<T>& b, Tensor<T>& t) {
  ASSERT_EQ(b.size(), t.storage().size());
  ASSERT_EQ(hipMemcpyAsync(t.data(), b.data(), b.size() * sizeof(T), hipMemcpyDeviceToHost, stream), hipSuccess);
}

/// The later kernels of an op are dependent launches (core/dependent_launch.hpp) that wait on the
/// GPU for the kernel before them. Forward, then the fused backward on the forward's mean and
/// rstd, then every output copied back, all on one stream with no synchronisation between: a
/// dependent kernel that read before its predecessor had finished, or an op whose last kernel
/// completed before an earlier one, would leave stale or poisoned values in what comes back.
template <typename T, typename TP>
void check_chain_on_stream(const std::vector<Index>& lengths, Index groups, Layout layout, gn::Algorithm algorithm,
                           Activation act) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " " + gn::algorithm_name(algorithm) + " " + gn::activation_name(act) +
               " " + hipgrad::lengths_to_string(lengths) + " G" + std::to_string(groups));
  const std::vector<Index> strides = layout_strides(lengths, layout);
  const Index n = lengths[0], channels = lengths[1];
  Tensor<T> x(lengths, strides), dy(lengths, strides);
  Tensor<TP> gamma({channels}), beta({channels});
  hipgrad_test::fill_exposing_reductions(x, &dy, groups, /*integers=*/false, 41);
  fill(gamma, InitMethod::kDecimals, 43);
  fill(beta, InitMethod::kDecimals, 44);

  gn::ForwardProblem fp;
  ASSERT_TRUE(gn::make_tensor_shape(lengths, strides, "x", &fp.x).is_ok());
  fp.y = fp.x;
  fp.groups = groups;
  fp.activation = act;
  fp.algorithm = algorithm;
  gn::BackwardProblem bp;
  bp.x = bp.dy = bp.dx = fp.x;
  bp.groups = groups;
  bp.activation = act;
  bp.algorithm = algorithm;
  using Forward = gn::Forward<T, TP>;
  using Backward = gn::Backward<T, TP>;
  Tensor<float> mean({n, groups}), rstd({n, groups});
  BackwardBuffers<T, TP> d(x, dy, gamma, beta, mean, rstd, Backward::workspace_size(bp));
  auto& [d_x, d_dy, d_gamma, d_beta, d_mean, d_rstd, d_dx, d_dgamma, d_dbeta, workspace] = d;
  DeviceBuffer<T> d_y;
  DeviceBuffer<unsigned char> forward_workspace;
  ASSERT_TRUE(d_y.allocate(x.storage().size()).is_ok());
  ASSERT_TRUE(forward_workspace.allocate(Forward::workspace_size(fp)).is_ok());
  hipStream_t stream = nullptr;
  ASSERT_EQ(hipStreamCreate(&stream), hipSuccess);
  // Destroyed on every way out, a failed assertion's early return included.
  const std::unique_ptr<std::remove_pointer_t<hipStream_t>, hipError_t (*)(hipStream_t)> owned_stream(stream,
                                                                                                      hipStreamDestroy);
  Tensor<T> y_out(lengths, strides), dx_out(lengths, strides);
  Tensor<float> mean_out({n, groups}), rstd_out({n, groups});
  Tensor<TP> dgamma_out({channels}), dbeta_out({channels});
  for (int run = 0; run < 3; ++run) {
    poison(d_y);
    poison(d_mean);
    poison(d_rstd);
    poison(d_dx);
    poison(d_dgamma);
    poison(d_dbeta);
    poison(workspace);
    poison(forward_workspace);
    ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);  // the poison is in place before the stream starts
    Status st = Forward::run(fp, {d_x.data(), d_gamma.data(), d_beta.data(), d_y.data(), d_mean.data(), d_rstd.data()},
                             forward_workspace.data(), forward_workspace.bytes(), stream);
    if (st.is_ok())
      st = Backward::run(bp,
                         {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(),
                          d_dx.data(), d_dgamma.data(), d_dbeta.data()},
                         workspace.data(), workspace.bytes(), stream);
    ASSERT_TRUE(st.is_ok()) << Backward::name(bp) << ": " << st.to_string();  // shapes chosen for every algorithm
    copy_back_on(stream, d_y, y_out);
    copy_back_on(stream, d_mean, mean_out);
    copy_back_on(stream, d_rstd, rstd_out);
    copy_back_on(stream, d_dx, dx_out);
    copy_back_on(stream, d_dgamma, dgamma_out);
    copy_back_on(stream, d_dbeta, dbeta_out);
    ASSERT_EQ(hipStreamSynchronize(stream), hipSuccess);

    Tensor<T> y_ref(lengths, strides), dx_ref(lengths, strides);
    Tensor<float> mean_ref({n, groups}), rstd_ref({n, groups});
    Tensor<TP> dgamma_ref({channels}), dbeta_ref({channels});
    ASSERT_TRUE(
        reference::groupnorm_forward(x, gamma, beta, groups, 1e-5, act, 1.0f, y_ref, mean_ref, rstd_ref).is_ok());
    // The backward's references from the statistics the GPU's forward handed it.
    ASSERT_TRUE(
        reference::groupnorm_backward_data(dy, x, gamma, beta, mean_out, rstd_out, groups, act, 1.0f, dx_ref).is_ok());
    ASSERT_TRUE(reference::groupnorm_backward_gamma_beta(dy, x, gamma, beta, mean_out, rstd_out, groups, act, 1.0f,
                                                         dgamma_ref, dbeta_ref)
                    .is_ok());
    reference::GroupNormTolerances tol;
    ASSERT_TRUE(reference::groupnorm_tolerances(x, &dy, gamma, beta, mean_out, rstd_out, groups, &tol).is_ok());
    const auto checks = {check_close(y_out, y_ref, tol.y),
                         check_close(mean_out, mean_ref, tol.mean),
                         check_close(rstd_out, rstd_ref, tol.rstd),
                         check_close(dx_out, dx_ref, tol.dx),
                         check_close(dgamma_out, dgamma_ref, tol.dgamma),
                         check_close(dbeta_out, dbeta_ref, tol.dbeta)};
    const char* names[] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta"};
    int k = 0;
    for (const auto& m : checks) {
      EXPECT_TRUE(m.ok) << Backward::name(bp) << " run " << run << " " << names[k] << ": " << m.report;
      ++k;
    }
  }
}

TYPED_TEST(GroupNormTest, ForwardThenBackwardOnAStreamWithoutSynchronising) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (gn::Algorithm algorithm : {gn::Algorithm::kThreePass, gn::Algorithm::kOneRead, gn::Algorithm::kStaged}) {
    for (Activation act : {Activation::kIdentity, Activation::kSwish}) {
      check_chain_on_stream<T, TP>({6, 160, 40, 48}, 16, Layout::kNHWC, algorithm, act);
      if (algorithm != gn::Algorithm::kStaged)
        check_chain_on_stream<T, TP>({3, 64, 72, 72}, 8, Layout::kNCHW, algorithm, act);
    }
  }
}

// kOneRead runs the one-read kernels for packed planes and packed channels last (over a cluster
// or a band where a group needs it), and is refused with a reason where they do not apply.
TYPED_TEST(GroupNormTest, OneReadWhereItApplies) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  using Fwd = gn::Forward<T, TP>;
  using Bwd = gn::Backward<T, TP>;
  // The op name of a packed problem run with `algorithm` (it says which kernels run).
  auto forward_name = [](std::vector<Index> lengths, Index groups, bool channels_last, gn::Algorithm algorithm) {
    gn::ForwardProblem f = gn::ForwardProblem::packed(lengths, groups, channels_last);
    f.algorithm = algorithm;
    return Fwd::name(f);
  };
  auto backward_name = [](std::vector<Index> lengths, Index groups, bool channels_last, gn::Algorithm algorithm) {
    gn::BackwardProblem b = gn::BackwardProblem::packed(lengths, groups, channels_last);
    b.algorithm = algorithm;
    return Bwd::name(b);
  };
  auto has = [](const std::string& name, const char* part) { return name.find(part) != std::string::npos; };
  const gn::Algorithm one_read = gn::Algorithm::kOneRead;
  std::string name = forward_name({2, 40, 16, 16}, 4, false, one_read);
  EXPECT_TRUE(has(name, "one_read")) << name;
  name = backward_name({2, 40, 16, 16}, 4, false, one_read);
  EXPECT_TRUE(has(name, "one_read")) << name;
  name = backward_name({2, 40, 16, 16}, 4, false, gn::Algorithm::kThreePass);
  EXPECT_FALSE(has(name, "one_read")) << name;
  // A group of 4 × 512 × 512 elements is far more than a block's registers hold.
  name = backward_name({1, 128, 512, 512}, 32, false, gn::Algorithm::kAuto);
  EXPECT_FALSE(has(name, "one_read")) << name;
  // A group of 8 × 128 × 128 elements: more than a block's registers, not more than a cluster's.
  name = forward_name({2, 16, 128, 128}, 2, false, one_read);
  if (hipgrad::cluster_launch_supported()) EXPECT_TRUE(has(name, "_k")) << name;
  // Channels last with 10 channels per group: bands of adjacent groups.
  name = forward_name({2, 160, 48, 64}, 16, true, one_read);
  EXPECT_TRUE(has(name, "_band")) << name;
  // Channels last with 10 channels per group: pairs of channels.
  name = forward_name({2, 40, 16, 16}, 4, true, one_read);
  EXPECT_TRUE(has(name, "one_read")) << name;
  // Channels last with 5 channels per group: odd, refused.
  gn::ForwardProblem f = gn::ForwardProblem::packed({2, 40, 16, 16}, 8, /*channels_last=*/true);
  f.algorithm = gn::Algorithm::kOneRead;
  DeviceBuffer<T> x, y;
  DeviceBuffer<TP> gamma, beta;
  ASSERT_TRUE(x.allocate(f.x.num_elements()).is_ok());
  ASSERT_TRUE(y.allocate(f.x.num_elements()).is_ok());
  ASSERT_TRUE(gamma.allocate(40).is_ok());
  ASSERT_TRUE(beta.allocate(40).is_ok());
  const typename Fwd::Args args{x.data(), gamma.data(), beta.data(), y.data(), nullptr, nullptr};
  const Status st = Fwd::can_implement(f, args);
  EXPECT_EQ(st.code(), hipgrad::StatusCode::kNotSupported) << st.to_string();
  EXPECT_NE(st.message().find("one-read"), std::string::npos) << st.to_string();
}

// The number after `tag` in the plan part of a staged op's name ("…_staged_t<threads>_k<blocks>
// _band<groups>…"), 0 where the name has no staged plan.
Index staged_plan_number(const std::string& name, const std::string& tag) {
  const std::size_t staged = name.find("_staged_");
  const std::size_t at = staged == std::string::npos ? staged : name.find(tag, staged);
  return at == std::string::npos ? 0 : std::atol(name.c_str() + at + tag.size());
}

// kStaged runs the staged kernels for packed channels last (bands of groups in whole 16-byte
// vectors, over a cluster where a band needs it), and is refused with a reason elsewhere.
TYPED_TEST(GroupNormTest, StagedWhereItApplies) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  using Fwd = gn::Forward<T, TP>;
  using Bwd = gn::Backward<T, TP>;
  auto staged = [](std::vector<Index> lengths, Index groups, bool channels_last) {
    gn::ForwardProblem f = gn::ForwardProblem::packed(lengths, groups, channels_last);
    gn::BackwardProblem b = gn::BackwardProblem::packed(lengths, groups, channels_last);
    f.algorithm = b.algorithm = gn::Algorithm::kStaged;
    return std::make_pair(Fwd::name(f), Bwd::name(b));
  };
  auto has = [](const std::string& name, const char* part) { return name.find(part) != std::string::npos; };
  auto cluster_of = [](const std::string& name) { return staged_plan_number(name, "_k"); };
  // 10 channels per group: bands of groups in whole vectors.
  auto names = staged({2, 160, 48, 64}, 16, true);
  EXPECT_TRUE(has(names.first, "_staged_") && has(names.first, "_band")) << names.first;
  EXPECT_TRUE(has(names.second, "_staged_")) << names.second;
  // 3072 positions × 32 channels of x and dy: more than one block's staging, a cluster's.
  names = staged({2, 64, 48, 64}, 2, true);
  if (hipgrad::cluster_launch_supported()) {
    EXPECT_GE(cluster_of(names.second), 2) << names.second;
    EXPECT_LE(cluster_of(names.second), 8) << names.second;
  }
  // 16384 positions × 32 channels of x and dy (2 MB in 16-bit, a band of one group in fp32): more
  // than 8 blocks of a multiprocessor's shared memory hold, so a larger cluster (sm_90 has room for
  // up to 16, a block per multiprocessor).
  names = staged({1, 32, 128, 128}, 2, true);
  if (hipgrad::cluster_launch_supported()) {
    EXPECT_GT(cluster_of(names.second), 8) << names.second;
    EXPECT_LE(cluster_of(names.second), 16) << names.second;
  }
  // Planes, and channels not a multiple of the vector: refused with the reason.
  for (auto [lengths, channels_last] : {std::make_pair(std::vector<Index>{2, 40, 16, 16}, false),
                                        std::make_pair(std::vector<Index>{2, 34, 16, 16}, true)}) {
    gn::ForwardProblem f = gn::ForwardProblem::packed(lengths, 2, channels_last);
    f.algorithm = gn::Algorithm::kStaged;
    DeviceBuffer<T> x, y;
    DeviceBuffer<TP> gamma, beta;
    ASSERT_TRUE(x.allocate(f.x.num_elements()).is_ok());
    ASSERT_TRUE(y.allocate(f.x.num_elements()).is_ok());
    ASSERT_TRUE(gamma.allocate(f.x.c()).is_ok());
    ASSERT_TRUE(beta.allocate(f.x.c()).is_ok());
    const typename Fwd::Args args{x.data(), gamma.data(), beta.data(), y.data(), nullptr, nullptr};
    const Status st = Fwd::can_implement(f, args);
    EXPECT_EQ(st.code(), hipgrad::StatusCode::kNotSupported) << st.to_string();
    EXPECT_NE(st.message().find("staged"), std::string::npos) << st.to_string();
  }
}

// The staged backward meeting over groups folds dγ/dβ in blocks of its own grid
// (detail::fold_in_grid): a block per 16 channels, but at most one cluster fewer than the GPU holds
// at once, so where the channels outnumber them each fold block takes several chunks in turn, as
// with 8192 channels in clusters of one block (the plan read from the op's name: "_fold<blocks>").
TYPED_TEST(GroupNormTest, StagedFoldBlocksTakeSeveralChunks) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  const Case c{{1, 8192, 16, 16}, 512, {{Layout::kNHWC, kStaged}}};
  gn::BackwardProblem p = gn::BackwardProblem::packed(c.lengths, c.groups, /*channels_last=*/true);
  p.algorithm = gn::Algorithm::kStaged;
  const std::string name = gn::Backward<T, TP>::name(p);
  const Index fold_blocks = staged_plan_number(name, "_fold"), chunks = 8192 / 16;
  ASSERT_GT(fold_blocks, 0) << name;
  if (fold_blocks >= chunks) GTEST_SKIP() << "this GPU holds a fold block per chunk of channels: " << name;
  for (Data data : {Data::kGroupedIntegers, Data::kDecimals})
    check_backward<T, TP>(c, Layout::kNHWC, Activation::kIdentity, data, Outputs::kFused, gn::Algorithm::kStaged);
}

// A staged grid of clusters that runs four rounds or more starts its first wave staggered
// (StagedStagger: some clusters wait a few microseconds). Only the timing may change: at the
// acceptance shape, fp16 32×320×64×64 G32 channels last, the forward's grid runs 4 rounds and the
// backward's 9 on an H100 (6 and 18 in fp32; the backward with Swish 7 and 7), so kAuto staggers
// both there, and both must match the reference, with Swish, on integer and decimal inputs.
TYPED_TEST(GroupNormTest, StaggeredStagedGridsMatchReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  if (!hipgrad::cluster_launch_supported()) GTEST_SKIP() << "no thread-block clusters, so no staged grid is staggered";
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  // A GPU with more multiprocessors than the H100's or H200's 132 holds more clusters at once and
  // needs more samples for as many rounds, so N doubles (up to 128) until both ops stagger.
  auto names = [](Index n) {
    gn::ForwardProblem f = gn::ForwardProblem::packed({n, 320, 64, 64}, 32, /*channels_last=*/true);
    gn::BackwardProblem b = gn::BackwardProblem::packed({n, 320, 64, 64}, 32, /*channels_last=*/true);
    f.activation = b.activation = Activation::kSwish;
    return std::make_pair(gn::Forward<T, TP>::name(f), gn::Backward<T, TP>::name(b));
  };
  auto both_staggered = [&](Index n) {
    const auto [forward, backward] = names(n);
    return forward.find("_staggered") != std::string::npos && backward.find("_staggered") != std::string::npos;
  };
  auto describe = [&](Index n) { return names(n).first + ", " + names(n).second; };
  Index n = 32;
  while (n < 128 && !both_staggered(n)) n *= 2;
  const int multiprocessors = hipgrad::current_device_info().multiprocessors;
  if (multiprocessors <= 132) EXPECT_EQ(n, 32) << describe(32);
  if (!both_staggered(n)) {
    ASSERT_GT(multiprocessors, 132) << describe(n);
    GTEST_SKIP() << multiprocessors << " multiprocessors: no staggered plan up to N = 128 (" << describe(n) << ")";
  }
  const Case c{{n, 320, 64, 64}, 32};
  for (Data data : {Data::kGroupedIntegers, Data::kDecimals}) {
    check_forward<T, TP>(c, Layout::kNHWC, Activation::kSwish, data, gn::Algorithm::kAuto);
    check_backward<T, TP>(c, Layout::kNHWC, Activation::kSwish, data, Outputs::kFused);
  }
}

// The staged 16-bit forward + Swish writes each thread's rows four at a time, then its last one to
// three rows by two and by one. Some thread of the shapes of cases() must end on each of those
// tails, so that ForwardMatchesReference (every case, staged, with Swish) checks them all: worked
// out here from the plans the op reports in its name, dealt by the OneReadRows arithmetic that
// StagedLane uses.
TYPED_TEST(GroupNormTest, StagedSwishRowTailsAreAllChecked) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  if (sizeof(T) != 2) GTEST_SKIP() << "the four-row loop is the 16-bit forward's";
  constexpr Index kVector = 8;  // 16-byte vectors of 16-bit values
  std::set<Index> tails;
  int staged_cases = 0;
  for (const Case& c : cases()) {
    gn::ForwardProblem f = gn::ForwardProblem::packed(c.lengths, c.groups, /*channels_last=*/true);
    f.algorithm = gn::Algorithm::kStaged;
    f.activation = Activation::kSwish;
    const std::string name = gn::Forward<T, TP>::name(f);
    if (name.find("_staged_") == std::string::npos) continue;
    ++staged_cases;
    const Index threads = staged_plan_number(name, "_t"), cluster = staged_plan_number(name, "_k"),
                band = staged_plan_number(name, "_band");
    ASSERT_GT(threads * cluster * band, 0) << name;
    gn::detail::OneReadRows rows;
    rows.columns = band * (f.x.c() / c.groups) / kVector;
    rows.rows_per_step = threads / rows.columns;
    rows.positions = f.x.spatial_size();
    rows.deal_over(static_cast<int>(cluster));
    for (int rank = 0; rank < rows.cluster; ++rank)
      for (Index lane_row = 0; lane_row < rows.rows_per_step; ++lane_row)
        if (const Index taken = rows.thread_rows(rank, lane_row); taken > 0) tails.insert(taken % 4);
  }
  EXPECT_GE(staged_cases, 3);
  for (Index tail : {1, 2, 3}) EXPECT_EQ(tails.count(tail), 1u) << "no thread ends on " << tail << " rows";
}

// Every path a case of cases() was chosen for is the one a forced algorithm runs there, forward
// and backward, identity and Swish (by the op's name, so also where a check would not reach it).
// HIPGRAD_TEST_PRINT_PATHS=1 prints the names of every case, layout and forced algorithm.
TYPED_TEST(GroupNormTest, ChosenPathsAreTheOnesThatRun) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  const char* print = std::getenv("HIPGRAD_TEST_PRINT_PATHS");
  int rules = 0;
  for (const Case& c : cases())
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (gn::Algorithm algorithm : {kOneRead, kStaged})
        for (Activation act : {Activation::kIdentity, Activation::kSwish}) {
          gn::ForwardProblem f = gn::ForwardProblem::packed(c.lengths, c.groups, layout == Layout::kNHWC);
          gn::BackwardProblem b = gn::BackwardProblem::packed(c.lengths, c.groups, layout == Layout::kNHWC);
          f.algorithm = b.algorithm = algorithm;
          f.activation = b.activation = act;
          const std::string forward = gn::Forward<T, TP>::name(f), backward = gn::Backward<T, TP>::name(b);
          if (print && *print == '1')
            std::printf("[paths] %s G%lld %s %s: %s | %s\n", hipgrad::lengths_to_string(c.lengths).c_str(),
                        static_cast<long long>(c.groups), layout_name(layout), gn::algorithm_name(algorithm),
                        forward.c_str(), backward.c_str());
          const Chosen* rule = chosen_for(c, layout, algorithm, static_cast<int>(sizeof(T)));
          if (!rule) continue;
          ++rules;
          SCOPED_TRACE(hipgrad::lengths_to_string(c.lengths) + " G" + std::to_string(c.groups) + " " +
                       layout_name(layout));
          expect_chosen_path(forward, *rule);
          expect_chosen_path(backward, *rule);
        }
  EXPECT_GE(rules, 20);
}

/// The shapes of the benchmark (bench/bench_groupnorm.cpp, the table of bench/log/groupnorm.md), which runs
/// γ/β in the data type.
std::vector<Case> bench_shapes() {
  return {{{32, 320, 64, 64}, 32}, {{16, 640, 32, 32}, 32},  {{8, 512, 128, 128}, 32}, {{1, 2048, 16, 16}, 64},
          {{128, 256, 28, 28}, 8}, {{1, 128, 512, 512}, 32}, {{2, 64, 16, 64, 64}, 32}};
}

// Every shape, layout and data type of the benchmark, on the path kAuto picks for it (the
// configurations bench/log/groupnorm.md reports), forward and backward with and without Swish. The
// mixed-type pairs are not benchmarked; their kernels are the listed cases' business.
template <typename T, typename TP>
void check_bench_shapes(bool backward) {
  if constexpr (!std::is_same_v<T, TP>) {
    GTEST_SKIP() << "the benchmark runs γ/β in the data type";
  } else {
    for (const Case& c : bench_shapes())
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
        for (Activation act : {Activation::kIdentity, Activation::kSwish}) {
          const Data data = act == Activation::kIdentity ? Data::kGroupedDecimals : Data::kGroupedIntegers;
          if (backward) {
            check_backward<T, TP>(c, layout, act, data, Outputs::kFused);
          } else {
            check_forward<T, TP>(c, layout, act, data, gn::Algorithm::kAuto);
          }
        }
  }
}

TYPED_TEST(GroupNormTest, BenchShapesForwardMatchReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  check_bench_shapes<typename TypeParam::Data, typename TypeParam::Param>(false);
}

TYPED_TEST(GroupNormTest, BenchShapesBackwardMatchReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  check_bench_shapes<typename TypeParam::Data, typename TypeParam::Param>(true);
}

}  // namespace
