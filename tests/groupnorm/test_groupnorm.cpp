/// @file test_groupnorm.cpp
/// @brief GroupNorm forward and backward on the GPU against the CPU reference: every data/parameter
///        type pairing, NCHW, NHWC and padded strided layouts, identity and Swish, odd shapes.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/groupnorm.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/backward_data.hpp"
#include "hipgrad/ops/groupnorm/backward_gamma_beta.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"

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

/// Packed layouts run both algorithms (kOneRead where the shape allows it: see
/// OneReadWhereItApplies); padded strides have only the three-pass one, which kAuto picks.
std::vector<gn::Algorithm> algorithms_for(Layout layout) {
  if (layout == Layout::kPadded) return {gn::Algorithm::kAuto};
  return {gn::Algorithm::kThreePass, gn::Algorithm::kOneRead};
}

/// Whether a kOneRead run was refused as not applicable (a plane not a multiple of the vector, or
/// a group too large for a block): the only failure the algorithm choice may add.
bool one_read_not_applicable(gn::Algorithm algorithm, const Status& st) {
  return algorithm == gn::Algorithm::kOneRead && st.code() == hipgrad::StatusCode::kNotSupported;
}

struct Case {
  std::vector<Index> lengths;  // [N, C, spatial...]
  Index groups;
};

/// The shapes of the issue, written [N, C, spatial...] (CK's {N, H, W, G, C per group} in comments).
std::vector<Case> cases() {
  return {
      {{1, 1, 1, 1}, 1},          // {1,1,1,1,1}
      {{1, 20, 2, 3}, 4},         // {1,2,3,4,5}
      {{256, 81, 9, 9}, 9},       // {256,9,9,9,9}
      {{1, 320, 64, 32}, 32},     // {1,64,64,32,10} (H halved)
      {{1, 640, 32, 32}, 32},     // {1,32,32,32,20}
      {{1, 1280, 16, 16}, 32},    // {1,16,16,32,40}
      {{3, 12, 37}, 3},           // 1-D, prime length
      {{2, 8, 3, 5, 7}, 4},       // 3-D
      {{2, 16, 8, 8}, 16},        // one channel per group
      {{1, 2048, 4, 4}, 2},       // 1024 channels per group
      {{4, 64}, 8},               // spatial rank 0
      {{5, 24, 1, 1}, 6},         // spatial 1
      {{2, 6, 131}, 2},           // odd C, prime spatial (no vector path)
      {{1, 6, 8, 4099}, 3},       // planes of a prime number of vectors, split over a cluster
      {{2, 16, 128, 128}, 2},     // groups larger than a block: one-read over a cluster
      {{2, 160, 48, 64}, 16},     // narrow channels-last groups, banded, over a cluster
      {{1, 8, 131, 257}, 2},      // prime spatial: channels-last rows split unevenly over a cluster
  };
}

template <typename T>
void poison(DeviceBuffer<T>& b) {
  ASSERT_TRUE(b.fill_bytes(0xff).is_ok());
}

template <typename T>
DeviceBuffer<T> upload(const Tensor<T>& t) {
  DeviceBuffer<T> b;
  EXPECT_TRUE(b.allocate(t.storage().size()).is_ok());
  EXPECT_TRUE(b.copy_from(t).is_ok());
  return b;
}

template <typename T>
Tensor<T> download(const DeviceBuffer<T>& b, Tensor<T> like) {
  EXPECT_TRUE(b.copy_to(like).is_ok());
  return like;
}

template <typename Types>
class GroupNormTest : public ::testing::Test {};

template <typename T, typename TP>
struct TypePair {
  using Data = T;
  using Param = TP;
};
using TypePairs = ::testing::Types<TypePair<float, float>, TypePair<hipgrad::half, hipgrad::half>,
                                   TypePair<hipgrad::half, float>, TypePair<hipgrad::bfloat16, float>,
                                   TypePair<hipgrad::bfloat16, hipgrad::bfloat16>>;
