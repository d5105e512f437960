#!/usr/bin/env bash
# Builds and runs the GEMM benchmark, then torch.matmul (cuBLAS) on the same configurations, on a
# machine with an NVIDIA GPU and PyTorch: bash bench/run_gemm.sh [build-dir] [bench_gemm options...]
# Prints the registers / shared memory / spills of the GEMM kernels, the side-by-side table, and
# writes ours.jsonl, compare.json and resources.txt to $OUT (or the build directory).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/bench}"
shift || true
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHIPGRAD_BUILD_TESTS=OFF -DHIPGRAD_BUILD_EXAMPLES=OFF \
  -DHIPGRAD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_gemm >/dev/null
out="${OUT:-$build}"
mkdir -p "$out"

# Resource usage of every GEMM kernel in the binary (what `nvcc -Xptxas -v` reports): registers,
# shared memory, stack and spills, one line per kernel with its demangled name shortened.
echo "== GEMM kernel resources (cuobjdump --dump-resource-usage, sm_90a) =="
cuobjdump --dump-resource-usage "$build/bench/bench_gemm" 2>/dev/null | c++filt |
  awk '/Function/ {name=$0; sub(/.*Function /, "", name); sub(/\(hipgrad::gemm::(Dense|Tma)Operand.*/, "", name); next}
       /REG:/ && name ~ /gemm|reduce_split_k/ {print name; print "    " $0; name=""}' |
  sed -e 's/hipgrad::gemm:://g' -e 's/hipgrad:://g' | tee "$out/resources.txt" || echo "(cuobjdump failed)"

echo "== bench_gemm =="
"$build/bench/bench_gemm" "$@" | tee "$out/ours.jsonl"
echo "== torch.matmul side by side =="
python3 bench/torch_gemm.py "$out/ours.jsonl" --json "$out/compare.json"
