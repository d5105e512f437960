#!/usr/bin/env bash
# Builds and runs the GroupNorm benchmark, then PyTorch on the same configurations, on a machine
# with an NVIDIA GPU and PyTorch: bash bench/run_groupnorm.sh [build-dir] [bench options...]
# Writes ours.jsonl, compare.json and compare.md (the table of bench/log/groupnorm.md) to $OUT (or the build
# directory) and prints the table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/bench}"
shift || true
out="${OUT:-$build}"
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHIPGRAD_BUILD_TESTS=OFF -DHIPGRAD_BUILD_EXAMPLES=OFF \
  -DHIPGRAD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_groupnorm >/dev/null
"$build/bench/bench_groupnorm" "$@" | tee "$out/ours.jsonl" >/dev/null
python3 bench/torch_compare.py "$out/ours.jsonl" --json "$out/compare.json" --markdown "$out/compare.md"
