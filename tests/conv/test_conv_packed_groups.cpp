/// @file test_conv_packed_groups.cpp
/// @brief kAuto's block-diagonal packing of groups (ops/conv/common/packed_groups.hpp). CPU: the
///        rule's group count; the packed problem's activations are the same memory as the
///        problem's; the CPU reference of the packed problem, its weight spread by the kernels'
///        index map (zeros off the diagonal), gives the problem's dx, and its dw gathered back by
///        that map gives the problem's dw, on 1-D/2-D/3-D problems with strides, dilations,
///        C ≠ K and weights in any strides. GPU (fp16, bf16): both ops under kAuto take the
///        packed path on sm_90 and match the CPU reference, outputs poisoned first, on 1-D/2-D/
///        3-D problems with strides, dilations, asymmetric pads, C ≠ K and spaced rows.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "conv/conv_test_problems.hpp"
#include "conv/conv_test_runs.hpp"
#include "conv_instances.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/common/packed_groups.hpp"
#include "hipgrad/ops/conv/common/packed_groups_kernels.hpp"

namespace {

using hipgrad::Index;
using hipgrad::conv::Algorithm;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::host::InitMethod;
using hipgrad::host::Tensor;
using hipgrad::test::conv_params;
namespace detail = hipgrad::conv::detail;

template <int NDim>
int count_of(const ConvParams<NDim>& p, ConvLayout layout = ConvLayout::kNHWGC) {
  return detail::packed_group_count<hipgrad::half, NDim>(Problem<NDim>::packed(p, layout));
}

TEST(ConvPackedGroups, CountFollowsTheRule) {
  auto resnext = [](Index g, Index c, Index k) {
    return conv_params<2>(g, 2, k, c, {3, 3}, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  };
  // The most groups (a power of two dividing G) whose channels fit 64.
  EXPECT_EQ(count_of(resnext(32, 4, 4)), 16);
  EXPECT_EQ(count_of(resnext(32, 8, 8)), 8);
  EXPECT_EQ(count_of(resnext(32, 16, 16)), 4);
  EXPECT_EQ(count_of(resnext(32, 32, 32)), 2);
  EXPECT_EQ(count_of(resnext(10, 16, 16)), 2);
  EXPECT_EQ(count_of(resnext(14, 24, 24)), 2);
  EXPECT_EQ(count_of(resnext(12, 4, 8)), 4);  // the wider side counts
  // None: odd G, depthwise and 2 channels, more than 32 channels, NCHW and GNHWC, fp32, forced.
  EXPECT_EQ(count_of(resnext(7, 8, 8)), 1);
  EXPECT_EQ(count_of(resnext(32, 1, 1)), 1);
  EXPECT_EQ(count_of(resnext(32, 2, 2)), 1);
  EXPECT_EQ(count_of(resnext(32, 4, 48)), 1);
  EXPECT_EQ(count_of(resnext(32, 8, 8), ConvLayout::kNGCHW), 1);
  EXPECT_EQ(count_of(resnext(32, 8, 8), ConvLayout::kGNHWC), 1);
  const Problem<2> plain = Problem<2>::packed(resnext(32, 8, 8));
  EXPECT_EQ((detail::packed_group_count<float, 2>(plain)), 1);
  Problem<2> forced = plain;
  forced.algorithm = Algorithm::kTmaBoxes;
  EXPECT_EQ((detail::packed_group_count<hipgrad::half, 2>(forced)), 1);
}

/// Every element of the packed problem's activation (packed lengths, packed strides) lies where
/// the problem's element of the same group and channel does.
template <int NDim>
void expect_same_memory(const std::vector<Index>& lengths, const std::vector<Index>& strides,
                        const std::vector<Index>& packed_lengths, const std::vector<Index>& packed_strides,
                        int groups) {
  const Tensor<char> view(lengths, strides), packed(packed_lengths, packed_strides);
  const Index channels = lengths[2];
  packed.for_each_index([&](const std::vector<Index>& i) {
    std::vector<Index> j = i;
    j[0] = i[0] * groups + i[2] / channels;
    j[2] = i[2] % channels;
    EXPECT_EQ(packed.offset(i), view.offset(j));
  });
}

/// The packed weight of `w` (at problem's weight strides) by the kernels' index map.
template <int NDim>
Tensor<double> spread_on_cpu(const Problem<NDim>& problem, const Tensor<double>& w, int groups) {
  const Problem<NDim> packed = detail::packed_problem(problem, groups);
  Tensor<double> out(packed.params.weight_lengths(), packed.weight_strides);
  const auto map = detail::packed_weight_params<double, NDim>(problem, groups, true);
  for (Index i = 0; i < map.elements; ++i) {
    const std::int64_t source = detail::packed_weight_source(map, i);
    out.storage()[static_cast<std::size_t>(i)] = source < 0 ? 0.0 : w.storage()[static_cast<std::size_t>(source)];
  }
  return out;
}

/// The CPU reference of the packed problem against the problem's, both ops.
template <int NDim>
void expect_packing_exact(const ConvParams<NDim>& p, ConvLayout weight_layout, std::uint64_t seed) {
  Problem<NDim> problem = Problem<NDim>::packed(p);
  problem.weight_strides = hipgrad::conv::weight_strides(p, weight_layout);
  const int groups = detail::packed_group_count<hipgrad::half, NDim>(problem);
  ASSERT_GT(groups, 1) << p.to_string();
  SCOPED_TRACE(p.to_string() + " packed by " + std::to_string(groups));
  const Problem<NDim> packed = detail::packed_problem(problem, groups);
  const ConvParams<NDim>& pp = packed.params;
  expect_same_memory<NDim>(p.input_lengths(), problem.input_strides, pp.input_lengths(), packed.input_strides, groups);
  expect_same_memory<NDim>(p.output_lengths(), problem.output_strides, pp.output_lengths(), packed.output_strides,
                           groups);

  Tensor<double> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  Tensor<double> w(p.weight_lengths(), problem.weight_strides);
  hipgrad::host::fill(x, InitMethod::kIntegers, seed);
  hipgrad::host::fill(dy, InitMethod::kIntegers, seed + 1);
  hipgrad::host::fill(w, InitMethod::kIntegers, seed + 2);
  // The same storage viewed as the packed problem's tensors.
  Tensor<double> packed_x(pp.input_lengths(), packed.input_strides);
  Tensor<double> packed_dy(pp.output_lengths(), packed.output_strides);
  packed_x.storage() = x.storage();
  packed_dy.storage() = dy.storage();

  Tensor<double> dx(p.input_lengths()), packed_dx(pp.input_lengths(), packed.input_strides);
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_data(dy, w, dx, p).is_ok());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_data(packed_dy, spread_on_cpu(problem, w, groups), packed_dx, pp)
                  .is_ok());
  Tensor<double> dx_view(p.input_lengths(), problem.input_strides);
  dx_view.storage() = packed_dx.storage();
  dx.for_each_index([&](const std::vector<Index>& i) { ASSERT_EQ(dx(i), dx_view(i)); });

