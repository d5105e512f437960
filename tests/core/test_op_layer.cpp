/// @file test_op_layer.cpp
/// @brief The plumbing every op shares (core/): workspace carving and its check, the output
///        overlap check, the plan cache, the per-device information (against the runtime, from
///        several threads at once) and the once-per-process kernel opt-ins; and the op contract
///        (docs/architecture.md), checked on every op's signatures.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <thread>
#include <vector>

#include "common/gpu_test.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"
#include "hipgrad/ops/gemm/gemm.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/backward_data.hpp"
#include "hipgrad/ops/groupnorm/backward_gamma_beta.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "groupnorm_instances.hpp"

namespace {

using hipgrad::StatusCode;

TEST(WorkspaceCarver, AlignsEveryBufferAndCountsWithoutABase) {
  hipgrad::WorkspaceCarver counting(nullptr, 0);
  EXPECT_EQ(counting.take<float>(3), nullptr);  // counting only
  EXPECT_EQ(counting.take<double>(1), nullptr);
  EXPECT_EQ(counting.used(), 256u + 8u);  // the second buffer starts at the next 256 bytes
  EXPECT_EQ(counting.check().code(), StatusCode::kWorkspaceTooSmall);

  alignas(256) static unsigned char memory[1024];
  hipgrad::WorkspaceCarver carver(memory, sizeof(memory));
  float* a = carver.take<float>(3);
  double* b = carver.take<double>(1);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(a), memory);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(b), memory + 256);
  EXPECT_TRUE(carver.check().is_ok());
  EXPECT_EQ(carver.take<unsigned char>(1024), nullptr);  // past the end: null, and check refuses
  const hipgrad::Status st = carver.check();
  EXPECT_EQ(st.code(), StatusCode::kWorkspaceTooSmall);
  EXPECT_NE(st.message().find("needs 1536 bytes, got 1024"), std::string::npos) << st.to_string();
}

TEST(WorkspaceCheck, NullOrShortIsRefusedOnlyWhenSomethingIsNeeded) {
  EXPECT_TRUE(hipgrad::check_workspace(0, nullptr, 0).is_ok());
  EXPECT_EQ(hipgrad::check_workspace(1, nullptr, 100).code(), StatusCode::kWorkspaceTooSmall);
  int word = 0;
  EXPECT_EQ(hipgrad::check_workspace(8, &word, 4).code(), StatusCode::kWorkspaceTooSmall);
  EXPECT_TRUE(hipgrad::check_workspace(4, &word, 4).is_ok());
}

TEST(OutputsDisjoint, NamesTheFirstOverlap) {
  static unsigned char memory[64];
  const hipgrad::MemoryRange outputs[] = {{memory, 16, "y"}, {memory + 16, 8, "mean"}, {nullptr, 8, "rstd"}};
  const hipgrad::MemoryRange inputs[] = {{memory + 32, 32, "x"}, {memory + 24, 8, "gamma"}};
  EXPECT_TRUE(hipgrad::check_memory_ranges(outputs, inputs).is_ok());  // touching is not overlapping

  const hipgrad::MemoryRange overlapping_input[] = {{memory + 15, 2, "x"}};
  hipgrad::Status st = hipgrad::check_memory_ranges(outputs, overlapping_input);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "y overlaps x");

  const hipgrad::MemoryRange two_outputs[] = {{memory, 16, "dx"}, {memory + 8, 4, "dgamma"}};
  const hipgrad::MemoryRange none[] = {{nullptr, 0, "unused"}};
  st = hipgrad::check_memory_ranges(two_outputs, none);
  EXPECT_EQ(st.message(), "dgamma overlaps dx");
  EXPECT_FALSE(hipgrad::ranges_overlap(memory, 0, memory, 8));  // empty ranges never overlap
}

TEST(OutputsDisjoint, PointersOffTheirElementsAreRefusedByName) {
  alignas(16) static unsigned char memory[64];
  const hipgrad::MemoryRange aligned[] = {{memory, 16, "y", 4}, {memory + 16, 8, "mean", 8}, {nullptr, 8, "rstd", 4}};
  const hipgrad::MemoryRange half_input[] = {{memory + 34, 16, "x", 2}};
  EXPECT_TRUE(hipgrad::check_memory_ranges(aligned, half_input).is_ok());
  const hipgrad::MemoryRange odd_input[] = {{memory + 33, 16, "x", 2}};
  hipgrad::Status st = hipgrad::check_memory_ranges(aligned, odd_input);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "x is not aligned to its 2-byte elements");
  const hipgrad::MemoryRange off_output[] = {{memory + 2, 16, "dw", 4}};
  st = hipgrad::check_memory_ranges(off_output, half_input);
  EXPECT_EQ(st.message(), "dw is not aligned to its 4-byte elements");
}

