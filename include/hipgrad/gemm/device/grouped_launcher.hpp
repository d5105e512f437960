/// @file grouped_launcher.hpp
/// @brief A grouped tile GEMM: several sub-problems, each C = epilogue(A·B) with its own loaders
///        and output, in one launch (grouped_tiles.hpp), on the gather kernel (sm_90a), the
///        matrix kernels or SIMT, with the same path rules as TileGemmLauncher.
///
///   using Launcher = GroupedGemmLauncher<Cfg, LoaderA, LoaderB, LinearCombination<T>>;
///   const GroupedGemmPlan plan = Launcher::plan(problems, count, request, current_device_info());
///   HIPGRAD_RETURN_IF_ERROR(plan.status);
///   HIPGRAD_RETURN_IF_ERROR(Launcher::launch(plan, problems, count, workspace, bytes, stream));
///
/// The sub-problems live in host memory; launch hands them and their item starts to the kernel in
/// its parameters where they fit, else copies them to the workspace (plan.workspace_bytes) on the
/// stream, so the host array may be released once launch returns. Grouped launches do not split
/// K (an op that wants a split makes each split a sub-problem whose epilogue writes partials). A
/// sub-problem with K = 0 gets the zero product (alpha·0 + beta·C) without a read of A or B; one
/// with M = 0 or N = 0 has no tiles.
#pragma once

#include <climits>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/device/launcher.hpp"

namespace hipgrad::gemm {

/// One grouped launch, planned once per call.
struct GroupedGemmPlan {
  Status status;  ///< not ok: why the forced path (or any path) cannot run these sub-problems
  Path path = Path::kSimt;
  long long items = 0;  ///< work items: output tiles over all sub-problems
  unsigned blocks = 0;  ///< grid x: one per item, or the gather kernel's persistent grid
  int threads = 1;
  int shared_bytes = 0;
  bool simt_vectors = false;
  std::size_t workspace_bytes = 0;  ///< the sub-problems and their starts, on the device
};

/// Bytes of workspace for `count` sub-problems of type Problem and their item starts: the
/// sub-problems, then count + 1 starts, 256-byte aligned.
template <typename Problem>
std::size_t grouped_starts_offset(int count) {
  return round_up(static_cast<std::size_t>(count > 0 ? count : 0) * sizeof(Problem), std::size_t{256});
}
template <typename Problem>
std::size_t grouped_workspace_bytes(int count) {
  return grouped_starts_offset<Problem>(count) + static_cast<std::size_t>(count + 1) * sizeof(long long);
}

/// Where bytes staged behind the table (`tail`: the operands' tensor maps) start: 128-byte aligned,
/// as a tensor map must be.
template <typename Problem>
std::size_t grouped_tail_offset(int count) {
  return round_up(grouped_workspace_bytes<Problem>(count), std::size_t{128});
}
/// Bytes of workspace for `count` sub-problems, their item starts and `tail_bytes` behind them.
template <typename Problem>
std::size_t grouped_tail_workspace_bytes(int count, std::size_t tail_bytes) {
  return grouped_tail_offset<Problem>(count) + tail_bytes;
}

/// Gives the kernels `count` sub-problems, their item starts and `tail_bytes` from `tail` (at
/// grouped_tail_offset) in grouped_workspace_bytes' layout: in the kernel's parameters where they
/// fit (kParameterTableBytes), else copied to `workspace` on `stream` in one copy. Operands that
/// point into the tail point where `workspace` would hold it.
template <typename LoaderA, typename LoaderB, typename Epilogue>
Status stage_grouped_problems(const SubProblem<LoaderA, LoaderB, Epilogue>* problems, int count,
                              const std::vector<long long>& starts, void* workspace, hipStream_t stream,
                              GroupedProblems<LoaderA, LoaderB, Epilogue>* staged_problems, const void* tail = nullptr,
                              std::size_t tail_bytes = 0) {
  using Problem = SubProblem<LoaderA, LoaderB, Epilogue>;
  const std::size_t offset = grouped_starts_offset<Problem>(count);
  const std::size_t bytes = tail_bytes > 0 ? grouped_tail_workspace_bytes<Problem>(count, tail_bytes)
                                           : grouped_workspace_bytes<Problem>(count);
  GroupedProblems<LoaderA, LoaderB, Epilogue>& to = *staged_problems;
  to.staged = static_cast<const unsigned char*>(workspace);
  to.count = count;
  to.items = static_cast<int>(starts.back());
  to.starts_offset = static_cast<int>(offset);
  to.in_parameters = bytes <= static_cast<std::size_t>(kParameterTableBytes);
  const auto fill = [&](unsigned char* table) {
    std::memcpy(table, problems, static_cast<std::size_t>(count) * sizeof(Problem));
    std::memcpy(table + offset, starts.data(), starts.size() * sizeof(long long));
    if (tail_bytes > 0) std::memcpy(table + grouped_tail_offset<Problem>(count), tail, tail_bytes);
  };
  if (to.in_parameters) return fill(to.table), Status::ok();
  // A graph would record the copy and read `staged` when it runs, after this call has freed it.
  hipStreamCaptureStatus capture = hipStreamCaptureStatusNone;
  HIPGRAD_RETURN_IF_HIP_ERROR(hipStreamIsCapturing(stream, &capture));
  if (capture != hipStreamCaptureStatusNone)
    return Status::not_supported(
        "a stream being captured into a graph: this launch's sub-problem table is too large for the kernel's "
        "parameters and is copied from host memory that the call frees");
  std::vector<unsigned char> staged(bytes);
  fill(staged.data());
  // From pageable memory: the runtime has taken the bytes when the call returns.
  HIPGRAD_RETURN_IF_HIP_ERROR(hipMemcpyAsync(workspace, staged.data(), staged.size(), hipMemcpyHostToDevice, stream));
  return Status::ok();
}

/// launch(std::bool_constant<in_parameters>{}): the grouped kernels are compiled for a table in
/// their parameters and for one in device memory.
template <typename Launch>
auto with_table_place(bool in_parameters, Launch&& launch) {
  return in_parameters ? launch(std::true_type{}) : launch(std::false_type{});
}

template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
class GroupedGemmLauncher {
  using Rules = detail::PathRules<Cfg, LoaderA, LoaderB>;
  using Problem = SubProblem<LoaderA, LoaderB, Epilogue>;
  /// Whether the loaders' vectors can be the matrix paths' 16-byte chunks: loaders that read one
  /// element at a time run SIMT only, and their matrix kernels are never compiled.
  static constexpr int kChunkElements = 16 / static_cast<int>(sizeof(typename LoaderA::Element));
  static constexpr bool kMatrixLoaders =
      LoaderMaxVector<LoaderA>::value >= kChunkElements && LoaderMaxVector<LoaderB>::value >= kChunkElements;

