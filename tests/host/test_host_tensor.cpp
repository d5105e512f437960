/// @file test_host_tensor.cpp
/// @brief host::Tensor: packed strides for a memory order, element space of padded strides,
///        iteration order, offsets and element access, and the constructor's argument checks.

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "hipgrad/host/tensor.hpp"

namespace {

using hipgrad::host::Index;
using hipgrad::host::packed_strides;
using hipgrad::host::strides_for_order;
using hipgrad::host::Tensor;
using Indices = std::vector<Index>;

TEST(HostTensorStrides, RowMajorIsTheIdentityOrder) {
  EXPECT_EQ(packed_strides({2, 3, 4, 5}), (Indices{60, 20, 5, 1}));
  EXPECT_EQ(strides_for_order({2, 3, 4, 5}, {0, 1, 2, 3}), (Indices{60, 20, 5, 1}));
}

TEST(HostTensorStrides, NhwcOrderOfNchwLengths) {
  // Logical [N, C, H, W] = [2, 3, 4, 5] stored N, H, W, C: C fastest, then W, H, N.
  EXPECT_EQ(strides_for_order({2, 3, 4, 5}, {0, 2, 3, 1}), (Indices{60, 1, 15, 3}));
}

TEST(HostTensorStrides, GroupedConvLayoutNhwgc) {
  // Logical [G, N, C, H, W] = [2, 3, 4, 5, 6] stored N, H, W, G, C.
  EXPECT_EQ(strides_for_order({2, 3, 4, 5, 6}, {1, 3, 4, 0, 2}), (Indices{4, 240, 1, 48, 8}));
}

TEST(HostTensorStrides, ZeroLengthDimensionsDoNotZeroTheOtherStrides) {
  EXPECT_EQ(packed_strides({3, 0, 4}), (Indices{4, 4, 1}));
}

TEST(HostTensorStrides, RejectsOrdersThatAreNoPermutation) {
  EXPECT_THROW(strides_for_order({2, 3}, {0}), std::invalid_argument);
  EXPECT_THROW(strides_for_order({2, 3}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(strides_for_order({2, 3}, {0, 2}), std::invalid_argument);
  EXPECT_THROW(strides_for_order({2, 3}, {-1, 0}), std::invalid_argument);
}

TEST(HostTensor, PackedSizes) {
  const Tensor<float> t({2, 3, 4});
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.num_elements(), 24);
  EXPECT_EQ(t.element_space(), 24);
  EXPECT_EQ(t.storage().size(), 24u);
  EXPECT_EQ(t.storage_bytes(), 24 * sizeof(float));
  EXPECT_EQ(t.strides(), (Indices{12, 4, 1}));
}

TEST(HostTensor, ElementSpaceOfPaddedStrides) {
  // [3, 4] rows padded to 10 elements: the last row needs only its 4 elements.
  const Tensor<float> rows({3, 4}, {10, 1});
  EXPECT_EQ(rows.num_elements(), 12);
  EXPECT_EQ(rows.element_space(), 2 * 10 + 3 + 1);
  EXPECT_EQ(rows.storage().size(), 24u);
  // NHWC with the channels padded from 3 to 4: [N, C, H, W] = [2, 3, 2, 2].
  const Tensor<float> nhwc({2, 3, 2, 2}, {16, 1, 8, 4});
  EXPECT_EQ(nhwc.element_space(), 1 + 16 + 2 + 8 + 4);
  // A broadcast dimension (stride 0) adds nothing.
  const Tensor<float> broadcast({5, 3}, {0, 1});
  EXPECT_EQ(broadcast.element_space(), 3);
}

TEST(HostTensor, EmptyAndScalarTensors) {
  const Tensor<float> empty({4, 0, 3});
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_EQ(empty.element_space(), 0);
  int calls = 0;
  empty.for_each_index([&](const Indices&) { ++calls; });
  EXPECT_EQ(calls, 0);

  const Tensor<float> scalar(Indices{});
  EXPECT_EQ(scalar.num_elements(), 1);
  EXPECT_EQ(scalar.element_space(), 1);
  scalar.for_each_index([&](const Indices& index) {
    EXPECT_TRUE(index.empty());
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(HostTensor, ForEachIndexVisitsLastDimensionFastest) {
  const Tensor<int> t({2, 1, 3}, strides_for_order({2, 1, 3}, {2, 1, 0}));  // order of memory is irrelevant
  std::vector<Indices> visited;
  t.for_each_index([&](const Indices& index) { visited.push_back(index); });
  const std::vector<Indices> expected = {{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {1, 0, 0}, {1, 0, 1}, {1, 0, 2}};
  EXPECT_EQ(visited, expected);
}

TEST(HostTensor, OffsetAndAccessFollowTheStrides) {
  Tensor<int> t({2, 3, 4, 5}, strides_for_order({2, 3, 4, 5}, {0, 2, 3, 1}));  // NHWC
  EXPECT_EQ(t.offset(Indices{1, 2, 3, 4}), 1 * 60 + 2 * 1 + 3 * 15 + 4 * 3);
  t.at(1, 2, 3, 4) = 7;
  EXPECT_EQ(t.storage()[60 + 2 + 45 + 12], 7);
  EXPECT_EQ(t(Indices{1, 2, 3, 4}), 7);
  const Tensor<int>& view = t;
  EXPECT_EQ(view.at(1, 2, 3, 4), 7);
  EXPECT_EQ(view.length(2), 4);
  EXPECT_EQ(view.stride(1), 1);

  // Every logical index maps to a distinct storage offset in a packed layout.
  std::vector<int> hits(t.storage().size(), 0);
  t.for_each_index([&](const Indices& index) { ++hits[static_cast<std::size_t>(t.offset(index))]; });
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(HostTensor, ConstructorRejectsProgrammerErrors) {
  EXPECT_THROW(Tensor<float>({2, 3}, {1}), std::invalid_argument);
  EXPECT_THROW(Tensor<float>({2, -1}), std::invalid_argument);
  EXPECT_THROW(Tensor<float>({2, 3}, {3, -1}), std::invalid_argument);
}

}  // namespace
