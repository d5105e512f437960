/// @file test_groupnorm_random.cpp
/// @brief GroupNorm forward and backward on seeded random problems against the CPU reference: any
///        order of the dimensions, padded strides, each tensor with its own layout and its first
///        element at any offset from an allocation, every algorithm, identity and Swish of either
///        sign of β. Every output buffer is poisoned first and must come back poisoned outside its
///        logical elements.
///
/// The problems are drawn from fixed seeds, so a failure names a seed that reproduces it. A third
/// of them are packed NCHW or NHWC with aligned pointers and vector-friendly channel counts, so
/// that the one-read and staged kernels are among those checked; the test asserts that each
/// algorithm ran on some of them.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "groupnorm/groupnorm_test_util.hpp"
#include "hipgrad/core/hip_check.hpp"
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
using hipgrad_test::require;

constexpr int kProblems = 192;
constexpr std::uint64_t kFirstSeed = 7001;
constexpr std::size_t kGuardElements = 9;  ///< poisoned elements after each tensor's last one

/// One activation tensor's layout: strides over [N, C, spatial...] and where its first element
/// lies in its allocation.
struct Placement {
  std::vector<Index> strides;
  std::size_t offset = 0;  ///< elements before the first one
};

struct RandomProblem {
  std::uint64_t seed = 0;
  std::vector<Index> lengths;  ///< [N, C, spatial...]
  Index groups = 1;
  Placement x, dy, out;  ///< out: y of the forward, dx of the backward
  Activation activation = Activation::kIdentity;
  float swish_beta = 1.0f;
  InitMethod init = InitMethod::kDecimals;
  bool grouped = false;  ///< x and dy from fill_exposing_reductions (else fill())

  hipgrad_test::Data data() const {
    using hipgrad_test::Data;
    if (grouped) return init == InitMethod::kIntegers ? Data::kGroupedIntegers : Data::kGroupedDecimals;
    return init == InitMethod::kIntegers ? Data::kIntegers : Data::kDecimals;
  }

  std::string describe() const {
    const auto placement = [](const char* name, const Placement& p) {
      return std::string(" ") + name + " strides " + hipgrad::lengths_to_string(p.strides) + " +" +
             std::to_string(p.offset);
    };
    return "seed " + std::to_string(seed) + " " + hipgrad::lengths_to_string(lengths) + " G" + std::to_string(groups) +
           placement("x", x) + placement("dy", dy) + placement("out", out) + " " + gn::activation_name(activation) +
           " beta " + std::to_string(swish_beta) + " " + hipgrad_test::data_name(data());
  }
};

template <typename T>
T pick(std::mt19937_64& rng, const std::vector<T>& from) {
  return from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng)];
}

Index uniform(std::mt19937_64& rng, Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(rng); }

std::vector<int> identity_order(std::size_t rank) {
  std::vector<int> order(rank);
  for (std::size_t i = 0; i < rank; ++i) order[i] = static_cast<int>(i);
  return order;
}

/// NCHW, NHWC or any order of the dimensions, sometimes with every extent padded.
std::vector<Index> random_strides(const std::vector<Index>& lengths, std::mt19937_64& rng) {
  std::vector<int> order = identity_order(lengths.size());
  const Index kind = uniform(rng, 0, 9);
  if (kind >= 3 && kind < 7 && order.size() > 2) {  // channels last
    order.erase(order.begin() + 1);
    order.push_back(1);
  } else if (kind >= 7) {
    std::shuffle(order.begin(), order.end(), rng);
  }
  std::vector<Index> extents = lengths;
  if (uniform(rng, 0, 2) == 0)
    for (Index& e : extents) e += uniform(rng, 0, 3);
  return strides_for_order(extents, order);
}

/// Packed NCHW or NHWC, the layouts the fast kernels take.
std::vector<Index> packed_strides_of(const std::vector<Index>& lengths, bool channels_last) {
  std::vector<int> order = identity_order(lengths.size());
  if (channels_last && order.size() > 2) {
    order.erase(order.begin() + 1);
    order.push_back(1);
  }
  return strides_for_order(lengths, order);
}