 public:
  /// Bytes of workspace a launch of `count` sub-problems needs: the sub-problems, then count + 1
  /// item starts, 256-byte aligned.
  static std::size_t workspace_bytes(int count) { return grouped_workspace_bytes<Problem>(count); }

  /// The path (forced, or the first of gather, matrix where every sub-problem runs it, else SIMT),
  /// the items, the grid.
  static GroupedGemmPlan plan(const Problem* problems, int count, const TileGemmRequest& request,
                              const DeviceInfo& device) {
    GroupedGemmPlan planned;
    if (const char* blocker = request_blocker(problems, count, request)) {
      planned.status = Status::not_supported(blocker);
      return planned;
    }
    if (request.forced) {
      planned.path = *request.forced;
      const Status why = path_status(planned.path, problems, count, request, device);
      if (!why.is_ok()) {
        planned.status = Status::not_supported(std::string("algorithm ") + path_name(planned.path) +
                                               " cannot run: " + why.message());
      }
    } else {
      planned.path = Path::kSimt;
      for (Path path : {Path::kGather, Path::kMatrix}) {
        if (path_status(path, problems, count, request, device).is_ok()) {
          planned.path = path;
          break;
        }
      }
      if (planned.path == Path::kSimt) planned.status = path_status(Path::kSimt, problems, count, request, device);
    }
    if (!planned.status.is_ok()) return planned;
    fill_launch(planned, problems, count, device);
    return planned;
  }

