"""Side-by-side GEMM: times torch.matmul (cuBLAS) on every configuration bench_gemm printed (one
JSON line each) and prints one table: our ms and TFLOP/s, cuBLAS's, and the ratio.

    python3 bench/torch_gemm.py ours.jsonl [--json out.json]

fp16/bf16 in their own type; "tf32" is fp32 with torch.backends.cuda.matmul.allow_tf32 on,
"fp32" with it off (exact fp32, no tensor cores). Row-major A, B, C as in bench_gemm. Medians of
triton.testing.do_bench, which clears the L2 between runs (bench_gemm rotates its inputs beyond
the L2 instead).
"""
import argparse
import json
import sys

import torch
from triton.testing import do_bench

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "fp32": torch.float32}
TARGETS = {"fp16": 0.55, "bf16": 0.55, "tf32": 0.5, "fp32": 0.7}


def torch_ms(dtype, m, n, k):
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    a = torch.rand(m, k, device="cuda", dtype=DTYPES[dtype]) * 2 - 1
    b = torch.rand(k, n, device="cuda", dtype=DTYPES[dtype]) * 2 - 1
    ms = do_bench(lambda: torch.matmul(a, b), warmup=25, rep=200, return_mode="median")
    del a, b
    torch.cuda.empty_cache()
    return ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ours")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.ours) if line.startswith("{")]
    cache = {}
    for r in rows:
        key = (r["dtype"], int(r["m"]), int(r["n"]), int(r["k"]))
        if key not in cache:
            cache[key] = torch_ms(*key)
        r["torch_ms"] = cache[key]
        r["torch_tflops"] = 2.0 * key[1] * key[2] * key[3] / (r["torch_ms"] * 1e-3) / 1e12
        r["ratio"] = r["torch_ms"] / r["ms"]
    print(f"{'dtype':<5} {'size':<16} {'name':<44} {'ours ms':>9} {'TFLOP/s':>8} {'cuBLAS ms':>9} {'TFLOP/s':>8} {'ratio':>6}")
    for r in rows:
        size = f"{int(r['m'])}x{int(r['n'])}x{int(r['k'])}"
        print(f"{r['dtype']:<5} {size:<16} {r['name']:<44} {r['ms']:>9.4f} {r['tflops']:>8.1f} "
              f"{r['torch_ms']:>9.4f} {r['torch_tflops']:>8.1f} {r['ratio']:>5.2f}x")
    print("\nbest configuration per dtype and size (target ratio in brackets):")
    best = {}
    for r in rows:
        key = (r["dtype"], int(r["m"]))
        if key not in best or r["ratio"] > best[key]["ratio"]:
            best[key] = r
    failed = False
    for (dtype, m), r in sorted(best.items()):
        ok = r["ratio"] >= TARGETS[dtype]
        failed |= not ok
        print(f"  {dtype:<5} {m}^3: {r['tflops']:.1f} TFLOP/s, {r['ratio']:.2f}x cuBLAS [>= {TARGETS[dtype]}] "
              f"{'ok' if ok else 'BELOW TARGET'}  ({r['name']})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