TYPED_TEST_SUITE(GroupNormTest, TypePairs);

struct Inputs {
  std::uint64_t seed;
  InitMethod init;
};

template <typename T, typename TP>
void check_forward(const Case& c, Layout layout, Activation act, InitMethod init, gn::Algorithm algorithm) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " " + gn::algorithm_name(algorithm) + " " + gn::activation_name(act) + " " + init_method_name(init) +
               " " + hipgrad::lengths_to_string(c.lengths) + " G" + std::to_string(c.groups));
  const std::vector<Index> strides = layout_strides(c.lengths, layout);
  Tensor<T> x(c.lengths, strides), y(c.lengths, strides);
  Tensor<TP> gamma({c.lengths[1]}), beta({c.lengths[1]});
  fill(x, init, 11);
  fill(gamma, init, 12);
  fill(beta, init, 13);
  const Index n = c.lengths[0];
  Tensor<float> mean({n, c.groups}), rstd({n, c.groups});
  Tensor<T> y_ref(c.lengths, strides);
  Tensor<float> mean_ref({n, c.groups}), rstd_ref({n, c.groups});
  ASSERT_TRUE(reference::groupnorm_forward(x, gamma, beta, c.groups, 1e-5, act, 0.8, y_ref, mean_ref, rstd_ref).is_ok());

  gn::ForwardProblem p;
  ASSERT_TRUE(gn::make_tensor_shape(c.lengths, strides, "x", &p.x).is_ok());
  p.y = p.x;
  p.groups = c.groups;
  p.activation = act;
  p.swish_beta = 0.8f;
  p.algorithm = algorithm;
  using Op = gn::Forward<T, TP>;
  auto dx = upload(x), dy = upload(y);
  auto dgamma = upload(gamma), dbeta = upload(beta);
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
  if (one_read_not_applicable(algorithm, st)) return;
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  const Index group_size = c.lengths[1] / c.groups * x.num_elements() / n / c.lengths[1];
  const auto ym = check_close(download(dy, y), y_ref, default_tolerance<T>(group_size));
  EXPECT_TRUE(ym.ok) << Op::name(p) << " y: " << ym.report;
  const auto mm = check_close(download(dmean, mean), mean_ref, default_tolerance<float>(group_size));
  EXPECT_TRUE(mm.ok) << "mean: " << mm.report;
  const auto rm = check_close(download(drstd, rstd), rstd_ref, default_tolerance<float>(group_size));
  EXPECT_TRUE(rm.ok) << "rstd: " << rm.report;
  // Padding of y must stay poisoned: the op writes only the logical elements.
  if (layout == Layout::kPadded) {
    const Tensor<T> out = download(dy, y);
    std::vector<bool> logical(out.storage().size(), false);
    out.for_each_index([&](const std::vector<Index>& i) { logical[static_cast<std::size_t>(out.offset(i))] = true; });
    std::uint16_t poisoned = 0;
    for (std::size_t i = 0; i < logical.size(); ++i) {
      if (logical[i]) continue;
      std::memcpy(&poisoned, reinterpret_cast<const unsigned char*>(out.data()) + i * sizeof(T), 2);
      ASSERT_EQ(poisoned, 0xffff) << "padding element " << i << " was written";
    }
  }
}

enum class Outputs { kFused, kDataOnly, kGammaBetaOnly };