  /// Launches `plan` (made by plan() from these sub-problems) on `stream`, the sub-problems and
  /// their starts in the kernel's parameters or copied to `workspace` (stage_grouped_problems).
  static Status launch(const GroupedGemmPlan& plan, const Problem* problems, int count, void* workspace,
                       std::size_t bytes, hipStream_t stream) {
    if (!plan.status.is_ok()) return plan.status;
    HIPGRAD_RETURN_IF_ERROR(check_workspace(plan.workspace_bytes, workspace, bytes));
    if (plan.items == 0) return Status::ok();
    GroupedProblems<LoaderA, LoaderB, Epilogue> device_problems{};
    HIPGRAD_RETURN_IF_ERROR(stage_grouped_problems(problems, count, item_starts(plan.path, problems, count), workspace,
                                                   stream, &device_problems));
    return launch_kernel(plan, device_problems, stream);
  }

  /// "grouped_" and the kernel's name in tile_gemm_kernel_name's words ("grouped_wgmma_gather_…").
  static std::string kernel_name(const GroupedGemmPlan& plan) {
    TileGemmPlan single;
    single.path = plan.path;
    single.wgmma =
        plan.path == Path::kGather || (plan.path == Path::kMatrix && WgmmaPlan<Cfg, LoaderA, LoaderB>::kSupported &&
                                       current_device_info().known && device_runs_wgmma(current_device_info().device));
    return "grouped_" + tile_gemm_kernel_name<Cfg>(single);
  }

  /// What the compiler gave the kernel `plan` launches (registers, local memory).
  static KernelResources resources(const GroupedGemmPlan& plan) {
    if constexpr (kMatrixLoaders) {
      if (plan.path == Path::kGather || plan.path == Path::kMatrix) return matrix_resources(plan);
    }
    return with_table_place(table_in_parameters(plan), [](auto in) {
      return kernel_resources(grouped_simt_tile_gemm<LoaderA, LoaderB, Epilogue, decltype(in)::value>);
    });
  }

 private:
  static bool table_in_parameters(const GroupedGemmPlan& plan) {
    return plan.workspace_bytes <= static_cast<std::size_t>(kParameterTableBytes);
  }

  static KernelResources matrix_resources(const GroupedGemmPlan& plan) {
    return with_table_place(table_in_parameters(plan), [&](auto in) -> KernelResources {
      constexpr bool kIn = decltype(in)::value;
      switch (plan.path) {
        case Path::kGather:
#if defined(HIPGRAD_BACKEND_CUDA)
          return kernel_resources(grouped_gather_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue, kIn>);
#else
          return {};
#endif
        case Path::kMatrix: return kernel_resources(grouped_mma_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue, kIn>);
        case Path::kTma:
        case Path::kSimt: break;
      }
      return {};
    });
  }

  static const char* request_blocker(const Problem* problems, int count, const TileGemmRequest& request) {
    if (count < 0) return "a negative count of sub-problems";
    if (count > 0 && problems == nullptr) return "the sub-problems must not be null";
    if (request.split_k > 1) return "grouped launches do not split K (make each split a sub-problem)";
    if (request.forced && *request.forced == Path::kTma) {
      return "grouped launches run the gather, matrix or SIMT kernels (the TMA kernel takes one product)";
    }
    for (int g = 0; g < count; ++g) {
      const Problem& p = problems[g];
      if (p.a.mn_size() < 0 || p.b.mn_size() < 0 || p.a.k_size() < 0 || p.a.k_size() != p.b.k_size()) {
        return "a sub-problem's sizes are negative or its A and B differ in K";
      }
      if (p.epilogue.partials != nullptr) return "a sub-problem's epilogue writes split-K partials";
    }
    return nullptr;
  }

  /// ok when every sub-problem runs on `path`, else the first one's reason.
  static Status path_status(Path path, const Problem* problems, int count, const TileGemmRequest& request,
                            const DeviceInfo& device) {
    if (!kMatrixLoaders && path != Path::kSimt) {
      return Status::not_supported("the operands are read one element at a time (the SIMT path only)");
    }
    for (int g = 0; g < count; ++g) {
      if (const char* blocker = Rules::blocker_of(path, problems[g].a, problems[g].b, request, device)) {
        return Status::not_supported("sub-problem " + std::to_string(g) + ": " + blocker);
      }
    }
    const std::vector<long long> starts = item_starts(path, problems, count);
    if (starts.back() > INT_MAX) return Status::not_supported("more than 2^31 - 1 output tiles over the sub-problems");
    return Status::ok();
  }