RandomProblem random_problem(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  RandomProblem p;
  p.seed = seed;
  const bool fast_shaped = seed % 3 == 0;
  // Every seventh problem is larger, so that groups also span several blocks (a cluster).
  const Index max_spatial = seed % 7 == 0 ? 16384 : 4096, max_elements = seed % 7 == 0 ? 1 << 20 : 150000;
  const Index per_group = fast_shaped ? pick<Index>(rng, {2, 4, 8, 10, 16, 24, 32, 40, 64})
                                      : pick<Index>(rng, {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 40, 64});
  p.groups = uniform(rng, 1, 8);
  const Index spatial_rank = uniform(rng, fast_shaped ? 1 : 0, 3);
  p.lengths = {uniform(rng, 1, 4), p.groups * per_group};
  Index spatial = 1;
  for (Index d = 0; d < spatial_rank; ++d) {
    Index length = pick<Index>(rng, {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 32, 33, 64, 128, 257});
    while (spatial * length > max_spatial) length = std::max<Index>(1, length / 2);
    spatial *= length;
    p.lengths.push_back(length);
  }
  while (p.lengths[0] > 1 && p.lengths[0] * p.lengths[1] * spatial > max_elements) --p.lengths[0];

  if (fast_shaped) {
    const bool channels_last = uniform(rng, 0, 1) == 1;
    p.x.strides = p.dy.strides = p.out.strides = packed_strides_of(p.lengths, channels_last);
    // Offsets that keep 16-byte alignment for every data type (a multiple of 8 elements).
    p.x.offset = static_cast<std::size_t>(8 * uniform(rng, 0, 1));
    p.dy.offset = static_cast<std::size_t>(8 * uniform(rng, 0, 1));
    p.out.offset = static_cast<std::size_t>(8 * uniform(rng, 0, 1));
  } else {
    p.x.strides = random_strides(p.lengths, rng);
    p.dy.strides = uniform(rng, 0, 2) == 0 ? random_strides(p.lengths, rng) : p.x.strides;
    p.out.strides = uniform(rng, 0, 2) == 0 ? random_strides(p.lengths, rng) : p.x.strides;
    for (Placement* t : {&p.x, &p.dy, &p.out})
      t->offset = static_cast<std::size_t>(uniform(rng, 0, 1) == 0 ? 0 : pick<Index>(rng, {1, 2, 3, 4, 5, 8, 13}));
  }
  p.activation = uniform(rng, 0, 1) == 0 ? Activation::kIdentity : Activation::kSwish;
  p.swish_beta = pick<float>(rng, {1.0f, 0.8f, -0.75f, 2.5f, 0.0f, 0.03f, 40.0f});
  p.init = uniform(rng, 0, 1) == 0 ? InitMethod::kIntegers : InitMethod::kDecimals;
  // Drawn last, so that the problems of the seeds stay the ones they were before it existed.
  p.grouped = uniform(rng, 0, 1) == 0;
  return p;
}

/// A device copy of `t` whose first element lies `offset` elements into an allocation that is
/// poisoned everywhere else (before, in the gaps of padded strides, and kGuardElements after).
template <typename T>
class PlacedBuffer {
 public:
  PlacedBuffer(const Tensor<T>& t, std::size_t offset) : offset_(offset), elements_(t.storage().size()) {
    allocate_poisoned();
    require(hipgrad::status_from_hip(
                hipMemcpy(buffer_.data() + offset, t.data(), elements_ * sizeof(T), hipMemcpyHostToDevice), "hipMemcpy",
                __FILE__, __LINE__),
            "copy to the device");
  }
  /// For an output: poison only.
  PlacedBuffer(std::size_t elements, std::size_t offset) : offset_(offset), elements_(elements) { allocate_poisoned(); }

  T* data() { return buffer_.data() + offset_; }
  const T* data() const { return buffer_.data() + offset_; }

  /// The tensor read back in the layout of `like`; counts in `*touched` the elements outside its
  /// logical ones that no longer hold the poison.
  Tensor<T> read_back(Tensor<T> like, std::int64_t* touched) const {
    std::vector<T> all(buffer_.size());
    require(buffer_.copy_to_host(all.data(), all.size()), "copy from the device");
    std::vector<bool> logical(all.size(), false);
    like.for_each_index([&](const std::vector<Index>& i) {
      logical[offset_ + static_cast<std::size_t>(like.offset(i))] = true;
      like(i) = all[offset_ + static_cast<std::size_t>(like.offset(i))];
    });
    *touched = hipgrad_test::written_outside(all.data(), all.size(), logical);
    return like;
  }

 private:
  void allocate_poisoned() {
    require(buffer_.allocate(offset_ + elements_ + kGuardElements), "allocation");
    require(buffer_.fill_bytes(0xff), "poison");
  }

  DeviceBuffer<T> buffer_;
  std::size_t offset_, elements_;
};

