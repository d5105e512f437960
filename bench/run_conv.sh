#!/usr/bin/env bash
# Builds and runs the convolution benchmark, then cuDNN (through PyTorch) on the same problems, on
# a machine with an NVIDIA GPU and PyTorch: bash bench/run_conv.sh [build-dir] [bench_conv options...]
# Prints the side-by-side table and writes ours.jsonl and compare.json to $OUT (or the build
# directory).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/bench}"
shift || true
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHIPGRAD_BUILD_TESTS=OFF -DHIPGRAD_BUILD_EXAMPLES=OFF \
  -DHIPGRAD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_conv >/dev/null
out="${OUT:-$build}"
mkdir -p "$out"
echo "== bench_conv =="
"$build/bench/bench_conv" "$@" | tee "$out/ours.jsonl"
echo "== cuDNN side by side =="
python3 bench/torch_conv.py "$out/ours.jsonl" --json "$out/compare.json"
