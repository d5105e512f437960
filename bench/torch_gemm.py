"""Side-by-side GEMM: times torch.matmul (cuBLAS) on every configuration bench_gemm printed (one
JSON line each) and prints one table: our ms and TFLOP/s, cuBLAS's, and the ratio.

    python3 bench/torch_gemm.py ours.jsonl [--json out.json]

fp16/bf16 in their own type; "tf32" is fp32 with torch.backends.cuda.matmul.allow_tf32 on,
"fp32" with it off (exact fp32, no tensor cores). A and B in the line's layouts (r: row-major,
c: column-major, a transposed view), C row-major, as in bench_gemm; a grouped line
(op grouped_gemm, `count` sub-problems) against torch.bmm of the same batch. Medians of
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


def operand(rows, cols, layout, dtype, batch=None):
    """A rows x cols matrix (batch of them) in `layout`: 'r' row-major, 'c' a transposed view."""
    shape = (rows, cols) if layout == "r" else (cols, rows)
    if batch is not None:
        shape = (batch,) + shape
    x = torch.rand(*shape, device="cuda", dtype=DTYPES[dtype]) * 2 - 1
    return x if layout == "r" else x.transpose(-1, -2)


def torch_ms(dtype, m, n, k, layout="rrr", count=None):
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    a = operand(m, k, layout[0], dtype, count)
    b = operand(k, n, layout[1], dtype, count)
    if count is None:
        ms = do_bench(lambda: torch.matmul(a, b), warmup=25, rep=200, return_mode="median")
    else:
        ms = do_bench(lambda: torch.bmm(a, b), warmup=25, rep=200, return_mode="median")
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
        count = int(r["count"]) if r.get("op") == "grouped_gemm" else None
        key = (r["dtype"], int(r["m"]), int(r["n"]), int(r["k"]), r.get("layout", "rrr"), count)
        if key not in cache:
            cache[key] = torch_ms(*key)
        r["torch_ms"] = cache[key]
        r["torch_tflops"] = 2.0 * (count or 1) * key[1] * key[2] * key[3] / (r["torch_ms"] * 1e-3) / 1e12
        r["ratio"] = r["torch_ms"] / r["ms"]
    print(f"{'dtype':<5} {'size':<20} {'lay':<4} {'name':<52} {'regs':>4} {'spill':>5} {'ours ms':>9} {'TFLOP/s':>8} "
          f"{'cuBLAS ms':>9} {'TFLOP/s':>8} {'ratio':>6}")
    for r in rows:
        size = f"{int(r['m'])}x{int(r['n'])}x{int(r['k'])}"
        if r.get("op") == "grouped_gemm":
            size = f"{int(r['count'])}x" + size
        print(f"{r['dtype']:<5} {size:<20} {r.get('layout', 'rrr'):<4} {r['name']:<52} {int(r.get('registers', 0)):>4} "
              f"{int(r.get('local_bytes', 0)):>5} {r['ms']:>9.4f} {r['tflops']:>8.1f} "
              f"{r['torch_ms']:>9.4f} {r['torch_tflops']:>8.1f} {r['ratio']:>5.2f}x")
    print("\nbest configuration per dtype, size and layout (target ratio in brackets):")
    best = {}
    for r in rows:
        if r.get("op") == "grouped_gemm":
            continue
        key = (r["dtype"], int(r["m"]), r.get("layout", "rrr"))
        if key not in best or r["ratio"] > best[key]["ratio"]:
            best[key] = r
    failed = False
    for (dtype, m, layout), r in sorted(best.items()):
        ok = r["ratio"] >= TARGETS[dtype]
        failed |= not ok
        print(f"  {dtype:<5} {m}^3 {layout}: {r['tflops']:.1f} TFLOP/s, {r['ratio']:.2f}x cuBLAS [>= {TARGETS[dtype]}] "
              f"{'ok' if ok else 'BELOW TARGET'}  ({r['name']})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