template <typename T>
DeviceBuffer<T> poisoned_dense(std::size_t elements) {
  DeviceBuffer<T> b;
  require(b.allocate(elements), "allocation");
  require(b.fill_bytes(0xff), "poison");
  return b;
}

/// The fields a forward and a backward problem share, from `rp`.
template <typename Problem>
void set_common(Problem* p, const RandomProblem& rp, gn::Algorithm algorithm) {
  p->groups = rp.groups;
  p->activation = rp.activation;
  p->swish_beta = rp.swish_beta;
  p->algorithm = algorithm;
}

gn::TensorShape shape_of(const std::vector<Index>& lengths, const Placement& p, const char* name) {
  gn::TensorShape s;
  EXPECT_TRUE(gn::make_tensor_shape(lengths, p.strides, name, &s).is_ok());
  return s;
}

/// kAuto always; a forced algorithm may be refused as not applicable (kNotSupported), and any
/// other refusal fails the test.
const gn::Algorithm kAlgorithms[] = {gn::Algorithm::kAuto, gn::Algorithm::kThreePass, gn::Algorithm::kOneRead,
                                     gn::Algorithm::kStaged};

bool refused_as_not_applicable(gn::Algorithm algorithm, const Status& st) {
  return algorithm != gn::Algorithm::kAuto && algorithm != gn::Algorithm::kThreePass &&
         st.code() == hipgrad::StatusCode::kNotSupported;
}

/// Problems each algorithm ran (not refused), for the coverage check.
using RunCounts = std::map<gn::Algorithm, int>;

template <typename T, typename TP>
void check_forward(const RandomProblem& rp, RunCounts* runs) {
  SCOPED_TRACE("forward " + rp.describe());
  const Index n = rp.lengths[0], channels = rp.lengths[1];
  Tensor<T> x(rp.lengths, rp.x.strides), y_ref(rp.lengths, rp.out.strides);
  Tensor<TP> gamma({channels}), beta({channels});
  hipgrad_test::fill_data(x, static_cast<Tensor<T>*>(nullptr), rp.groups, rp.data(), rp.seed + 1);
  fill(gamma, rp.init, rp.seed + 2);
  fill(beta, rp.init, rp.seed + 3);
  Tensor<float> mean_ref({n, rp.groups}), rstd_ref({n, rp.groups});
  ASSERT_TRUE(reference::groupnorm_forward(x, gamma, beta, rp.groups, 1e-5, rp.activation, rp.swish_beta, y_ref,
                                           mean_ref, rstd_ref)
                  .is_ok());
  reference::GroupNormTolerances tol;
  ASSERT_TRUE(
      (reference::groupnorm_tolerances<T, TP>(x, nullptr, gamma, beta, mean_ref, rstd_ref, rp.groups, &tol).is_ok()));
  PlacedBuffer<T> d_x(x, rp.x.offset);
  auto d_gamma = hipgrad_test::upload(gamma), d_beta = hipgrad_test::upload(beta);
  for (gn::Algorithm algorithm : kAlgorithms) {
    SCOPED_TRACE(gn::algorithm_name(algorithm));
    gn::ForwardProblem p;
    p.x = shape_of(rp.lengths, rp.x, "x");
    p.y = shape_of(rp.lengths, rp.out, "y");
    set_common(&p, rp, algorithm);
    using Op = gn::Forward<T, TP>;
    PlacedBuffer<T> d_y(y_ref.storage().size(), rp.out.offset);
    auto d_mean = poisoned_dense<float>(n * rp.groups), d_rstd = poisoned_dense<float>(n * rp.groups);
    auto workspace = poisoned_dense<unsigned char>(Op::workspace_size(p));
    const Status st = Op::run(p, {d_x.data(), d_gamma.data(), d_beta.data(), d_y.data(), d_mean.data(), d_rstd.data()},
                              workspace.data(), workspace.bytes(), nullptr);
    if (refused_as_not_applicable(algorithm, st)) continue;
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
    ++(*runs)[algorithm];
    std::int64_t touched = 0;
    const auto ym = check_close(d_y.read_back(y_ref, &touched), y_ref, tol.y);
    EXPECT_TRUE(ym.ok) << Op::name(p) << " y: " << ym.report;
    EXPECT_EQ(touched, 0) << Op::name(p) << ": elements of y's allocation outside y were written";
    const auto mm = check_close(hipgrad_test::download(d_mean, mean_ref), mean_ref, tol.mean);
    EXPECT_TRUE(mm.ok) << Op::name(p) << " mean: " << mm.report;
    const auto rm = check_close(hipgrad_test::download(d_rstd, rstd_ref), rstd_ref, tol.rstd);
    EXPECT_TRUE(rm.ok) << Op::name(p) << " rstd: " << rm.report;
  }
}