template <typename T, typename TP>
void check_backward(const Case& c, Layout layout, Activation act, InitMethod init, Outputs outputs,
                    gn::Algorithm algorithm = gn::Algorithm::kAuto) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " " + gn::algorithm_name(algorithm) + " " + gn::activation_name(act) + " " + init_method_name(init) +
               " " + hipgrad::lengths_to_string(c.lengths) + " G" + std::to_string(c.groups) + " outputs " +
               std::to_string(static_cast<int>(outputs)));
  const std::vector<Index> strides = layout_strides(c.lengths, layout);
  const Index n = c.lengths[0], channels = c.lengths[1];
  Tensor<T> x(c.lengths, strides), dy(c.lengths, strides), y(c.lengths, strides);
  Tensor<TP> gamma({channels}), beta({channels});
  fill(x, init, 21);
  fill(dy, init, 22);
  fill(gamma, init, 23);
  fill(beta, init, 24);
  Tensor<float> mean({n, c.groups}), rstd({n, c.groups});
  ASSERT_TRUE(reference::groupnorm_forward(x, gamma, beta, c.groups, 1e-5, act, 0.8, y, mean, rstd).is_ok());
  Tensor<T> dx_ref(c.lengths, strides);
  Tensor<TP> dgamma_ref({channels}), dbeta_ref({channels});
  ASSERT_TRUE(reference::groupnorm_backward_data(dy, x, gamma, beta, mean, rstd, c.groups, act, 0.8, dx_ref).is_ok());
  ASSERT_TRUE(reference::groupnorm_backward_gamma_beta(dy, x, gamma, beta, mean, rstd, c.groups, act, 0.8, dgamma_ref,
                                                       dbeta_ref).is_ok());

  gn::BackwardProblem p;
  ASSERT_TRUE(gn::make_tensor_shape(c.lengths, strides, "x", &p.x).is_ok());
  p.dy = p.dx = p.x;
  p.groups = c.groups;
  p.activation = act;
  p.swish_beta = 0.8f;
  p.algorithm = algorithm;
  using Op = gn::Backward<T, TP>;
  auto d_x = upload(x), d_dy = upload(dy);
  auto d_gamma = upload(gamma), d_beta = upload(beta);
  auto d_mean = upload(mean), d_rstd = upload(rstd);
  DeviceBuffer<T> d_dx;
  DeviceBuffer<TP> d_dgamma, d_dbeta;
  DeviceBuffer<unsigned char> workspace;
  ASSERT_TRUE(d_dx.allocate(dx_ref.storage().size()).is_ok());
  ASSERT_TRUE(d_dgamma.allocate(channels).is_ok());
  ASSERT_TRUE(d_dbeta.allocate(channels).is_ok());
  ASSERT_TRUE(workspace.allocate(Op::workspace_size(p)).is_ok());
  poison(d_dx);
  poison(d_dgamma);
  poison(d_dbeta);
  poison(workspace);
  Status st;
  if (outputs == Outputs::kFused) {
    st = Op::run(p, {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(), d_dx.data(),
                     d_dgamma.data(), d_dbeta.data()},
                 workspace.data(), workspace.bytes(), nullptr);
  } else if (outputs == Outputs::kDataOnly) {
    using DataOp = gn::BackwardData<T, TP>;
    st = DataOp::run(p, {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(), d_dx.data()},
                     workspace.data(), workspace.bytes(), nullptr);
  } else {
    using GammaBetaOp = gn::BackwardGammaBeta<T, TP>;
    st = GammaBetaOp::run(p, {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(),
                              d_dgamma.data(), d_dbeta.data()},
                          workspace.data(), workspace.bytes(), nullptr);
  }
  if (one_read_not_applicable(algorithm, st)) return;
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
  const Index group_size = channels / c.groups * x.num_elements() / n / channels;
  const Index per_channel = x.num_elements() / channels;
  if (outputs != Outputs::kGammaBetaOnly) {
    const auto m = check_close(download(d_dx, dx_ref), dx_ref, default_tolerance<T>(group_size));
    EXPECT_TRUE(m.ok) << Op::name(p) << " dx: " << m.report;
  }
  if (outputs != Outputs::kDataOnly) {
    const auto g = check_close(download(d_dgamma, dgamma_ref), dgamma_ref, default_tolerance<TP>(per_channel));
    EXPECT_TRUE(g.ok) << Op::name(p) << " dgamma: " << g.report;
    const auto b = check_close(download(d_dbeta, dbeta_ref), dbeta_ref, default_tolerance<TP>(per_channel));
    EXPECT_TRUE(b.ok) << Op::name(p) << " dbeta: " << b.report;
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
          for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals})
            check_forward<T, TP>(c, layout, act, init, algorithm);
}

