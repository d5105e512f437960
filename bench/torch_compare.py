"""Side-by-side: times the PyTorch equivalent of every configuration a hipgrad benchmark printed
(one JSON line each, see bench_harness.hpp) and prints one table with the ratio.

    python3 bench/torch_compare.py ours.jsonl [--json out.json] [--markdown out.md]

PyTorch runs in the same process order, on the same GPU, right after hipgrad's benchmark, with
torch.backends.cudnn.benchmark on and medians of triton.testing.do_bench (which clears the L2
between repeats, as hipgrad's timing rotates inputs beyond it).

PyTorch gets the tensors hipgrad gets: x, and for the backward dy, in the benchmarked layout
(channels_last for nhwc). Its CUDA GroupNorm writes y in NCHW whatever the layout of x, so a
dy made like y would hand PyTorch an NCHW gradient that hipgrad's NHWC backward never sees; for
nhwc backward rows that variant is timed too (column "dy NCHW") and reported beside the
like-for-like one, never instead of it.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

torch.backends.cudnn.benchmark = True
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def groupnorm_case(row, dy_like_output=False):
    lengths, groups = row["lengths"], int(row["groups"])
    dt = DTYPES[row["dtype"]]
    fmt = torch.contiguous_format
    if row["layout"] == "nhwc":
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(len(lengths), torch.contiguous_format)
    x = torch.randn(*lengths, device="cuda", dtype=dt).to(memory_format=fmt)
    gamma = torch.randn(lengths[1], device="cuda", dtype=dt)
    beta = torch.randn(lengths[1], device="cuda", dtype=dt)
    op = row["op"]
    swish = op.endswith("swish")
    if op.startswith("groupnorm_fwd"):
        if swish:
            return lambda: F.silu(F.group_norm(x, groups, gamma, beta, 1e-5))
        return lambda: F.group_norm(x, groups, gamma, beta, 1e-5)
    xg = x.detach().requires_grad_(True)
    gg = gamma.detach().requires_grad_(True)
    bg = beta.detach().requires_grad_(True)
    y = F.group_norm(xg, groups, gg, bg, 1e-5)
    if swish:
        y = F.silu(y)
    # dy in x's layout (as hipgrad's benchmark passes it); or laid out as PyTorch's y, which is NCHW.
    dy = torch.randn_like(y) if dy_like_output else torch.randn(y.shape, device="cuda", dtype=dt).to(memory_format=fmt)
    return lambda: torch.autograd.grad(y, (xg, gg, bg), dy, retain_graph=True)


CASES = {"groupnorm": groupnorm_case}


def groupnorm_path(name):
    """The algorithm a GroupNorm op name says ran: staged, one-read or three-pass, with its
    cluster (×k), band of groups and, for staged grids whose first wave starts staggered, "staggered"."""
    fields = name.split("_")
    def value(prefix):
        hits = [f[len(prefix):] for f in fields if f.startswith(prefix) and f[len(prefix):].isdigit()]
        return int(hits[0]) if hits else None
    path = "staged" if "_staged_" in name else "one-read" if "_one_read_" in name else "three-pass"
    if path != "three-pass":
        if value("k") and value("k") > 1:
            path += f" ×{value('k')}"
        if value("band"):
            path += f" band {value('band')}"
        if "_staggered" in name:
            path += " staggered"
    return path


def markdown_table(table):
    """perf.md's table of every configuration."""
    lines = ["| op | shape | dtype | layout | path | hipgrad ms | TB/s | PyTorch ms | TB/s | speedup | "
             "PyTorch ms, dy NCHW | speedup |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in table:
        shape = "x".join(str(v) for v in r["lengths"]) + f" G{int(r['groups'])}"
        extra = (f"{r['torch_ms_dy_nchw']:.4f} | {r['speedup_dy_nchw']:.2f}x" if "torch_ms_dy_nchw" in r else "– | –")
        lines.append(f"| {r['op'].replace('groupnorm_', '')} | {shape} | {r['dtype']} | {r['layout'].upper()} | "
                     f"{groupnorm_path(r['name'])} | {r['ms']:.4f} | {r['tbps']:.2f} | {r['torch_ms']:.4f} | "
                     f"{r['torch_tbps']:.2f} | {r['speedup']:.2f}x | {extra} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ours")
    parser.add_argument("--json", default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.ours) if line.startswith("{")]
    table = []
    for row in rows:
        family = row["op"].split("_")[0]
        fn = CASES[family](row)
        torch_ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
        row["torch_ms"] = torch_ms
        row["torch_tbps"] = row["bytes"] / (torch_ms * 1e-3) / 1e12
        row["speedup"] = torch_ms / row["ms"]
        if row["op"].startswith("groupnorm_bwd") and row["layout"] == "nhwc":
            dy_nchw_ms = do_bench(CASES[family](row, dy_like_output=True), warmup=25, rep=100, return_mode="median")
            row["torch_ms_dy_nchw"] = dy_nchw_ms
            row["speedup_dy_nchw"] = dy_nchw_ms / row["ms"]
        table.append(row)
        torch.cuda.empty_cache()
    print(f"{'op':<20} {'shape':<24} {'G':>3} {'dtype':<5} {'layout':<6} {'ours ms':>9} {'TB/s':>6} "
          f"{'torch ms':>9} {'TB/s':>6} {'speedup':>8} {'dy NCHW':>9} {'speedup':>8}")
    for r in table:
        shape = "x".join(str(v) for v in r["lengths"])
        print(f"{r['op']:<20} {shape:<24} {int(r['groups']):>3} {r['dtype']:<5} {r['layout']:<6} {r['ms']:>9.4f} "
              f"{r['tbps']:>6.2f} {r['torch_ms']:>9.4f} {r['torch_tbps']:>6.2f} {r['speedup']:>7.2f}x" +
              (f" {r['torch_ms_dy_nchw']:>9.4f} {r['speedup_dy_nchw']:>7.2f}x" if "torch_ms_dy_nchw" in r else ""))
    by_op, by_op_dy_nchw = {}, {}
    for r in table:
        by_op.setdefault(r["op"], []).append(r["speedup"])
        by_op_dy_nchw.setdefault(r["op"], []).append(r.get("speedup_dy_nchw", r["speedup"]))
    for op, s in sorted(by_op.items()):
        print(f"{op}: median speedup {statistics.median(s):.2f}x, min {min(s):.2f}x over {len(s)} configurations")
        if op.startswith("groupnorm_bwd"):
            t = by_op_dy_nchw[op]
            print(f"{op} (nhwc rows against PyTorch given dy in NCHW): median {statistics.median(t):.2f}x, "
                  f"min {min(t):.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(table, fh, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(markdown_table(table))


if __name__ == "__main__":
    sys.exit(main())