enum class Outputs { kFused, kDataOnly, kGammaBetaOnly };

template <typename T, typename TP>
void check_backward(const RandomProblem& rp, RunCounts* runs) {
  const auto outputs = static_cast<Outputs>(rp.seed % 5 < 3 ? 0 : rp.seed % 5 - 2);
  SCOPED_TRACE("backward (outputs " + std::to_string(static_cast<int>(outputs)) + ") " + rp.describe());
  const Index n = rp.lengths[0], channels = rp.lengths[1];
  Tensor<T> x(rp.lengths, rp.x.strides), dy(rp.lengths, rp.dy.strides), y(rp.lengths, rp.x.strides);
  Tensor<TP> gamma({channels}), beta({channels});
  hipgrad_test::fill_data(x, &dy, rp.groups, rp.data(), rp.seed + 11);
  fill(gamma, rp.init, rp.seed + 13);
  fill(beta, rp.init, rp.seed + 14);
  Tensor<float> mean({n, rp.groups}), rstd({n, rp.groups});
  ASSERT_TRUE(reference::groupnorm_forward(x, gamma, beta, rp.groups, 1e-5, rp.activation, rp.swish_beta, y, mean, rstd)
                  .is_ok());
  Tensor<T> dx_ref(rp.lengths, rp.out.strides);
  Tensor<TP> dgamma_ref({channels}), dbeta_ref({channels});
  ASSERT_TRUE(reference::groupnorm_backward_data(dy, x, gamma, beta, mean, rstd, rp.groups, rp.activation,
                                                 rp.swish_beta, dx_ref)
                  .is_ok());
  ASSERT_TRUE(reference::groupnorm_backward_gamma_beta(dy, x, gamma, beta, mean, rstd, rp.groups, rp.activation,
                                                       rp.swish_beta, dgamma_ref, dbeta_ref)
                  .is_ok());
  reference::GroupNormTolerances tol;
  ASSERT_TRUE(reference::groupnorm_tolerances(x, &dy, gamma, beta, mean, rstd, rp.groups, &tol).is_ok());
  PlacedBuffer<T> d_x(x, rp.x.offset), d_dy(dy, rp.dy.offset);
  auto d_gamma = hipgrad_test::upload(gamma), d_beta = hipgrad_test::upload(beta);
  auto d_mean = hipgrad_test::upload(mean), d_rstd = hipgrad_test::upload(rstd);
  for (gn::Algorithm algorithm : kAlgorithms) {
    SCOPED_TRACE(gn::algorithm_name(algorithm));
    gn::BackwardProblem p;
    p.x = shape_of(rp.lengths, rp.x, "x");
    p.dy = shape_of(rp.lengths, rp.dy, "dy");
    p.dx = shape_of(rp.lengths, rp.out, "dx");
    set_common(&p, rp, algorithm);
    using Op = gn::Backward<T, TP>;
    PlacedBuffer<T> d_dx(dx_ref.storage().size(), rp.out.offset);
    auto d_dgamma = poisoned_dense<TP>(channels), d_dbeta = poisoned_dense<TP>(channels);
    auto workspace = poisoned_dense<unsigned char>(Op::workspace_size(p));
    Status st;
    if (outputs == Outputs::kFused) {
      st = Op::run(p,
                   {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(), d_dx.data(),
                    d_dgamma.data(), d_dbeta.data()},
                   workspace.data(), workspace.bytes(), nullptr);
    } else if (outputs == Outputs::kDataOnly) {
      st = gn::BackwardData<T, TP>::run(
          p, {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(), d_rstd.data(), d_dx.data()},
          workspace.data(), workspace.bytes(), nullptr);
    } else {
      st = gn::BackwardGammaBeta<T, TP>::run(p,
                                             {d_dy.data(), d_x.data(), d_gamma.data(), d_beta.data(), d_mean.data(),
                                              d_rstd.data(), d_dgamma.data(), d_dbeta.data()},
                                             workspace.data(), workspace.bytes(), nullptr);
    }
    if (refused_as_not_applicable(algorithm, st)) continue;
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(hipDeviceSynchronize(), hipSuccess);
    ++(*runs)[algorithm];
    std::int64_t touched = 0;
    const Tensor<T> dx_out = d_dx.read_back(dx_ref, &touched);
    if (outputs != Outputs::kGammaBetaOnly) {
      const auto m = check_close(dx_out, dx_ref, tol.dx);
      EXPECT_TRUE(m.ok) << Op::name(p) << " dx: " << m.report;
      EXPECT_EQ(touched, 0) << Op::name(p) << ": elements of dx's allocation outside dx were written";
    } else {
      EXPECT_EQ(touched, 0) << Op::name(p) << ": dx's allocation was written by an op without dx";
    }
    const Tensor<TP> dgamma_out = hipgrad_test::download(d_dgamma, dgamma_ref);
    const Tensor<TP> dbeta_out = hipgrad_test::download(d_dbeta, dbeta_ref);
    if (outputs != Outputs::kDataOnly) {
      const auto g = check_close(dgamma_out, dgamma_ref, tol.dgamma);
      EXPECT_TRUE(g.ok) << Op::name(p) << " dgamma: " << g.report;
      const auto b = check_close(dbeta_out, dbeta_ref, tol.dbeta);
      EXPECT_TRUE(b.ok) << Op::name(p) << " dbeta: " << b.report;
    }
  }
}

