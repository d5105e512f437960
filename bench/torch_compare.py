"""Side-by-side: times the PyTorch equivalent of every configuration a hipgrad benchmark printed
(one JSON line each, see bench_harness.hpp) and prints one table with the ratio.

    python3 bench/torch_compare.py ours.jsonl [--json out.json]

PyTorch runs in the same process order, on the same GPU, right after hipgrad's benchmark, with
torch.backends.cudnn.benchmark on and medians of triton.testing.do_bench (which clears the L2
between repeats, as hipgrad's timing rotates inputs beyond it).
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


def groupnorm_case(row):
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
    dy = torch.randn_like(y)
    return lambda: torch.autograd.grad(y, (xg, gg, bg), dy, retain_graph=True)


CASES = {"groupnorm": groupnorm_case}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ours")
    parser.add_argument("--json", default=None)
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
        table.append(row)
        torch.cuda.empty_cache()
    print(f"{'op':<20} {'shape':<24} {'G':>3} {'dtype':<5} {'layout':<6} {'ours ms':>9} {'TB/s':>6} "
          f"{'torch ms':>9} {'TB/s':>6} {'speedup':>8}")
    for r in table:
        shape = "x".join(str(v) for v in r["lengths"])
        print(f"{r['op']:<20} {shape:<24} {int(r['groups']):>3} {r['dtype']:<5} {r['layout']:<6} {r['ms']:>9.4f} "
              f"{r['tbps']:>6.2f} {r['torch_ms']:>9.4f} {r['torch_tbps']:>6.2f} {r['speedup']:>7.2f}x")
    by_op = {}
    for r in table:
        by_op.setdefault(r["op"], []).append(r["speedup"])
    for op, s in sorted(by_op.items()):
        print(f"{op}: median speedup {statistics.median(s):.2f}x, min {min(s):.2f}x over {len(s)} configurations")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(table, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