  Tensor<double> dw(p.weight_lengths()), packed_dw(pp.weight_lengths(), packed.weight_strides);
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_weight(x, dy, dw, p).is_ok());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_weight(packed_x, packed_dy, packed_dw, pp).is_ok());
  // Gathered by the map: every dw element written once, from its diagonal block.
  Tensor<double> gathered(p.weight_lengths(), problem.weight_strides);
  std::vector<int> writes(gathered.storage().size(), 0);
  const auto map = detail::packed_weight_params<double, NDim>(problem, groups, false);
  for (Index i = 0; i < map.elements; ++i) {
    const std::int64_t source = detail::packed_weight_source(map, i);
    if (source < 0) continue;
    gathered.storage()[static_cast<std::size_t>(source)] = packed_dw.storage()[static_cast<std::size_t>(i)];
    ++writes[static_cast<std::size_t>(source)];
  }
  dw.for_each_index([&](const std::vector<Index>& i) {
    ASSERT_EQ(writes[static_cast<std::size_t>(gathered.offset(i))], 1);
    ASSERT_EQ(dw(i), gathered(i));
  });
}

TEST(ConvPackedGroups, PackedProblemsGiveTheReference) {
  std::uint64_t seed = 7000;
  expect_packing_exact<1>(conv_params<1>(6, 2, 4, 4, {3}, {23}, {2}, {1}, {1}, {1}), ConvLayout::kNHWGC, seed++);
  expect_packing_exact<1>(conv_params<1>(4, 1, 8, 16, {5}, {31}, {1}, {2}, {4}, {3}), ConvLayout::kNGCHW, seed++);
  expect_packing_exact<2>(conv_params<2>(8, 2, 4, 4, {3, 3}, {9, 10}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                          ConvLayout::kNHWGC, seed++);
  expect_packing_exact<2>(conv_params<2>(6, 1, 12, 8, {3, 2}, {11, 9}, {2, 1}, {1, 2}, {1, 0}, {2, 1}),
                          ConvLayout::kNGCHW, seed++);
  expect_packing_exact<2>(conv_params<2>(14, 1, 24, 24, {3, 3}, {6, 5}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
                          ConvLayout::kNHWGC, seed++);
  expect_packing_exact<3>(conv_params<3>(4, 1, 8, 4, {3, 1, 3}, {4, 5, 6}, {1, 2, 1}, {1, 1, 2}, {1, 0, 2}, {1, 1, 1}),
                          ConvLayout::kNHWGC, seed++);
}

template <typename T>
class ConvPackedGroupsTest : public ::testing::Test {};
using PackedTypes = ::testing::Types<hipgrad::half, hipgrad::bfloat16>;
TYPED_TEST_SUITE(ConvPackedGroupsTest, PackedTypes);

/// `p` channels-last with N and every spatial length spaced by one element: the groups' channels
/// stay adjacent, the rows between them do not.
template <int NDim>
Problem<NDim> spaced_rows(const ConvParams<NDim>& p) {
  Problem<NDim> problem = Problem<NDim>::packed(p);
  auto spaced = [](std::vector<Index> lengths) {
    for (std::size_t d = 1; d < lengths.size(); d = d == 1 ? 3 : d + 1) lengths[d] += 1;
    return hipgrad::strides_for_order(lengths, hipgrad::conv::activation_order<NDim>(ConvLayout::kNHWGC));
  };
  problem.input_strides = spaced(p.input_lengths());
  problem.output_strides = spaced(p.output_lengths());
  return problem;
}

/// Both ops under kAuto on `problem`, integer and decimal data; on sm_90 they must pack.
template <typename T, int NDim>
void check_packed(const Problem<NDim>& problem, std::uint64_t seed) {
  const bool boxes_here = hipgrad::current_device_info().major == 9;
  for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
    const std::string name = hipgrad::test::check_backward_data<T, NDim>(problem, init, seed++);
    EXPECT_EQ(name.find("_packed") != std::string::npos, boxes_here) << name;
    hipgrad::test::check_backward_weight<T, NDim>(problem, init, seed++);
    const std::string weight = hipgrad::conv::BackwardWeight<T, NDim>::name(problem);
    EXPECT_EQ(weight.find("_packed") != std::string::npos, boxes_here) << weight;
  }
}

TYPED_TEST(ConvPackedGroupsTest, AutoPacksAndMatchesTheReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  std::uint64_t seed = 9000;
  const ConvParams<2> resnext = conv_params<2>(32, 2, 4, 4, {3, 3}, {14, 13}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  check_packed<TypeParam, 2>(Problem<2>::packed(resnext), seed += 10);
  check_packed<TypeParam, 2>(spaced_rows(resnext), seed += 10);
  check_packed<TypeParam, 2>(
      Problem<2>::packed(conv_params<2>(16, 3, 8, 8, {3, 3}, {15, 17}, {2, 2}, {1, 1}, {1, 1}, {1, 1})), seed += 10);
  check_packed<TypeParam, 2>(
      Problem<2>::packed(conv_params<2>(10, 2, 16, 16, {3, 3}, {7, 7}, {1, 1}, {2, 2}, {2, 2}, {2, 2})), seed += 10);
  check_packed<TypeParam, 2>(
      Problem<2>::packed(conv_params<2>(14, 2, 24, 24, {3, 3}, {7, 6}, {1, 1}, {1, 1}, {1, 0}, {0, 1})), seed += 10);
  check_packed<TypeParam, 1>(Problem<1>::packed(conv_params<1>(16, 2, 32, 32, {5}, {61}, {1}, {1}, {2}, {2})),
                             seed += 10);
  check_packed<TypeParam, 1>(Problem<1>::packed(conv_params<1>(8, 2, 16, 8, {3}, {40}, {2}, {1}, {1}, {1})),
                             seed += 10);
  check_packed<TypeParam, 3>(
      Problem<3>::packed(conv_params<3>(8, 1, 8, 8, {3, 3, 3}, {4, 6, 5}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1})),
      seed += 10);
}

}  // namespace