template <typename Types>
class GroupNormRandomTest : public ::testing::Test {};

TYPED_TEST_SUITE(GroupNormRandomTest, hipgrad_test::GroupNormTypePairs);

/// Every algorithm must have run on some of the problems: otherwise the fast kernels would go
/// unchecked here while the test still passed.
void expect_every_algorithm_ran(const RunCounts& runs) {
  for (gn::Algorithm algorithm : kAlgorithms) {
    const auto it = runs.find(algorithm);
    EXPECT_TRUE(it != runs.end() && it->second > 0) << gn::algorithm_name(algorithm) << " ran on none of the problems";
    if (it != runs.end())
      std::printf("  %-10s ran on %d of %d problems\n", gn::algorithm_name(algorithm), it->second, kProblems);
  }
}

TYPED_TEST(GroupNormRandomTest, ForwardMatchesReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  RunCounts runs;
  for (int i = 0; i < kProblems; ++i)
    check_forward<typename TypeParam::Data, typename TypeParam::Param>(random_problem(kFirstSeed + i), &runs);
  expect_every_algorithm_ran(runs);
}

TYPED_TEST(GroupNormRandomTest, BackwardMatchesReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  RunCounts runs;
  for (int i = 0; i < kProblems; ++i)
    check_backward<typename TypeParam::Data, typename TypeParam::Param>(random_problem(kFirstSeed + i), &runs);
  expect_every_algorithm_ran(runs);
}

// The generator itself: problems are valid and reproducible, and the layouts vary (a generator
// that always returned packed NCHW would make the tests above a repeat of test_groupnorm).
TEST(GroupNormRandomProblems, AreValidReproducibleAndVaried) {
  std::map<std::string, int> orders;
  int padded = 0, offset = 0, distinct_layouts = 0;
  for (int i = 0; i < kProblems; ++i) {
    const RandomProblem a = random_problem(kFirstSeed + i), b = random_problem(kFirstSeed + i);
    EXPECT_EQ(a.describe(), b.describe());
    gn::BackwardProblem p;
    p.x = shape_of(a.lengths, a.x, "x");
    p.dy = shape_of(a.lengths, a.dy, "dy");
    p.dx = shape_of(a.lengths, a.out, "dx");
    p.groups = a.groups;
    EXPECT_TRUE(p.validate().is_ok()) << a.describe() << ": " << p.validate().to_string();
    std::vector<int> order = identity_order(a.lengths.size());
    std::sort(order.begin(), order.end(), [&](int l, int r) { return a.x.strides[l] > a.x.strides[r]; });
    std::string key;
    for (int d : order) key += std::to_string(d);
    ++orders[key];
    const Tensor<float> x(a.lengths, a.x.strides);
    padded += x.element_space() > x.num_elements();
    offset += a.x.offset % 8 != 0;
    distinct_layouts += a.dy.strides != a.x.strides || a.out.strides != a.x.strides;
  }
  EXPECT_GE(orders.size(), 8u) << "dimension orders drawn";
  EXPECT_GE(padded, kProblems / 8) << "padded layouts drawn";
  EXPECT_GE(offset, kProblems / 8) << "unaligned first elements drawn";
  EXPECT_GE(distinct_layouts, kProblems / 8) << "problems whose tensors differ in layout";
}

}  // namespace