TEST(PlanCache, FindsEqualKeysOnlyAndReplacesRoundRobin) {
  using Key = hipgrad::PlanKey<4>;
  hipgrad::RecentPlans<Key, int, 2> recent;
  int made = 0;
  auto key = [](hipgrad::Index a, hipgrad::Index b) {
    Key k;
    k.add(a).add(b);
    return k;
  };
  auto make = [&](int value) {
    return [&made, value] {
      ++made;
      return value;
    };
  };
  EXPECT_EQ(recent.find_or_make(key(1, 2), make(12)), 12);
  EXPECT_EQ(recent.find_or_make(key(1, 2), make(99)), 12);  // kept
  EXPECT_EQ(recent.find_or_make(key(2, 1), make(21)), 21);  // order matters
  EXPECT_EQ(made, 2);
  EXPECT_EQ(recent.find_or_make(key(3, 3), make(33)), 33);  // replaces (1, 2)
  EXPECT_EQ(recent.find_or_make(key(1, 2), make(120)), 120);
  EXPECT_EQ(made, 4);
  Key shorter;
  shorter.add(1);
  EXPECT_EQ(recent.find_or_make(shorter, make(1)), 1);  // a prefix is another key
  Key overfull;
  for (int i = 0; i < 5; ++i) overfull.add(i);
  EXPECT_FALSE(overfull.fits());
  EXPECT_FALSE(overfull == overfull);  // never kept, so never found: made every time
  const int before = made;
  EXPECT_EQ(recent.find_or_make(overfull, make(5)), 5);
  EXPECT_EQ(recent.find_or_make(overfull, make(5)), 5);
  EXPECT_EQ(made, before + 2);
}

TEST(PlanCache, KeepsTheLayersOfANetwork) {
  // By default as many plans as a network's distinct layers: a training step finds them all.
  using Key = hipgrad::PlanKey<1>;
  hipgrad::RecentPlans<Key, int> recent;
  int made = 0;
  for (int round = 0; round < 3; ++round) {
    for (int layer = 0; layer < 64; ++layer) {
      Key key;
      key.add(layer);
      EXPECT_EQ(recent.find_or_make(key, [&] { return ++made, layer; }), layer);
    }
  }
  EXPECT_EQ(made, 64);
}

TEST(DeviceInfo, MatchesTheRuntimeAndIsOneObjectForEveryThread) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  int device = 0, multiprocessors = 0, block_bytes = 0, sm_bytes = 0, warp = 0;
  HIPGRAD_ASSERT_HIP(hipGetDevice(&device));
  HIPGRAD_ASSERT_HIP(hipDeviceGetAttribute(&multiprocessors, hipDeviceAttributeMultiprocessorCount, device));
  HIPGRAD_ASSERT_HIP(hipDeviceGetAttribute(&block_bytes, hipDeviceAttributeMaxSharedMemoryPerBlock, device));
  HIPGRAD_ASSERT_HIP(hipDeviceGetAttribute(&sm_bytes, hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, device));
  HIPGRAD_ASSERT_HIP(hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, device));
  std::vector<const hipgrad::DeviceInfo*> seen(16, nullptr);
  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      (void)hipSetDevice(device);
      while (go.load() == 0) {}
      seen[t] = &hipgrad::current_device_info();
    });
  }
  go.store(1);
  for (std::thread& t : threads) t.join();
  const hipgrad::DeviceInfo& info = hipgrad::current_device_info();
  for (const hipgrad::DeviceInfo* s : seen) EXPECT_EQ(s, &info);
  EXPECT_TRUE(info.known);
  EXPECT_EQ(info.device, device);
  EXPECT_EQ(info.multiprocessors, multiprocessors);
  EXPECT_EQ(info.shared_per_block_opt_in, static_cast<std::size_t>(block_bytes));
  EXPECT_EQ(info.shared_per_multiprocessor, static_cast<std::size_t>(sm_bytes));
  EXPECT_EQ(info.warp_size, warp);
  EXPECT_LE(info.reserved_shared_per_block, std::size_t{1024});
}

__global__ void fill_from_shared(int* out, int count) {
  extern __shared__ int scratch[];
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) scratch[i] = i;
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    out[i] = scratch[count - 1 - i];
}

TEST(KernelOptIn, LetsAKernelTakeMoreThan48KAndKeepsTheLargestLimit) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  const hipgrad::DeviceInfo& info = hipgrad::current_device_info();
  const std::size_t bytes = info.shared_per_block_opt_in - info.reserved_shared_per_block;
  if (bytes <= 48 * 1024) GTEST_SKIP() << "this GPU gives a block at most " << bytes << " bytes of shared memory";
  const int count = static_cast<int>(bytes / sizeof(int));
  int* out = nullptr;
  HIPGRAD_ASSERT_HIP(hipMalloc(&out, bytes));
  HIPGRAD_ASSERT_HIP(hipgrad::opt_in_shared_memory(fill_from_shared, bytes));
  HIPGRAD_ASSERT_HIP(hipgrad::opt_in_shared_memory(fill_from_shared, 1024));  // asks for less: the limit stays
  fill_from_shared<<<1, 256, bytes>>>(out, count);
  HIPGRAD_ASSERT_HIP(hipGetLastError());
  std::vector<int> host(static_cast<std::size_t>(count));
  HIPGRAD_ASSERT_HIP(hipMemcpy(host.data(), out, bytes, hipMemcpyDeviceToHost));
  HIPGRAD_ASSERT_HIP(hipFree(out));
  int wrong = 0;
  for (int i = 0; i < count; ++i) wrong += host[static_cast<std::size_t>(i)] != count - 1 - i;
  EXPECT_EQ(wrong, 0);
}

