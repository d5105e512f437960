"""Injected bugs for the mutation check (tests/mutation/run.py).

Each entry of MUTATIONS is one wrong kernel: `old` is an exact snippet that must occur exactly once
in `file` (under include/), and `new` replaces it. run.py builds `targets` (CMake targets) of a
copy of the tree with the bug and runs each target's test binary with `filter[target]` (a gtest
filter): the mutant is caught when at least one of those tests fails. The filters name test suites
and tests by wildcards, broad enough to cover every test that is expected to catch the bug, so that
a caught mutant shows that the suite fails, not that one hand-picked test does.

The comment above each entry says why its site runs in those tests on an H100 (sm_90a). Where a
formula is written once per kernel family (three-pass, one-read planes, one-read channels-last,
staged), each family has its own entry.

When a kernel changes so that an `old` snippet no longer occurs exactly once, run.py reports the
entry as NOT APPLIED (and `run.sh --check` does so without building): update the snippet to the
new code rather than dropping the entry.
"""

GEMM = ["test_gemm"]
GROUPNORM = ["test_groupnorm"]
CONV = ["test_conv"]

# Filters (gtest syntax: ':' separates patterns, '*' and '?' are wildcards).
GEMM_ALL = "GemmTest*"
GEMM_SPLIT_K = "GemmTest*SplitK*:GemmTest*CpAsync*:GemmTest*Persistent*"
# The convolution's decomposition on the CPU and the op on the GPU.
CONV_BWD_DATA = "ConvStridePhases*:ConvBackwardDataPlan*:ConvBackwardDataTest*"
# The box path: its plan through the maps on the CPU, and the op on the GPU.
CONV_BWD_DATA_BOXES = "ConvBackwardDataTma*:ConvBackwardDataTest*"
# Backward-weight: its plan on the CPU, the op on the GPU.
CONV_BWD_WEIGHT = "ConvBackwardWeightPlan*:ConvBackwardWeightTma*:ConvBackwardWeightTest*:ConvBackwardWeightLarge*"
# The direct kernels: their plans and the kernels' code run on the host (ConvDirectPlan,
# ConvDirectEmulated), and the op on the GPU (ConvDirectTest).
CONV_DIRECT = "ConvDirect*"
# kAuto's packed groups: the index map and the packed problems on the CPU (ConvPackedGroups), both
# ops packed on the GPU (ConvPackedGroupsTest).
CONV_PACKED = "ConvPackedGroups*"
# kAuto's unfolded windows: the index maps on the CPU against the reference (ConvUnfold), both ops
# unfolded on the GPU (ConvUnfoldTest).
CONV_UNFOLD = "ConvUnfold*"
CONV_STAGED = "ConvStaged*"
# The benchmark-shape tests (minutes of CPU reference each) are left out: the listed cases are the
# guard under test here.
GN_FORWARD = "GroupNormTest*Forward*:GroupNormTest*Staged*-*BenchShapes*"
GN_BACKWARD = "GroupNormTest*Backward*:GroupNormTest*Staged*-*BenchShapes*"
GN_SWISH_BACKWARD = "GroupNormTest*Backward*:GroupNormTest*Swish*:GroupNormTest*Staged*-*BenchShapes*"