TYPED_TEST(GroupNormTest, BackwardMatchesReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (const Case& c : cases())
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kPadded})
      for (gn::Algorithm algorithm : algorithms_for(layout))
        for (Activation act : {Activation::kIdentity, Activation::kSwish})
          check_backward<T, TP>(c, layout, act, InitMethod::kDecimals, Outputs::kFused, algorithm);
}

TYPED_TEST(GroupNormTest, BackwardDataAndGammaBetaAlone) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  for (const Case& c : {cases()[1], cases()[3], cases()[6], cases()[7]})
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
      for (Outputs o : {Outputs::kDataOnly, Outputs::kGammaBetaOnly})
        check_backward<T, TP>(c, layout, Activation::kSwish, InitMethod::kIntegers, o);
}

// kOneRead runs the one-read kernels for packed planes with aligned pointers, a plane of whole
// vectors and a group that fits a block, and is refused with a reason where they do not apply.
TYPED_TEST(GroupNormTest, OneReadWhereItApplies) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = typename TypeParam::Data;
  using TP = typename TypeParam::Param;
  using Fwd = gn::Forward<T, TP>;
  using Bwd = gn::Backward<T, TP>;
  gn::ForwardProblem f = gn::ForwardProblem::packed({2, 40, 16, 16}, 4, /*channels_last=*/false);
  f.algorithm = gn::Algorithm::kOneRead;
  EXPECT_NE(Fwd::name(f).find("one_read"), std::string::npos) << Fwd::name(f);
  gn::BackwardProblem b = gn::BackwardProblem::packed({2, 40, 16, 16}, 4, /*channels_last=*/false);
  b.algorithm = gn::Algorithm::kOneRead;
  EXPECT_NE(Bwd::name(b).find("one_read"), std::string::npos) << Bwd::name(b);
  b.algorithm = gn::Algorithm::kThreePass;
  EXPECT_EQ(Bwd::name(b).find("one_read"), std::string::npos) << Bwd::name(b);
  // A group of 4 × 512 × 512 elements is far more than a block's registers hold.
  b = gn::BackwardProblem::packed({1, 128, 512, 512}, 32, /*channels_last=*/false);
  b.algorithm = gn::Algorithm::kAuto;
  EXPECT_EQ(Bwd::name(b).find("one_read"), std::string::npos) << Bwd::name(b);

  // A group of 8 × 128 × 128 elements: more than a block's registers, not more than a cluster's.
  f = gn::ForwardProblem::packed({2, 16, 128, 128}, 2, /*channels_last=*/false);
  f.algorithm = gn::Algorithm::kOneRead;
  if (hipgrad::cluster_launch_supported()) EXPECT_NE(Fwd::name(f).find("_k"), std::string::npos) << Fwd::name(f);
  // Channels last with 10 channels per group: bands of adjacent groups.
  f = gn::ForwardProblem::packed({2, 160, 48, 64}, 16, /*channels_last=*/true);
  f.algorithm = gn::Algorithm::kOneRead;
  EXPECT_NE(Fwd::name(f).find("_band"), std::string::npos) << Fwd::name(f);

  // Channels last with 10 channels per group: pairs of channels.
  f = gn::ForwardProblem::packed({2, 40, 16, 16}, 4, /*channels_last=*/true);
  f.algorithm = gn::Algorithm::kOneRead;
  EXPECT_NE(Fwd::name(f).find("one_read"), std::string::npos) << Fwd::name(f);
  // Channels last with 5 channels per group: odd, refused.
  f = gn::ForwardProblem::packed({2, 40, 16, 16}, 8, /*channels_last=*/true);
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

}  // namespace