/// Whether Op has the contract's members with the contract's signatures (unevaluated: nothing
/// is instantiated beyond the declarations).
template <typename Op, typename P = typename Op::Problem, typename A = typename Op::Args>
constexpr bool follows_the_op_contract() {
  using hipgrad::Status;
  using std::declval;
  using std::is_same_v;
  return is_same_v<decltype(Op::can_implement(declval<const P&>(), declval<const A&>())), Status> &&
         is_same_v<decltype(Op::workspace_size(declval<const P&>())), std::size_t> &&
         is_same_v<decltype(Op::run(declval<const P&>(), declval<const A&>(), declval<void*>(), std::size_t{},
                                    declval<hipStream_t>())),
                   Status> &&
         is_same_v<decltype(Op::name(declval<const P&>())), std::string> &&
         is_same_v<decltype(Op::name(declval<const P&>(), declval<const A&>())), std::string> &&
         is_same_v<decltype(declval<const P&>().validate()), Status> && std::is_enum_v<decltype(P{}.algorithm)> &&
         std::is_default_constructible_v<A>;
}

namespace gn = hipgrad::groupnorm;
namespace hg = hipgrad::gemm;
static_assert(follows_the_op_contract<gn::Forward<hipgrad::half, float>>());
static_assert(follows_the_op_contract<gn::Backward<hipgrad::bfloat16>>());
static_assert(follows_the_op_contract<gn::BackwardData<float>>());
static_assert(follows_the_op_contract<gn::BackwardGammaBeta<hipgrad::half>>());
static_assert(follows_the_op_contract<hg::Gemm<hipgrad::half>>());
static_assert(follows_the_op_contract<hg::Gemm<float>>());
static_assert(follows_the_op_contract<hipgrad::conv::BackwardData<hipgrad::half, 2>>());
static_assert(follows_the_op_contract<hipgrad::conv::BackwardData<float, 3>>());
static_assert(std::is_same_v<gn::Forward<float>::Problem, gn::ForwardProblem> &&
              std::is_same_v<gn::BackwardData<float>::Problem, gn::BackwardProblem> &&
              std::is_same_v<hg::Gemm<float>::Problem, hg::Problem> &&
              std::is_same_v<hipgrad::conv::BackwardData<float, 1>::Problem, hipgrad::conv::Problem<1>>);

/// The default Problem is no problem: every op refuses it with invalid_argument and a reason,
/// before it asks anything of a GPU (so this holds on a machine without one), and sizes no
/// workspace for it.
TEST(OpContract, EveryOpRefusesTheDefaultProblemWithAReason) {
  auto expect_refused = [](const hipgrad::Status& s, std::size_t workspace) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_FALSE(s.message().empty());
    EXPECT_EQ(workspace, 0u);
  };
  using Fwd = gn::Forward<hipgrad::half, float>;
  using Bwd = gn::Backward<hipgrad::half, float>;
  using Data = gn::BackwardData<hipgrad::half, float>;
  using GammaBeta = gn::BackwardGammaBeta<hipgrad::half, float>;
  using Gemm = hg::Gemm<hipgrad::half>;
  expect_refused(Fwd::can_implement(Fwd::Problem{}, Fwd::Args{}), Fwd::workspace_size(Fwd::Problem{}));
  expect_refused(Bwd::can_implement(Bwd::Problem{}, Bwd::Args{}), Bwd::workspace_size(Bwd::Problem{}));
  expect_refused(Data::can_implement(Data::Problem{}, Data::Args{}), Data::workspace_size(Data::Problem{}));
  expect_refused(GammaBeta::can_implement(GammaBeta::Problem{}, GammaBeta::Args{}),
                 GammaBeta::workspace_size(GammaBeta::Problem{}));
  expect_refused(Gemm::can_implement(Gemm::Problem{}, Gemm::Args{}), Gemm::workspace_size(Gemm::Problem{}));
  using ConvData = hipgrad::conv::BackwardData<hipgrad::half, 2>;
  expect_refused(ConvData::can_implement(ConvData::Problem{}, ConvData::Args{}),
                 ConvData::workspace_size(ConvData::Problem{}));
}

}  // namespace