  static std::vector<long long> item_starts(Path path, const Problem* problems, int count) {
    std::vector<GroupedExtent> extents(static_cast<std::size_t>(count));
    for (int g = 0; g < count; ++g)
      extents[static_cast<std::size_t>(g)] = {problems[g].a.mn_size(), problems[g].b.mn_size()};
    if (path == Path::kSimt) return grouped_tile_starts(extents, SimtConfig::kBlockM, SimtConfig::kBlockN);
    return grouped_tile_starts(extents, Cfg::kBlockM, Cfg::kBlockN);
  }

  static void fill_launch(GroupedGemmPlan& plan, const Problem* problems, int count, const DeviceInfo& device) {
    plan.items = item_starts(plan.path, problems, count).back();
    plan.workspace_bytes = workspace_bytes(count);
    switch (plan.path) {
      case Path::kGather:
        plan.blocks = detail::persistent_blocks(plan.items, device);
        plan.threads = tma_kernel_threads<Cfg>();
        plan.shared_bytes = Rules::warp_specialised_shared_bytes(Path::kGather);
        break;
      case Path::kMatrix:
        plan.blocks = static_cast<unsigned>(plan.items);
        plan.threads = matrix_kernel_threads<Cfg>();
        plan.shared_bytes = Cfg::template shared_bytes<typename LoaderA::Element>();
        break;
      case Path::kTma:
      case Path::kSimt:
        plan.blocks = static_cast<unsigned>(plan.items);
        plan.threads = SimtConfig::kThreads;
        plan.simt_vectors = true;
        for (int g = 0; g < count; ++g) {
          plan.simt_vectors = plan.simt_vectors && problems[g].a.vectors_aligned(4) && problems[g].b.vectors_aligned(4);
        }
        break;
    }
  }

  static Status launch_kernel(const GroupedGemmPlan& plan, const GroupedProblems<LoaderA, LoaderB, Epilogue>& problems,
                              hipStream_t stream) {
    if constexpr (kMatrixLoaders) {
      if (plan.path == Path::kGather || plan.path == Path::kMatrix) return launch_matrix_kernel(plan, problems, stream);
    }
    return with_table_place(problems.in_parameters, [&](auto in) {
      return detail::launch_tile_kernel(grouped_simt_tile_gemm<LoaderA, LoaderB, Epilogue, decltype(in)::value>,
                                        "grouped_simt_tile_gemm", dim3(plan.blocks), SimtConfig::kThreads, 0, stream,
                                        problems, plan.simt_vectors);
    });
  }

  /// The gather kernel or the matrix kernel.
  static Status launch_matrix_kernel(const GroupedGemmPlan& plan,
                                     const GroupedProblems<LoaderA, LoaderB, Epilogue>& problems, hipStream_t stream) {
    return with_table_place(problems.in_parameters, [&](auto in) {
      constexpr bool kIn = decltype(in)::value;
      switch (plan.path) {
        case Path::kGather: {
#if defined(HIPGRAD_BACKEND_CUDA)
          return detail::launch_tile_kernel(grouped_gather_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue, kIn>,
                                            "grouped_gather_tile_gemm", dim3(plan.blocks), plan.threads,
                                            plan.shared_bytes, stream, problems);
#else
          return Status::not_supported("the gather kernel exists in CUDA builds only");
#endif
        }
        case Path::kMatrix: {
          return detail::launch_tile_kernel(grouped_mma_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue, kIn>,
                                            "grouped_mma_tile_gemm", dim3(plan.blocks), plan.threads, plan.shared_bytes,
                                            stream, problems);
        }
        case Path::kTma:
        case Path::kSimt: break;
      }
      return Status::not_supported("not a matrix path");
    });
  }
};

}  // namespace hipgrad::gemm