MUTATIONS = [
    # ---- GEMM ---------------------------------------------------------------------------------
    # Every GEMM path (TMA kernel, cp.async wgmma, SIMT) stores through LinearCombination::store;
    # for row-major C the extra columns land in C's padding (ldc = N + 9 in the padded cases), for
    # column-major C (OddSizesEveryLayout's {row, row, col}) ldc ~ M cuts off the columns past it
    # where M < N, and in split-K the partials of columns past N overwrite the next row's.
    dict(
        id="gemm_epilogue_ldc_columns",
        bug="GEMM epilogue bounds-checks n against the leading dimension of C instead of N",
        file="include/hipgrad/gemm/collective/epilogue.hpp",
        old="if (m >= m_size || n >= n_size) return;",
        new="if (m >= m_size || n >= (stride_m > stride_n ? stride_m : stride_n)) return;",
        targets=GEMM,
        filter={"test_gemm": GEMM_ALL},
    ),
    # reduce_split_k runs after every launch with splits > 1, whatever the mainloop:
    # SplitKPartialsAddUpInAFixedOrder (split 2, 3, 7), CpAsyncMainloopEveryLayout (split 2 for
    # K > 200) and PersistentBlocksWalkSeveralTiles (split 3).
    dict(
        id="gemm_splitk_skips_last_split",
        bug="GEMM split-K reduction adds splits 0..S-2 and skips the last split's partial",
        file="include/hipgrad/gemm/kernel/reduce_split_k.hpp",
        old="for (int s = 0; s < splits; ++s) sum += partials[s * elements + i];",
        new="for (int s = 0; s < splits - 1; ++s) sum += partials[s * elements + i];",
        targets=GEMM,
        filter={"test_gemm": GEMM_SPLIT_K},
    ),
    # DenseOperand::vector feeds the cp.async tile copies (CpAsyncMainloopEveryLayout runs the
    # wgmma cp.async mainloop with problem.algorithm = kMatrix) and the SIMT mainloop (exact fp32
    # in every GemmTest/0 test, PackedLeadingDimensions' unaligned 16-bit operands and
    # ForcedSimtRunsTheSimtPath's forced kSimt). The TMA kernel
    # does not read through it (see gemm_tma_k_off_by_one).
    dict(
        id="gemm_loader_k_off_by_one",
        bug="GEMM operand loader reads element k+1 for k (both operands shifted by one along K)",
        file="include/hipgrad/gemm/collective/operand_loader.hpp",
        old="const int outer = kKContiguous ? mn : k, inner = kKContiguous ? k : mn;",
        new="const int outer = kKContiguous ? mn : k + 1, inner = kKContiguous ? k + 1 : mn;",
        targets=GEMM,
        filter={"test_gemm": GEMM_ALL},
    ),
    # The split states the gather kernel's producer copies through (mn_state / k_state /
    # advance_k): GatherKernelEveryLayout forces the gather kernel on every layout, and the CPU
    # check LoaderSplitStatesAddressWhatVectorDoes compares them with vector(mn, k).
    dict(
        id="gemm_loader_split_k_off_by_one",
        bug="GEMM operand loader's k state (the gather producer's) names element k+1 for k",
        file="include/hipgrad/gemm/collective/operand_loader.hpp",
        old="KState k_state(int k) const { return state<!kKContiguous>(k); }",
        new="KState k_state(int k) const { return state<!kKContiguous>(k + 1); }",
        targets=GEMM,
        filter={"test_gemm": "GemmTest*Gather*:GemmLayout*"},
    ),
    # The TMA kernel's own K coordinate (the producers' walk, for_each_stage, which the gather
    # kernel shares): on sm_90a kAuto takes the TMA kernel for aligned
    # fp16/bf16/TF32 operands (OddSizesEveryLayout's padded layouts, AlphaBeta, SplitK's padded
    # row-major case, SecondTileConfigEveryLayout, PersistentBlocksWalkSeveralTiles), and
    # NameIsThePathRunTakes forces kTma.
    dict(
        id="gemm_tma_k_off_by_one",
        bug="GEMM TMA producer loads the K tiles of A and B one element too far along K",
        file="include/hipgrad/gemm/collective/producer_contract.hpp",
        old="visit(a, b, state.index, state.phase, m_base, n_base, (w.kt_begin + t) * Cfg::kBlockK);",
        new="visit(a, b, state.index, state.phase, m_base, n_base, (w.kt_begin + t) * Cfg::kBlockK + 1);",
        targets=GEMM,
        filter={"test_gemm": GEMM_ALL},
    ),
    # ---- GroupNorm backward: dx without its correction terms ------------------------------------
    # Three-pass: backward_group_coefficients runs for Algorithm::kThreePass (every case of
    # BackwardMatchesReference, NCHW and NHWC) and for the padded layouts (kAuto).
    dict(
        id="gn_dx_no_correction_three_pass",
        bug="GroupNorm three-pass backward: dx = rstd*gamma*dy (the Sum(dy) and Sum(dy*xhat) terms dropped)",
        file="include/hipgrad/ops/groupnorm/detail/backward_kernels.hpp",
        old="  const float q = -rs * rs * rs * ab[1] * inverse_count;\n  const float r = -rs * ab[0] * inverse_count;",
        new="  const float q = 0.0f * ab[1] * inverse_count;\n  const float r = 0.0f * ab[0];",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # One-read planes: BackwardMatchesReference runs kOneRead on NCHW wherever the plane is a
    # multiple of the vector (e.g. {2,16,8,8}, {1,6,8,4099}, {2,16,128,128} over a cluster).
    dict(
        id="gn_dx_no_correction_one_read_planes",
        bug="GroupNorm one-read planes backward: dx = rstd*gamma*dy (both correction terms dropped)",
        file="include/hipgrad/ops/groupnorm/detail/one_read_planes_kernels.hpp",
        old=(
            "const DataGradient d{s.rstd * s.gamma, -s.rstd * s.rstd * s.rstd * ab[1] * inverse_count,\n"
            "                           -s.rstd * ab[0] * inverse_count};"
        ),
        new=(
            "const DataGradient d{s.rstd * s.gamma, 0.0f * ab[1] * inverse_count,\n"
            "                           0.0f * ab[0]};"
        ),
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # One-read channels last: BackwardMatchesReference runs kOneRead on NHWC for groups of an even
    # channel count (single block, bands and clusters alike share this line).
    dict(
        id="gn_dx_no_correction_one_read_channels_last",
        bug="GroupNorm one-read channels-last backward: dx = rstd*gamma*dy (both correction terms dropped)",
        file="include/hipgrad/ops/groupnorm/detail/one_read_channels_last_kernels.hpp",
        old="const float rs = group_rstd, q = -rs * rs * rs * ab[1] * inverse_count, shift = -rs * ab[0] * inverse_count;",
        new="const float rs = group_rstd, q = 0.0f * ab[1] * inverse_count, shift = 0.0f * ab[0];",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # Staged: BackwardMatchesReference runs kStaged on NHWC where channels are a multiple of the
    # vector; identity and Swish both reach this line.
    dict(
        id="gn_dx_no_correction_staged",
        bug="GroupNorm staged backward: dx = rstd*gamma*dy (both correction terms dropped)",
        file="include/hipgrad/ops/groupnorm/detail/staged_backward_kernels.hpp",
        old="DataGradient{rs * state[e].gamma, -rs * rs * rs * ab[1] * inverse_count, -rs * ab[0] * inverse_count};",
        new="DataGradient{rs * state[e].gamma, 0.0f * ab[1] * inverse_count, 0.0f * ab[0]};",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # ---- GroupNorm forward statistics from part of the group -------------------------------------
    # Staged forward over a cluster: kStaged on NHWC runs clusters for units larger than a block
    # ({1,32,61,67} "a band that fits 8 blocks", {2,16,128,128}, {1,32,128,128}, {2,160,48,64}).
    # The last rank's Σ(x - shift), Σ(x - shift)² and its rows are left out, so mean and rstd are
    # those of the other ranks' rows (7/8 of the group in a cluster of 8).
    dict(
        id="gn_stats_cluster_rank_dropped_staged",
        bug="GroupNorm staged forward: the cluster merge drops the last block's partial sums and its count",
        file="include/hipgrad/ops/groupnorm/detail/staged_forward_kernels.hpp",
        old=(
            "  const float group_count = static_cast<float>(g.group_channels * m.positions);\n"
            "  for (int k = static_cast<int>(threadIdx.x); k < m.band_groups; k += static_cast<int>(blockDim.x)) {\n"
            "    const Sums total = ranks_total(exchange, k, m.band_groups, m.cluster);"
        ),
        new=(
            "  const int kept_ranks = m.cluster > 1 ? m.cluster - 1 : 1;\n"
            "  const float group_count =\n"
            "      static_cast<float>(g.group_channels * (m.cluster > 1 ? m.block_end(kept_ranks - 1) : m.positions));\n"
            "  for (int k = static_cast<int>(threadIdx.x); k < m.band_groups; k += static_cast<int>(blockDim.x)) {\n"
            "    const Sums total = ranks_total(exchange, k, m.band_groups, kept_ranks);"
        ),
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_FORWARD},
    ),
    # Three-pass forward: forward_group_statistics merges the group's per-channel Welford states
    # (each the merge of the channel's tile blocks); every 8th channel's state is lost, count
    # included: the statistics of 7/8 of an 8-channel group. kThreePass runs every case of
    # ForwardMatchesReference; groups of 8+ channels: {256,81,9,9} G9, {1,320,64,32} G32,
    # {2,16,128,128} G2, {2,160,48,64} G16, ...
    dict(
        id="gn_stats_channel_dropped_three_pass",
        bug="GroupNorm three-pass forward: the group merge loses every 8th channel's Welford state (count included)",
        file="include/hipgrad/ops/groupnorm/detail/forward_kernels.hpp",
        old="[&](Index, const Moments& channel) { mine = welford_merge(mine, channel); });",
        new="[&](Index i, const Moments& channel) { if (i % 8 != 7) mine = welford_merge(mine, channel); });",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_FORWARD},
    ),
    # ---- GroupNorm forward y and saved mean ------------------------------------------------------
    # make_affine is the affine step of every forward kernel (three-pass forward_group_statistics,
    # both one-read forwards, the staged forward); the backward builds its own (folded_affine), so
    # only y changes. Fp32ForwardKeepsPrecisionFarFromZero (x around 16384) and the integer inputs
    # of ForwardMatchesReference make the mean large against the tolerance.
    dict(
        id="gn_y_mean_not_subtracted",
        bug="GroupNorm forward: y = gamma*rstd*x + beta (the mean is not subtracted)",
        file="include/hipgrad/ops/groupnorm/detail/affine.hpp",
        old="    return Affine{scale, mean, beta};\n  else\n    return folded_affine(scale, mean, beta);",
        new="    return Affine{scale, 0.0f * mean, beta};\n  else\n    return folded_affine(scale, 0.0f * mean, beta);",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_FORWARD},
    ),
    # Three-pass: forward_group_statistics stores the saved mean (kThreePass in every case of
    # ForwardMatchesReference; y still comes from the right mean through the Affine).
    dict(
        id="gn_saved_mean_zero_three_pass",
        bug="GroupNorm three-pass forward: the saved mean is written as 0 (y still right)",
        file="include/hipgrad/ops/groupnorm/detail/forward_kernels.hpp",
        old="if (threadIdx.x == 0 && mean != nullptr) mean[blockIdx.x] = group_mean;",
        new="if (threadIdx.x == 0 && mean != nullptr) mean[blockIdx.x] = 0.0f * group_mean;",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_FORWARD},
    ),
    # store_statistics saves mean/rstd for both one-read forwards and the staged forward
    # (kOneRead and kStaged runs of ForwardMatchesReference and Fp32ForwardKeepsPrecisionFarFromZero).
    dict(
        id="gn_saved_mean_zero_one_read_staged",
        bug="GroupNorm one-read and staged forwards: the saved mean is written as 0 (y still right)",
        file="include/hipgrad/ops/groupnorm/detail/one_read_common.hpp",
        old="if (mean != nullptr) mean[group] = st.mean;",
        new="if (mean != nullptr) mean[group] = 0.0f * st.mean;",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_FORWARD},
    ),
    # ---- GroupNorm backward: a block's partial lost in the cluster's meeting ---------------------
    # Staged backward without activation (kStagedGroupMeeting): after the cluster barrier warp k
    # adds the ranks' group totals; the last rank's (Σγ·Σdy, Σγ·Σdy·(x-μ)) is lost. Clusters in
    # kStaged runs of BackwardMatchesReference ({1,32,61,67}, {1,32,128,128}: a cluster of 16, ...).
    dict(
        id="gn_bwd_cluster_partial_dropped_staged",
        bug="GroupNorm staged backward (group meeting): the last block's group sums are dropped in the cluster merge",
        file="include/hipgrad/ops/groupnorm/detail/staged_sums.hpp",
        old="const GradientSums part = lane < m.cluster ? exchange[lane * band_groups + warp] : GradientSums{{0.0f, 0.0f}};",
        new="const GradientSums part = lane < (m.cluster > 1 ? m.cluster - 1 : 1) ? exchange[lane * band_groups + warp] : GradientSums{{0.0f, 0.0f}};",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # Staged backward with Swish meets over channel totals (cluster_channel_totals): the last
    # rank's per-channel (Σdz, Σdz·(x-μ)) is lost (dx and dγ/dβ). Swish cases of kStaged in
    # BackwardMatchesReference and SwishOfAnyBeta ({2,160,48,64}).
    dict(
        id="gn_bwd_cluster_partial_dropped_staged_swish",
        bug="GroupNorm staged backward (channel meeting, Swish): the last block's channel sums are dropped in the cluster merge",
        file="include/hipgrad/ops/groupnorm/detail/staged_sums.hpp",
        old="visit(c, ranks_total(exchange, c, channels, m.cluster));",
        new="visit(c, ranks_total(exchange, c, channels, m.cluster > 1 ? m.cluster - 1 : 1));",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_SWISH_BACKWARD},
    ),
    # One-read planes backward over a cluster: kOneRead on NCHW for groups larger than a block
    # ({2,16,128,128} G2, {1,6,8,4099}); the last rank's per-channel partial is lost.
    dict(
        id="gn_bwd_cluster_partial_dropped_one_read_planes",
        bug="GroupNorm one-read planes backward: the last cluster block's channel sums are dropped in the merge",
        file="include/hipgrad/ops/groupnorm/detail/one_read_planes_kernels.hpp",
        old="if (lane.leader) channel = cluster_sum_at(channel_partials, lane.channel, m.cluster);",
        new="if (lane.leader) channel = cluster_sum_at(channel_partials, lane.channel, m.cluster - 1);",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # ---- GroupNorm dγ/dβ from half the rows ------------------------------------------------------
    # fold_gamma_beta as the kernel of its own (backward_gamma_beta): after the three-pass and
    # one-read backwards and the staged backward with Swish; N >= 2 cases ({256,81,9,9}, ...).
    dict(
        id="gn_dgamma_dbeta_half_rows_kernel",
        bug="GroupNorm backward_gamma_beta: dgamma/dbeta summed over the first half of the samples only",
        file="include/hipgrad/ops/groupnorm/detail/backward_kernels.hpp",
        old="const Index count = g.n * parts;",
        new="const Index count = kFlagged ? g.n * parts : (g.n * parts + 1) / 2;",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # The same fold in a grid's own fold blocks (fold_in_grid, kFlagged): the staged backward
    # without activation with dγ/dβ (kStaged in BackwardMatchesReference,
    # StagedFoldBlocksTakeSeveralChunks), whose rows are N·cluster, and the one-read backward of
    # a grid the GPU holds at once.
    dict(
        id="gn_dgamma_dbeta_half_rows_in_grid_fold",
        bug="GroupNorm in-grid fold: dgamma/dbeta summed over the first half of the rows of totals only",
        file="include/hipgrad/ops/groupnorm/detail/backward_kernels.hpp",
        old="const Index count = g.n * parts;",
        new="const Index count = kFlagged ? (g.n * parts + 1) / 2 : g.n * parts;",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_BACKWARD},
    ),
    # ---- GroupNorm Swish derivative ------------------------------------------------------------
    # activation_gradient is dz for every backward kernel (three-pass sums and dx, one-read,
    # staged) with a fused Swish: BackwardMatchesReference's Swish runs, SwishOfAnyBeta.
    # (The CPU reference has its own swish_derivative in activation.hpp, left alone.)
    dict(
        id="gn_swish_derivative_sign",
        bug="GroupNorm backward Swish derivative: sigma - beta*z*sigma*(1-sigma) (wrong sign on the second term)",
        file="include/hipgrad/ops/groupnorm/detail/backward_kernels.hpp",
        old="return dy * (sig + swish_beta * z * sig * (1.0f - sig));",
        new="return dy * (sig - swish_beta * z * sig * (1.0f - sig));",
        targets=GROUPNORM,
        filter={"test_groupnorm": GN_SWISH_BACKWARD},
    ),
    # ---- convolution backward-data -------------------------------------------------------------
    # The phase decomposition and the loaders run in every backward-data test: on the CPU through
    # the host GEMM loop (ConvBackwardDataPlan), on the GPU through every path (ConvBackwardDataTest).
    dict(
        id="conv_bwd_data_first_tap_off_by_one",
        bug="conv backward-data: a phase's first tap one too far (the weights read at f0 + 1)",
        file="include/hipgrad/ops/conv/backward_data/sub_problems.hpp",
        old="b.walk.base += phase[d].first_tap * s[3 + d];",
        new="b.walk.base += (phase[d].first_tap + 1) * s[3 + d];",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA},
    ),
    dict(
        id="conv_bwd_data_phase_without_taps_unwritten",
        bug="conv backward-data: phases that meet no tap are left out (their dx never written)",
        file="include/hipgrad/ops/conv/backward_data/sub_problems.hpp",
        old="    for (const Phase<NDim>& phase : phases) {\n      TapWalk<NDim> walk{};",
        new="    for (const Phase<NDim>& phase : phases) {\n      if (phase_extents<NDim>(problem, phase).taps == 0) continue;\n      TapWalk<NDim> walk{};",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA},
    ),
    dict(
        id="conv_bwd_data_group_weight_offset",
        bug="conv backward-data: group g's weights read at g times w's K stride instead of its G stride",
        file="include/hipgrad/ops/conv/backward_data/sub_problems.hpp",
        old="b.data = w + g * s[0];",
        new="b.data = w + g * s[1];",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA},
    ),
    dict(
        id="conv_bwd_data_dilation_ignored",
        bug="conv backward-data: the first spatial dimension's dilation ignored in dy's positions",
        file="include/hipgrad/ops/conv/backward_data/sub_problems.hpp",
        old="a.tap_dilation[d] = static_cast<int>(phase[d].tap_dilation);",
        new="a.tap_dilation[d] = d == 0 ? 1 : static_cast<int>(phase[d].tap_dilation);",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA},
    ),
    # The box path (kAuto's for fp16/bf16 on sm_90a) has its own copy coordinates and epilogue
    # (backward_data_tma.hpp): ConvBackwardDataTma runs its plan through the maps on the CPU, and
    # ConvBackwardDataTest runs it on the GPU.
    dict(
        id="conv_bwd_data_boxes_first_tap_off_by_one",
        bug="conv backward-data, box path: w's box one tap too far (filter index first_tap + 1)",
        file="include/hipgrad/ops/conv/backward_data/boxes.hpp",
        old="f += (first_tap[d] + j[d] * tap_step[d]) * filter_pitch[d];",
        new="f += (first_tap[d] + 1 + j[d] * tap_step[d]) * filter_pitch[d];",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA_BOXES},
    ),
    dict(
        id="conv_bwd_data_boxes_dilation_ignored",
        bug="conv backward-data, box path: the first spatial dimension's dilation ignored in dy's boxes",
        file="include/hipgrad/ops/conv/backward_data/boxes.hpp",
        old="t.tap_dilation[d] = static_cast<int>(phase[d].tap_dilation);",
        new="t.tap_dilation[d] = d == 0 ? 1 : static_cast<int>(phase[d].tap_dilation);",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA_BOXES},
    ),
    dict(
        id="conv_bwd_data_boxes_group_dx_offset",
        bug="conv backward-data, box path: group g's dx written at g times dx's N stride instead of its G stride",
        file="include/hipgrad/ops/conv/backward_data/boxes.hpp",
        old="Index first = g * s[0];",
        new="Index first = g * s[1];",
        targets=CONV,
        filter={"test_conv": CONV_BWD_DATA_BOXES},
    ),
    # ---- convolution backward-weight ------------------------------------------------------------
    # The sub-problems and their splits run in every backward-weight test: on the CPU through the
    # host GEMM loop with 1, 2 and 7 splits (ConvBackwardWeightPlan), on the GPU through every
    # path (ConvBackwardWeightTest, ConvBackwardWeightLarge).
    dict(
        id="conv_bwd_weight_split_dropped",
        bug="conv backward-weight: the last split's sub-problems left out (its fp32 sums never written)",
        file="include/hipgrad/ops/conv/backward_weight/sub_problems.hpp",
        old="for (int split = 0; split < splits; ++split) {",
        new="for (int split = 0; split < (splits > 1 ? splits - 1 : 1); ++split) {",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    dict(
        id="conv_bwd_weight_sums_in_output_type",
        bug="conv backward-weight: each split's sum rounded to the data type before the reduction",
        file="include/hipgrad/ops/conv/backward_weight/operands.hpp",
        old="static float split_sum(float accumulator) { return accumulator; }",
        new="static float split_sum(float accumulator) { return type_convert<float>(type_convert<T>(accumulator)); }",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    dict(
        id="conv_bwd_weight_group_dy_offset",
        bug="conv backward-weight: group g's dy read at g times dy's N stride instead of its G stride",
        file="include/hipgrad/ops/conv/backward_weight/sub_problems.hpp",
        old="a.data = dy + g * sy[0];",
        new="a.data = dy + g * sy[1];",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    dict(
        id="conv_bwd_weight_split_last_position_skipped",
        bug="conv backward-weight: every full split stops one output position short",
        file="include/hipgrad/ops/conv/backward_weight/sub_problems.hpp",
        old="const Index count = e.positions - first < per_split ? e.positions - first : per_split;",
        new="const Index count = e.positions - first < per_split ? e.positions - first : per_split - 1;",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    # The box path (kAuto's for fp16/bf16 on sm_90a): its plan through the maps on the CPU
    # (ConvBackwardWeightTma), the op on the GPU.
    dict(
        id="conv_bwd_weight_boxes_split_dropped",
        bug="conv backward-weight, box path: the last split's sub-problems left out",
        file="include/hipgrad/ops/conv/backward_weight/boxes.hpp",
        old="for (int split = 0; split < splits; ++split) {",
        new="for (int split = 0; split < (splits > 1 ? splits - 1 : 1); ++split) {",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    dict(
        id="conv_bwd_weight_boxes_group_dy",
        bug="conv backward-weight, box path: every group reads group 0's dy",
        file="include/hipgrad/ops/conv/backward_weight/boxes.hpp",
        old="int r = map_channels(dy_form, group, k0, c);",
        new="int r = map_channels(dy_form, 0, k0, c);",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    dict(
        id="conv_bwd_weight_boxes_split_last_box_skipped",
        bug="conv backward-weight, box path: every full split stops one box of positions short",
        file="include/hipgrad/ops/conv/backward_weight/boxes.hpp",
        old="const Index count = boxes.tiles() - first < per_split ? boxes.tiles() - first : per_split;",
        new="const Index count = boxes.tiles() - first < per_split ? boxes.tiles() - first : per_split - 1;",
        targets=CONV,
        filter={"test_conv": CONV_BWD_WEIGHT},
    ),
    # TF32's box path turns x's landed panels K-major in place; the diagonal 4 × 4 blocks of
    # every panel are a task of their own: the CPU layout test and the TF32 weight tests.
    dict(
        id="conv_bwd_weight_tf32_transpose_skips_diagonal",
        bug="TF32 box path: the in-place panel transpose leaves the diagonal blocks MN-major",
        file="include/hipgrad/gemm/arch/panel_transpose.hpp",
        old="if (b.row == b.column) return detail::store_block_transposed(panel, b.row, b.row, upper, convert);",
        new="if (b.row == b.column) return;",
        targets=GEMM + CONV,
        filter={"test_gemm": "GemmLayout.PanelTranspose*", "test_conv": CONV_BWD_WEIGHT},
    ),
    # Grouped launches run each sub-problem's K tiles from sub_problem_work (the gather, matrix and
    # SIMT kernels): the GPU tests only (the CPU loop has no tiles).
    dict(
        id="conv_bwd_data_last_k_tile_skipped",
        bug="grouped GEMM: a sub-problem's last, partial K tile skipped (K / BK tiles, rounded down)",
        file="include/hipgrad/gemm/kernel/grouped_tiles.hpp",
        old="return {grouped_tile(static_cast<int>(tile), tiles_m, tiles_n), 0, 0, ceil_div(a.k_size(), Cfg::kBlockK)};",
        new="return {grouped_tile(static_cast<int>(tile), tiles_m, tiles_n), 0, 0, a.k_size() / Cfg::kBlockK};",
        targets=CONV + GEMM,
        filter={"test_conv": CONV_BWD_DATA, "test_gemm": "GroupedGemm*"},
    ),
    # ---- convolution, direct kernels -----------------------------------------------------------
    # Every listed problem's plan and emulation run these lines on the CPU; the GPU tests run them
    # on the device.
    dict(
        id="conv_direct_halo_row_dropped",
        bug="conv direct backward-data: every dy window one position short (the last halo row dropped)",
        file="include/hipgrad/ops/conv/direct/plan.hpp",
        old="(dd.tile - 1 + (dd.filter - 1) * dd.dilation) / dd.stride + (dd.stride == 1 ? 1 : 2) + dd.align - 1;",
        new="(dd.tile - 1 + (dd.filter - 1) * dd.dilation) / dd.stride + (dd.stride == 1 ? 0 : 1) + dd.align - 1;",
        targets=CONV,
        filter={"test_conv": CONV_DIRECT},
    ),
    dict(
        id="conv_direct_tap_of_wrong_phase",
        bug="conv direct: a strided position's phase starts at the next tap class (a tap of the wrong phase)",
        file="include/hipgrad/ops/conv/direct/walk.hpp",
        old="phase.first_tap = t;",
        new="phase.first_tap = (t + 1) % limit;",
        targets=CONV,
        filter={"test_conv": CONV_DIRECT},
    ),
    dict(
        id="conv_direct_last_slice_left_out",
        bug="conv direct backward-weight: the reduction leaves the last slice's partials out of dw",
        file="include/hipgrad/ops/conv/direct/backward_weight_kernel.hpp",
        old="for (int s = 0; s < p.slices; ++s) sum += p.partials[s * total + e];",
        new="for (int s = 0; s < p.slices - 1; ++s) sum += p.partials[s * total + e];",
        targets=CONV,
        filter={"test_conv": CONV_DIRECT},
    ),
    dict(
        id="conv_direct_multiplier_ignored",
        bug="conv direct backward-data: only the first of a group's dy channels added (the channel multiplier ignored)",
        file="include/hipgrad/ops/conv/direct/backward_data_kernel.hpp",
        old="for (int kk = 0; kk < chunk; ++kk) {",
        new="for (int kk = 0; kk < 1; ++kk) {",
        targets=CONV,
        filter={"test_conv": CONV_DIRECT},
    ),
    dict(
        id="conv_direct_vector_window_edge",
        bug="conv direct vector backward-data: the register window's last slot read as zero (a halo column dropped)",
        file="include/hipgrad/ops/conv/direct/vector_data_kernel.hpp",
        old="if (v >= kTaps - count && o >= 0 && o < extent) {",
        new="if (v >= kTaps - count && o >= 0 && o < extent && v < kRun + kTaps - 2) {",
        targets=CONV,
        filter={"test_conv": CONV_DIRECT},
    ),
    dict(
        id="conv_direct_vector_last_slot_left_out",
        bug="conv direct vector backward-weight: a block's sums leave its last run slot out",
        file="include/hipgrad/ops/conv/direct/vector_weight_kernel.hpp",
        old="for (int s = 0; s < p.slots; ++s) sum += scratch[s * stride + e];",
        new="for (int s = 0; s < p.slots - 1; ++s) sum += scratch[s * stride + e];",
        targets=CONV,
        filter={"test_conv": CONV_DIRECT},
    ),
    # packed_weight_source is the one index map of both copies: the spread (backward-data) and
    # the gather (backward-weight); the CPU test runs the reference through it.
    dict(
        id="conv_packed_off_diagonal_kept",
        bug="conv packed groups: the packed weight keeps a block off the diagonal (the next group's taps)",
        file="include/hipgrad/ops/conv/common/packed_groups_kernels.hpp",
        old="if (kk / p.k != block) return -1;",
        new="if (kk / p.k != block && kk / p.k != block + 1) return -1;",
        targets=CONV,
        filter={"test_conv": CONV_PACKED},
    ),
    dict(
        id="conv_packed_wrong_block_group",
        bug="conv packed groups: a diagonal block maps to the packed group's first group",
        file="include/hipgrad/ops/conv/common/packed_groups_kernels.hpp",
        old="const std::int64_t g = (i / wide_k) * p.groups + block;",
        new="const std::int64_t g = (i / wide_k) * p.groups + (block > 1 ? block : 0);",
        targets=CONV,
        filter={"test_conv": CONV_PACKED},
    ),
    # The unfolded route's copies: their index maps run on the host against the reference
    # (ConvUnfold.IndexMapsGiveTheReference) and in the kernels on the GPU (ConvUnfoldTest).
    dict(
        id="conv_unfold_zero_fill_boundary",
        bug="conv unfolded windows: a window's position one past x's end read instead of zero-filled",
        file="include/hipgrad/ops/conv/common/unfold_kernels.hpp",
        old="if (at < 0 || at >= u.input[d]) return -1;",
        new="if (at < 0 || at > u.input[d]) return -1;",
        targets=CONV,
        filter={"test_conv": CONV_UNFOLD},
    ),
    dict(
        id="conv_unfold_w_stride_for_every_dimension",
        bug="conv unfolded windows: x's last spatial stride (W's) used for every spatial dimension",
        file="include/hipgrad/ops/conv/common/unfold_kernels.hpp",
        old="c.delta += static_cast<std::int64_t>(c.reach[d]) * u.strides[3 + d];",
        new="c.delta += static_cast<std::int64_t>(c.reach[d]) * u.strides[2 + NDim];",
        targets=CONV,
        filter={"test_conv": CONV_UNFOLD},
    ),
    dict(
        id="conv_fold_last_tap_dropped",
        bug="conv unfolded backward-data: the fold leaves each dimension's last filter tap out of the dx sums",
        file="include/hipgrad/ops/conv/common/unfold_kernels.hpp",
        old="for (; f < u.filter[D]; f += p.tap_step[D]) {",
        new="for (; f < u.filter[D] - 1; f += p.tap_step[D]) {",
        targets=CONV,
        filter={"test_conv": CONV_UNFOLD},
    ),
    # The staged route: its rule and copies' index maps run on the host against the reference
    # (ConvStaged) and in the kernel on the GPU (ConvStagedTest).
    dict(
        id="conv_staged_rows_padded_taken_as_one_stride",
        bug="conv staged tensors: spatial dimensions whose strides do not merge (H rows padded past W) staged as one index",
        file="include/hipgrad/ops/conv/common/plain_gemm.hpp",
        old="} else if (strides[d] != span * *stride) {",
        new="} else if (strides[d] < span * *stride) {",
        targets=CONV,
        filter={"test_conv": CONV_STAGED},
    ),
    dict(
        id="conv_staged_odd_k_read_in_place",
        bug="conv staged tensors: a channels-last dy whose K is not whole vectors read in place by the padded problem",
        file="include/hipgrad/ops/conv/common/staged.hpp",
        old="case StagedTensor::kOutput: return !(problem.output_strides[2] == 1 && k);",
        new="case StagedTensor::kOutput: return !(problem.output_strides[2] == 1);",
        targets=CONV,
        filter={"test_conv": CONV_STAGED},
    ),
    dict(
        id="conv_staged_groups_of_any_width_before_direct",
        bug="conv staged tensors: NCHW groups narrower than a vector staged ahead of the direct kernels (their work padded to twice)",
        file="include/hipgrad/ops/conv/common/staged.hpp",
        old="!channels_in_whole_vectors<T>(problem) && p.C >= kVector16<T> && p.K >= kVector16<T> &&",
        new="!channels_in_whole_vectors<T>(problem) && p.C >= 1 && p.K >= 1 &&",
        targets=CONV,
        filter={"test_conv": CONV_STAGED},
    ),
]
