/// @file bench_conv.cpp
/// @brief Convolution benchmark: conv::BackwardData and conv::BackwardWeight on the acceptance
///        lists (dense: the seed's problem, ResNet 3×3 and 1×1, a 3-D and a 1-D problem, CK's
///        grouped 3-D default; grouped: two grouped ones and CK's; few: depthwise and few channels
///        per group from published networks; stems: first layers of few input channels and a
///        strided video layer) in fp16, bf16, exact fp32 and TF32, channels-last
///        (NHWGC) or NCHW (NGCHW); one JSON line each (bench_harness.hpp) with TFLOP/s and TB/s
///        against the least bytes (each tensor once). bench/torch_conv.py times cuDNN on the same
///        lines.
///
///   bench_conv [--ops=bwd_data,bwd_weight] [--dtypes=fp16,bf16,fp32,tf32] [--repeats=20]
///              [--problems=all|dense|grouped|few|stems] [--cases=label,...] [--layouts=nhwgc,ngchw]
///              [--algorithm=auto|gather|matrix|simt|tma_boxes|direct|unfold|staged] [--direct=ops|window|adjacent] [--pack-groups=P] [--host-us]
///
/// --host-us adds "host_us": what a call costs the host (bench_harness.hpp,
/// host_microseconds_per_call). Where it exceeds a call's GPU time the timed runs wait for the
/// host, and "ms" is the host's time, not the kernels'. It adds "check_us" (can_implement: the
/// plan and every check) and "refused_us" (a run() refused for a null output), per call.
/// A forced algorithm that cannot run a line skips it with the reason (on stderr).
/// --direct=window times the direct window kernels alone (direct::Kernels::kWindow) on the lines the
/// ops run direct, through their plan and launcher: the A/B against the ops' plans, which take
/// the vector kernels where they apply, over adjacent groups and over W runs. --direct=adjacent
/// times the plans that take the vector kernels over adjacent groups alone
/// (direct::Kernels::kVectorsWhereTheyApply: NCHW depthwise on the window kernels).
/// --pack-groups=P times, on each line whose G is a multiple of P, the problem of G / P groups of
/// P·C and P·K channels: the block-diagonal packing of P groups into one tensor-core tile (the
/// weight a P-times larger dense one; dy, x and dx the same memory). The line keeps the case's
/// sizes, bytes and FLOPs; its name ends in _packedP.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_harness.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/device_fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/host/timer.hpp"
#include "conv_instances.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::host::DeviceBuffer;
namespace hc = hipgrad::conv;

/// One benchmark problem: rank, G N K C and per dimension filter, input, stride, dilation, pad
/// (symmetric: what cuDNN takes).
struct ConvCase {
  const char* label;
  int ndim;
  Index g, n, k, c;
  std::array<Index, 3> filter, input, stride, dilation, pad;
};

