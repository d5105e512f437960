"""Side-by-side convolution: times cuDNN (torch.ops.aten.convolution_backward with the input-gradient
mask for conv_bwd_data lines, the weight-gradient mask for conv_bwd_weight lines) on every line
bench_conv printed, channels-last tensors of the same sizes and dtype, and prints one table: our
ms, TFLOP/s and TB/s, cuDNN's, and the ratio, then the median ratio per op and dtype over the dense
acceptance list. Weight lines are timed a second time with torch.use_deterministic_algorithms(True)
(cuDNN's default weight gradient is not deterministic; ours always is): the "det" columns.

    python3 bench/torch_conv.py ours.jsonl [--json out.json]

torch.backends.cudnn.benchmark is on (cuDNN picks its fastest algorithm for each shape); "tf32"
allows TF32 in cuDNN, "fp32" does not (exact fp32). A 1-D problem is timed as the 2-D one with a
height of 1 (cuDNN's own treatment of 1-D convolutions). Medians of triton.testing.do_bench.
"""
import argparse
import json
import statistics
import sys

import torch
from triton.testing import do_bench

torch.backends.cudnn.benchmark = True
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "fp32": torch.float32}
TARGETS = {"fp16": 0.85, "bf16": 0.85, "fp32": 1.0, "tf32": 0.8}
DENSE = {"conv_bwd_data": {"seed", "resnet3x3", "resnet1x1", "3d", "1d"},
         "conv_bwd_weight": {"seed", "resnet3x3", "resnet1x1", "3d", "1d", "ck3d"}}


def output_length(i, f, s, d, p):
    return (i + 2 * p - d * (f - 1) - 1) // s + 1


def cudnn_ms(row, deterministic=False):
    dtype = row["dtype"]
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    weight = row.get("op", "conv_bwd_data") == "conv_bwd_weight"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    dt = DTYPES[dtype]
    g, n, k, c = int(row["g"]), int(row["n"]), int(row["k"]), int(row["c"])
    f, i, s, d, p = row["filter"], row["input"], row["stride"], row["dilation"], row["pad"]
    if len(f) == 1:  # 1-D as 2-D with height 1
        f, i, s, d, p = [1] + f, [1] + i, [1] + s, [1] + d, [0] + p
    o = [output_length(*args) for args in zip(i, f, s, d, p)]
    fmt = torch.channels_last if len(f) == 2 else torch.channels_last_3d
    x = (torch.randn if weight else torch.empty)(n, g * c, *i, device="cuda", dtype=dt).to(memory_format=fmt)
    w = torch.randn(g * k, c, *f, device="cuda", dtype=dt).to(memory_format=fmt)
    dy = torch.randn(n, g * k, *o, device="cuda", dtype=dt).to(memory_format=fmt)

    def run():
        return torch.ops.aten.convolution_backward(dy, x, w, None, s, p, d, False, [0] * len(f), g,
                                                   [not weight, weight, False])

    ms = do_bench(run, warmup=25, rep=200, return_mode="median")
    del x, w, dy
    torch.cuda.empty_cache()
    return ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ours")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.ours) if line.startswith("{")]
    for r in rows:
        r.setdefault("op", "conv_bwd_data")
        r["cudnn_ms"] = cudnn_ms(r)
        r["cudnn_tflops"] = r["tflops"] * r["ms"] / r["cudnn_ms"]
        r["ratio"] = r["cudnn_ms"] / r["ms"]
        if r["op"] == "conv_bwd_weight":
            r["cudnn_det_ms"] = cudnn_ms(r, deterministic=True)
            r["ratio_det"] = r["cudnn_det_ms"] / r["ms"]
    torch.use_deterministic_algorithms(False)
    print(f"{'op':<6} {'case':<12} {'dtype':<5} {'name':<64} {'ours ms':>9} {'TFLOP/s':>8} {'TB/s':>6} "
          f"{'cuDNN ms':>9} {'TFLOP/s':>8} {'ratio':>6} {'det ms':>9} {'det':>6}")
    for r in rows:
        det = (f" {r['cudnn_det_ms']:>9.4f} {r['ratio_det']:>5.2f}x" if "ratio_det" in r else "")
        print(f"{r['op'][9:]:<6} {r['case']:<12} {r['dtype']:<5} {r['name'][:64]:<64} {r['ms']:>9.4f} "
              f"{r['tflops']:>8.1f} {r['tbps']:>6.2f} {r['cudnn_ms']:>9.4f} {r['cudnn_tflops']:>8.1f} "
              f"{r['ratio']:>5.2f}x{det}")
    failed = False
    print("\nmedian ratio over the dense list per op and dtype (target in brackets):")
    for op, dense in DENSE.items():
        for dtype in DTYPES:
            ratios = [r["ratio"] for r in rows if r["op"] == op and r["dtype"] == dtype and r["case"] in dense]
            if not ratios:
                continue
            worst = min(ratios)
            ok = worst >= TARGETS[dtype]
            failed |= not ok
            print(f"  {op[9:]:<6} {dtype:<5} median {statistics.median(ratios):.2f}x, worst {worst:.2f}x "
                  f"[each >= {TARGETS[dtype]}] {'ok' if ok else 'BELOW TARGET'}")
            det = [r["ratio_det"] for r in rows if r["op"] == op and r["dtype"] == dtype and r["case"] in dense
                   and "ratio_det" in r]
            if det:
                print(f"  {op[9:]:<6} {dtype:<5} against deterministic cuDNN: median {statistics.median(det):.2f}x, "
                      f"worst {min(det):.2f}x [each >= 1.0]")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