std::vector<ConvCase> cases(const std::string& which) {
  std::vector<ConvCase> dense = {
      {"seed", 2, 1, 128, 256, 128, {3, 3, 1}, {71, 71, 1}, {2, 2, 1}, {1, 1, 1}, {1, 1, 0}},
      {"resnet3x3", 2, 1, 64, 256, 256, {3, 3, 1}, {56, 56, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"resnet1x1", 2, 1, 64, 256, 1024, {1, 1, 1}, {14, 14, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}},
      {"3d", 3, 1, 4, 64, 64, {3, 3, 3}, {32, 64, 64}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {"1d", 1, 1, 64, 512, 512, {3, 1, 1}, {1024, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0}},
  };
  std::vector<ConvCase> grouped = {
      {"grouped32", 2, 32, 32, 32, 32, {3, 3, 1}, {56, 56, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"grouped4_s2", 2, 4, 64, 64, 64, {3, 3, 1}, {56, 56, 1}, {2, 2, 1}, {1, 1, 1}, {1, 1, 0}},
      {"ck3d", 3, 4, 1, 128, 256, {3, 3, 3}, {14, 14, 14}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
  };
  // Depthwise and few channels per group, from the published networks (G, N, K and C per group).
  std::vector<ConvCase> few = {
      {"convnext_t_s1_dw7", 2, 96, 32, 1, 1, {7, 7, 1}, {56, 56, 1}, {1, 1, 1}, {1, 1, 1}, {3, 3, 0}},
      {"convnext_t_s2_dw7", 2, 192, 32, 1, 1, {7, 7, 1}, {28, 28, 1}, {1, 1, 1}, {1, 1, 1}, {3, 3, 0}},
      {"convnext_t_s3_dw7", 2, 384, 32, 1, 1, {7, 7, 1}, {14, 14, 1}, {1, 1, 1}, {1, 1, 1}, {3, 3, 0}},
      {"mobilenetv2_dw3_112", 2, 32, 64, 1, 1, {3, 3, 1}, {112, 112, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"mobilenetv2_dw3s2_56", 2, 144, 64, 1, 1, {3, 3, 1}, {56, 56, 1}, {2, 2, 1}, {1, 1, 1}, {1, 1, 0}},
      {"mobilenetv2_dw3_28", 2, 192, 64, 1, 1, {3, 3, 1}, {28, 28, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"mobilenetv3_dw3s2_112", 2, 64, 64, 1, 1, {3, 3, 1}, {112, 112, 1}, {2, 2, 1}, {1, 1, 1}, {1, 1, 0}},
      {"efficientnet_b0_dw5s2_28", 2, 240, 64, 1, 1, {5, 5, 1}, {28, 28, 1}, {2, 2, 1}, {1, 1, 1}, {2, 2, 0}},
      {"efficientnet_b0_dw5_14", 2, 672, 64, 1, 1, {5, 5, 1}, {14, 14, 1}, {1, 1, 1}, {1, 1, 1}, {2, 2, 0}},
      {"x3d_m_dw333_28", 3, 192, 4, 1, 1, {3, 3, 3}, {16, 28, 28}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {"csn_dw333_s2", 3, 256, 4, 1, 1, {3, 3, 3}, {8, 56, 56}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1}},
      {"conformer_dw31_1d", 1, 512, 32, 1, 1, {31, 1, 1}, {512, 1, 1}, {1, 1, 1}, {1, 1, 1}, {15, 0, 0}},
      {"convtasnet_dw3_d8_1d", 1, 512, 8, 1, 1, {3, 1, 1}, {3000, 1, 1}, {1, 1, 1}, {8, 1, 1}, {8, 0, 0}},
      {"resnext50_s1_g32x4", 2, 32, 64, 4, 4, {3, 3, 1}, {56, 56, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"resnext50_s2_g32x8", 2, 32, 64, 8, 8, {3, 3, 1}, {28, 28, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"resnext50_s3_g32x16", 2, 32, 64, 16, 16, {3, 3, 1}, {14, 14, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"regnetx_400mf_g10x16", 2, 10, 64, 16, 16, {3, 3, 1}, {14, 14, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"resnext50_s4_g32x32", 2, 32, 64, 32, 32, {3, 3, 1}, {7, 7, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"regnety_1_6gf_g14x24", 2, 14, 64, 24, 24, {3, 3, 1}, {14, 14, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"audio_1d_g16x32", 1, 16, 16, 32, 32, {5, 1, 1}, {2000, 1, 1}, {1, 1, 1}, {1, 1, 1}, {2, 0, 0}},
  };
  // Stems and first layers (few input channels, large strides) and a strided video layer, from
  // the published networks: channels that no 16-byte vector divides, and thin stride phases.
  std::vector<ConvCase> stems = {
      {"resnet50_stem_7x7s2", 2, 1, 64, 64, 3, {7, 7, 1}, {224, 224, 1}, {2, 2, 1}, {1, 1, 1}, {3, 3, 0}},
      {"efficientnet_b0_stem_3x3s2", 2, 1, 64, 32, 3, {3, 3, 1}, {224, 224, 1}, {2, 2, 1}, {1, 1, 1}, {1, 1, 0}},
      {"convnext_t_patchify_4x4s4", 2, 1, 32, 96, 3, {4, 4, 1}, {224, 224, 1}, {4, 4, 1}, {1, 1, 1}, {0, 0, 0}},
      {"vit_b16_patch_16x16s16", 2, 1, 32, 768, 3, {16, 16, 1}, {224, 224, 1}, {16, 16, 1}, {1, 1, 1}, {0, 0, 0}},
      {"ldm_unet_in_4to320", 2, 1, 8, 320, 4, {3, 3, 1}, {64, 64, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"ldm_vae_out_128to3", 2, 1, 1, 3, 128, {3, 3, 1}, {512, 512, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0}},
      {"x3d_stem_1x3x3s122", 3, 1, 4, 24, 3, {1, 3, 3}, {16, 224, 224}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}},
      {"video_1x3x3s122_64", 3, 1, 4, 64, 64, {1, 3, 3}, {8, 112, 112}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}},
  };
  if (which == "dense") return dense;
  if (which == "grouped") return grouped;
  if (which == "few") return few;
  if (which == "stems") return stems;
  dense.insert(dense.end(), grouped.begin(), grouped.end());
  dense.insert(dense.end(), few.begin(), few.end());
  dense.insert(dense.end(), stems.begin(), stems.end());
  return dense;
}

hc::Algorithm g_algorithm = hc::Algorithm::kAuto;
hc::ConvLayout g_layout = hc::ConvLayout::kNHWGC;
bool g_host_us = false;
/// --direct: the kernels of the direct plans a line runs instead of the op's (none: the op).
std::optional<hc::direct::Kernels> g_direct_kernels;
/// --pack-groups: groups packed into one (block-diagonal) group of the problem a line times.
int g_pack_groups = 1;

template <int NDim>
hc::Problem<NDim> problem_of(const ConvCase& cc, bool tf32) {
  hc::ConvParams<NDim> p;
  p.G = cc.g / g_pack_groups, p.N = cc.n, p.K = cc.k * g_pack_groups, p.C = cc.c * g_pack_groups;
  for (int d = 0; d < NDim; ++d) {
    p.filter[d] = cc.filter[d], p.input[d] = cc.input[d], p.strides[d] = cc.stride[d];
    p.dilations[d] = cc.dilation[d], p.left_pads[d] = cc.pad[d], p.right_pads[d] = cc.pad[d];
  }
  hc::Problem<NDim> problem = hc::Problem<NDim>::packed(p, g_layout);
  problem.allow_tf32 = tf32;
  problem.algorithm = g_algorithm;
  return problem;
}

std::vector<long long> list_of(const std::array<Index, 3>& values, int ndim) {
  return std::vector<long long>(values.begin(), values.begin() + ndim);
}

/// Backward-data: inputs dy and w, output dx.
template <typename T, int NDim>
struct DataGradient {
  using Op = hc::BackwardData<T, NDim>;
  static constexpr const char* kName = "conv_bwd_data";
  static constexpr int kWeightIndex = 1;  ///< w's place in elements()
  static std::array<Index, 3> elements(const hc::Problem<NDim>& problem) {
    const hc::ConvParams<NDim>& p = problem.params;
    return {hc::Problem<NDim>::element_space(p.output_lengths(), problem.output_strides),
            hc::Problem<NDim>::element_space(p.weight_lengths(), problem.weight_strides),
            hc::Problem<NDim>::element_space(p.input_lengths(), problem.input_strides)};
  }
  static typename Op::Args args(const T* dy, const T* w, T* dx) { return {dy, w, dx}; }
  static T*& output(typename Op::Args& args) { return args.dx; }
  using DirectPlan = hc::direct::DataPlan<T, NDim>;
  static DirectPlan direct_plan(const hc::Problem<NDim>& problem, hc::direct::Kernels kernels) {
    return hc::direct::make_data_plan<T, NDim>(problem, kernels);
  }
  static std::string direct_name(const DirectPlan& plan) {
    return std::string(kName) + "_direct_" + hc::direct::data_plan_name(plan);
  }
  static Status run_direct(const DirectPlan& plan, const typename Op::Args& a, void*) {
    return hc::direct::launch_backward_data(plan, a.dy, a.w, a.dx, nullptr);
  }
};

/// Backward-weight: inputs x and dy, output dw.
template <typename T, int NDim>
struct WeightGradient {
  using Op = hc::BackwardWeight<T, NDim>;
  static constexpr const char* kName = "conv_bwd_weight";
  static constexpr int kWeightIndex = 2;  ///< dw's place in elements()
  static std::array<Index, 3> elements(const hc::Problem<NDim>& problem) {
    const hc::ConvParams<NDim>& p = problem.params;
    return {hc::Problem<NDim>::element_space(p.input_lengths(), problem.input_strides),
            hc::Problem<NDim>::element_space(p.output_lengths(), problem.output_strides),
            hc::Problem<NDim>::element_space(p.weight_lengths(), problem.weight_strides)};
  }
  static typename Op::Args args(const T* x, const T* dy, T* dw) { return {x, dy, dw}; }
  static T*& output(typename Op::Args& args) { return args.dw; }
  using DirectPlan = hc::direct::WeightPlan<T, NDim>;
  static DirectPlan direct_plan(const hc::Problem<NDim>& problem, hc::direct::Kernels kernels) {
    return hc::direct::make_weight_plan<T, NDim>(problem, hipgrad::current_device_info(), kernels);
  }
  static std::string direct_name(const DirectPlan& plan) {
    return std::string(kName) + "_direct_" + hc::direct::weight_plan_name(plan);
  }
  static Status run_direct(const DirectPlan& plan, const typename Op::Args& a, void* workspace) {
    return hc::direct::launch_backward_weight(plan, a.x, a.dy, a.dw, static_cast<float*>(workspace), nullptr);
  }
};

/// Host microseconds per call of `call` (1,000 calls, median of 5 rounds), which launches
/// nothing; 0 where a call does not answer as expected (returns false).
template <typename Call>
double host_only_microseconds(Call&& call) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < 1000; ++i)
      if (!call()) return 0;
    rounds.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / 1000);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

template <typename Gradient, typename T, int NDim>
Status measure(const ConvCase& cc, const char* dtype, bool tf32, int repeats) {
  using Op = typename Gradient::Op;
  if (cc.g % g_pack_groups != 0) {
    std::fprintf(stderr, "bench_conv: skipped %s %s: G is not a multiple of %d\n", cc.label, dtype, g_pack_groups);
    return Status::ok();
  }
  const hc::Problem<NDim> problem = problem_of<NDim>(cc, tf32);
  HIPGRAD_RETURN_IF_ERROR(problem.validate());
  const hc::ConvParams<NDim>& p = problem.params;
  const std::array<Index, 3> elements = Gradient::elements(problem);  // the two inputs, the output
  const int copies =
      hipgrad::host::l2_rotation_copies(static_cast<std::size_t>(elements[0] + elements[1]) * sizeof(T), 8);
  DeviceBuffer<T> a, b, out;
  DeviceBuffer<unsigned char> workspace;
  HIPGRAD_RETURN_IF_ERROR(a.allocate(static_cast<std::size_t>(elements[0] * copies)));
  HIPGRAD_RETURN_IF_ERROR(b.allocate(static_cast<std::size_t>(elements[1] * copies)));
  HIPGRAD_RETURN_IF_ERROR(out.allocate(static_cast<std::size_t>(elements[2])));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::fill_uniform_on_device(a.data(), elements[0] * copies, 1));
  HIPGRAD_RETURN_IF_ERROR(hipgrad::host::fill_uniform_on_device(b.data(), elements[1] * copies, 2));
  // --direct=window|adjacent: the plan of those kernels where the op runs direct.
  const typename Gradient::DirectPlan forced =
      g_direct_kernels ? Gradient::direct_plan(problem, *g_direct_kernels) : typename Gradient::DirectPlan{};
  const bool run_forced =
      g_direct_kernels && forced.status.is_ok() && Op::name(problem).find("_direct_") != std::string::npos;
  std::size_t workspace_bytes = Op::workspace_size(problem);
  if constexpr (std::is_same_v<Gradient, WeightGradient<T, NDim>>)
    if (run_forced) workspace_bytes = forced.workspace;
  HIPGRAD_RETURN_IF_ERROR(workspace.allocate(workspace_bytes));
  auto args = [&](int copy) {
    return Gradient::args(a.data() + copy * elements[0], b.data() + copy * elements[1], out.data());
  };
  if (const Status can = Op::can_implement(problem, args(0)); !can.is_ok()) {
    if (g_algorithm == hc::Algorithm::kAuto) return can;
    std::fprintf(stderr, "bench_conv: skipped %s %s: %s\n", cc.label, dtype, can.to_string().c_str());
    return Status::ok();
  }
  float ms = 0;
  auto call = [&](int copy) {
    return run_forced ? Gradient::run_direct(forced, args(copy), workspace.data())
                      : Op::run(problem, args(copy), workspace.data(), workspace.bytes(), nullptr);
  };
  HIPGRAD_RETURN_IF_ERROR(hipgrad::bench::time_rotated(call, copies, repeats, &ms));
  double host_us = 0, drain_us = 0, check_us = 0, refused_us = 0;
  if (g_host_us) {
    HIPGRAD_RETURN_IF_ERROR(
        hipgrad::bench::host_microseconds_per_call([&] { return call(0); }, 50, &host_us, &drain_us));
    // can_implement (the plan and every check, nothing launched), and a run() refused for a null
    // output: what a call costs the host before any launch.
    check_us = host_only_microseconds([&] { return Op::can_implement(problem, args(0)).is_ok(); });
    refused_us = host_only_microseconds([&] {
      auto refused = args(0);
      Gradient::output(refused) = nullptr;
      return !Op::run(problem, refused, workspace.data(), workspace.bytes(), nullptr).is_ok();
    });
  }
  // The case's bytes and FLOPs: a packed weight's zeros are not the problem's.
  const double weight_elements = static_cast<double>(elements[Gradient::kWeightIndex]) / g_pack_groups;
  const double bytes =
      static_cast<double>(sizeof(T)) * (static_cast<double>(elements[0] + elements[1] + elements[2]) -
                                        static_cast<double>(elements[Gradient::kWeightIndex]) + weight_elements);
  const std::string packed = g_pack_groups > 1 ? "_packed" + std::to_string(g_pack_groups) : "";
  hipgrad::bench::JsonLine line;
  line.add("op", Gradient::kName)
      .add("case", cc.label)
      .add("dtype", dtype)
      .add("ndim", NDim)
      .add("g", static_cast<double>(cc.g))
      .add("n", static_cast<double>(cc.n))
      .add("k", static_cast<double>(cc.k))
      .add("c", static_cast<double>(cc.c))
      .add_list("filter", list_of(cc.filter, NDim))
      .add_list("input", list_of(cc.input, NDim))
      .add_list("stride", list_of(cc.stride, NDim))
      .add_list("dilation", list_of(cc.dilation, NDim))
      .add_list("pad", list_of(cc.pad, NDim))
      .add("layout", g_layout == hc::ConvLayout::kNGCHW ? "ngchw" : "nhwgc")
      .add("name", (run_forced ? Gradient::direct_name(forced) : Op::name(problem, args(0))) + packed)
      .add("ms", ms)
      .add("tflops", static_cast<double>(p.flops()) / g_pack_groups / (ms * 1e-3) / 1e12)
      .add("tbps", bytes / (ms * 1e-3) / 1e12);
  if (g_host_us) line.add("host_us", host_us).add("check_us", check_us).add("refused_us", refused_us);
  line.print();
  return Status::ok();
}

template <typename T, int NDim>
Status measure_op(const std::string& op, const ConvCase& cc, const char* dtype, bool tf32, int repeats) {
  if (op == "bwd_weight") return measure<WeightGradient<T, NDim>, T, NDim>(cc, dtype, tf32, repeats);
  return measure<DataGradient<T, NDim>, T, NDim>(cc, dtype, tf32, repeats);
}

template <typename T>
Status measure_case(const std::string& op, const ConvCase& cc, const char* dtype, bool tf32, int repeats) {
  if (cc.ndim == 1) return measure_op<T, 1>(op, cc, dtype, tf32, repeats);
  if (cc.ndim == 3) return measure_op<T, 3>(op, cc, dtype, tf32, repeats);
  return measure_op<T, 2>(op, cc, dtype, tf32, repeats);
}

Status run(const std::string& op, const ConvCase& cc, const std::string& dtype, int repeats) {
  if (op != "bwd_data" && op != "bwd_weight")
    return Status::invalid_argument("unknown op " + op + " (bwd_data, bwd_weight)");
  if (dtype == "fp16") return measure_case<hipgrad::half>(op, cc, "fp16", false, repeats);
  if (dtype == "bf16") return measure_case<hipgrad::bfloat16>(op, cc, "bf16", false, repeats);
  if (dtype == "fp32") return measure_case<float>(op, cc, "fp32", false, repeats);
  if (dtype == "tf32") return measure_case<float>(op, cc, "tf32", true, repeats);
  return Status::invalid_argument("unknown dtype " + dtype + " (fp16, bf16, fp32, tf32)");
}

}  // namespace

int main(int argc, char** argv) {
  hipgrad::host::ExampleArgs args;
  Status s = hipgrad::host::parse_example_args(argc, argv, &args);
  if (s.is_ok())
    s = args.reject_unknown_options(
        {"ops", "dtypes", "repeats", "problems", "cases", "layouts", "algorithm", "direct", "pack-groups", "host-us"});
  const auto repeats = static_cast<int>(args.get_int("repeats", 20));
  const std::string algorithm = args.get_string("algorithm", "auto");
  bool known = false;
  for (int a = 0; a <= static_cast<int>(hc::kLastAlgorithm); ++a) {
    if (algorithm == hc::algorithm_name(static_cast<hc::Algorithm>(a)))
      g_algorithm = static_cast<hc::Algorithm>(a), known = true;
  }
  if (s.is_ok() && !known)
    s = Status::invalid_argument("--algorithm takes auto, gather, matrix, simt, tma_boxes, direct, unfold or staged");
  const std::string which = args.get_string("problems", "all");
  g_host_us = args.get_bool("host-us", false);
  const std::string direct = args.get_string("direct", "ops");
  if (direct == "window") g_direct_kernels = hc::direct::Kernels::kWindow;
  if (direct == "adjacent") g_direct_kernels = hc::direct::Kernels::kVectorsWhereTheyApply;
  if (s.is_ok() && direct != "ops" && !g_direct_kernels)
    s = Status::invalid_argument("--direct takes ops, window or adjacent");
  g_pack_groups = static_cast<int>(args.get_int("pack-groups", 1));
  if (s.is_ok() && g_pack_groups < 1) s = Status::invalid_argument("--pack-groups must be positive");
  if (s.is_ok()) s = args.option_status();
  if (s.is_ok() && which != "all" && which != "dense" && which != "grouped" && which != "few" && which != "stems") {
    s = Status::invalid_argument("--problems takes all, dense, grouped or few");
  }
  const std::vector<std::string> layouts = hipgrad::bench::split_list(args.get_string("layouts", "nhwgc"));
  const std::vector<std::string> only = hipgrad::bench::split_list(args.get_string("cases", ""));
  for (const std::string& l : layouts) {
    if (s.is_ok() && l != "nhwgc" && l != "ngchw") s = Status::invalid_argument("--layouts takes nhwgc and ngchw");
  }
  if (!s.is_ok() || repeats < 1) {
    std::fprintf(stderr, "bench_conv: %s\n", s.is_ok() ? "--repeats must be positive" : s.to_string().c_str());
    return 2;
  }
  if (!hipgrad::host::require_gpu("bench_conv")) return 1;
  for (const std::string& layout : layouts) {
    g_layout = layout == "ngchw" ? hc::ConvLayout::kNGCHW : hc::ConvLayout::kNHWGC;
    for (const std::string& op : hipgrad::bench::split_list(args.get_string("ops", "bwd_data,bwd_weight"))) {
      for (const ConvCase& cc : cases(which)) {
        if (!only.empty() && std::find(only.begin(), only.end(), std::string(cc.label)) == only.end()) continue;
        for (const std::string& dtype : hipgrad::bench::split_list(args.get_string("dtypes", "fp16,bf16,fp32,tf32"))) {
          s = run(op, cc, dtype, repeats);
          if (!s.is_ok()) {
            std::fprintf(stderr, "bench_conv: %s %s %s %s: %s\n", layout.c_str(), op.c_str(), cc.label, dtype.c_str(),
                         s.to_string().c_str());
            return 1;
          }
        }
      }
    }
  }
  return 0;
}
