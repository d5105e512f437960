"""Side-by-side convolution: times cuDNN (torch.ops.aten.convolution_backward with the input-gradient
mask for conv_bwd_data lines, the weight-gradient mask for conv_bwd_weight lines) on every line
bench_conv printed, tensors of the same sizes, dtype and memory format (channels-last for "nhwgc",
PyTorch's default NCHW for "ngchw"), and prints one table: our ms, TFLOP/s and TB/s, cuDNN's, the
ratio, and the share of the roofline; then the median ratio per op and dtype over the dense
acceptance list, the few-channels list's summary, the stems list's, and every line below 0.5x of
cuDNN. Weight lines are timed a second time with
torch.use_deterministic_algorithms(True) (cuDNN's default weight gradient is not deterministic;
ours always is): the "det" columns.

    python3 bench/torch_conv.py ours.jsonl [--json out.json]

The roofline time of a line is the larger of its least bytes (each tensor once) over the copy
bandwidth measured here (a 2 GiB device-to-device copy, read + write) and its FLOPs over the fp32
FMA peak (multiprocessors × 128 lanes × 2 × the SM clock nvidia-smi reports).
torch.backends.cudnn.benchmark is on (cuDNN picks its fastest algorithm for each shape); "tf32"
allows TF32 in cuDNN, "fp32" does not (exact fp32). A 1-D problem is timed as the 2-D one with a
height of 1 (cuDNN's own treatment of 1-D convolutions). Medians of triton.testing.do_bench.
"""
import argparse
import json
import math
import statistics
import subprocess
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


def copy_bandwidth():
    """Bytes per second of a 2 GiB device-to-device copy (read + write)."""
    x = torch.empty(2**29, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    ms = do_bench(lambda: y.copy_(x), warmup=25, rep=200, return_mode="median")
    bw = 2 * x.numel() * 4 / (ms * 1e-3)
    del x, y
    torch.cuda.empty_cache()
    return bw


def fma_peak():
    """fp32 FMA FLOP/s: multiprocessors × 128 lanes × 2 × the SM clock."""
    mhz = 1980.0
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, check=True).stdout.strip()
        mhz = float(out.splitlines()[0])
    except Exception:  # noqa: BLE001 - no nvidia-smi: the H100/H200 boost clock
        pass
    return torch.cuda.get_device_properties(0).multi_processor_count * 128 * 2 * mhz * 1e6


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
    if row.get("layout", "nhwgc") == "ngchw":
        fmt = torch.contiguous_format
    else:
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


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def few_summary(rows):
    """The few-channels list against its targets: depthwise and 2–16 channels per group (fp16/bf16
    ≥ 70% of the roofline median, none below 50%, ≥ 3× cuDNN geometric mean; fp32 ≥ 60%), 17–32
    channels (≥ 1.5× cuDNN geometric mean, none below 1.0×), NCHW within 0.8× of channels-last."""
    few = [r for r in rows if "roofline" in r and r.get("few")]
    if not few:
        return
    print("\nfew channels per group (roofline share, ratio to cuDNN):")
    for op in ("conv_bwd_data", "conv_bwd_weight"):
        for layout in ("nhwgc", "ngchw"):
            for band, lo, hi in (("<=16", 1, 16), ("17-32", 17, 32)):
                for dtypes in (("fp16", "bf16"), ("fp32",)):
                    sel = [r for r in few if r["op"] == op and r.get("layout", "nhwgc") == layout and
                           r["dtype"] in dtypes and lo <= max(r["c"], r["k"]) <= hi]
                    if not sel:
                        continue
                    roof = [r["roofline"] for r in sel]
                    ratios = [r["ratio"] for r in sel]
                    print(f"  {op[9:]:<6} {layout:<5} {band:<5} {'/'.join(dtypes):<9} roofline median "
                          f"{statistics.median(roof):.0%} min {min(roof):.0%}; cuDNN geomean {geomean(ratios):.2f}x "
                          f"min {min(ratios):.2f}x  ({len(sel)} lines)")
    pairs = {}
    for r in few:
        pairs.setdefault((r["op"], r["case"], r["dtype"]), {})[r.get("layout", "nhwgc")] = r["ms"]
    nchw = [v["nhwgc"] / v["ngchw"] for v in pairs.values() if "nhwgc" in v and "ngchw" in v]
    if nchw:
        print(f"  NCHW speed / channels-last speed: median {statistics.median(nchw):.2f}, min {min(nchw):.2f}")


STEMS = {"resnet50_stem_7x7s2", "efficientnet_b0_stem_3x3s2", "convnext_t_patchify_4x4s4", "vit_b16_patch_16x16s16",
         "ldm_unet_in_4to320", "ldm_vae_out_128to3", "x3d_stem_1x3x3s122", "video_1x3x3s122_64"}


def stems_summary(rows):
    """The stems list (first layers of few input channels, a strided video layer) against cuDNN
    per op, layout and 16-bit type: geometric mean (target >= 1.0x) and worst (>= 0.7x); then every
    line of any list below 0.5x of cuDNN (a cliff)."""
    stems = [r for r in rows if r["case"] in STEMS]
    if stems:
        print("\nstems and first layers (ratio to cuDNN; targets: geomean >= 1.0x, each >= 0.7x):")
        for op in ("conv_bwd_data", "conv_bwd_weight"):
            for layout in ("nhwgc", "ngchw"):
                sel = [r["ratio"] for r in stems if r["op"] == op and r.get("layout", "nhwgc") == layout and
                       r["dtype"] in ("fp16", "bf16")]
                if sel:
                    geo = statistics.geometric_mean(sel)
                    print(f"  {op[9:]:<6} {layout:<5} fp16/bf16: geomean {geo:.2f}x, worst {min(sel):.2f}x over {len(sel)}")
    cliffs = [r for r in rows if r["ratio"] < 0.5]
    print(f"\nlines below 0.5x of cuDNN: {len(cliffs)} of {len(rows)}")
    for r in sorted(cliffs, key=lambda r: r["ratio"])[:20]:
        print(f"  {r['ratio']:.2f}x {r['op'][9:]} {r['case']} {r.get('layout', 'nhwgc')} {r['dtype']} {r['name'][-48:]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ours")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.ours) if line.startswith("{")]
    bandwidth, peak = copy_bandwidth(), fma_peak()
    print(f"{torch.cuda.get_device_name(0)}: copy {bandwidth / 1e12:.2f} TB/s, fp32 FMA peak {peak / 1e12:.1f} TFLOP/s")
    for r in rows:
        r.setdefault("op", "conv_bwd_data")
        r["few"] = r["case"] not in DENSE["conv_bwd_weight"] | {"grouped32", "grouped4_s2"} | STEMS
        r["cudnn_ms"] = cudnn_ms(r)
        r["cudnn_tflops"] = r["tflops"] * r["ms"] / r["cudnn_ms"]
        r["ratio"] = r["cudnn_ms"] / r["ms"]
        bytes_, flops = r["tbps"] * 1e12 * r["ms"] * 1e-3, r["tflops"] * 1e12 * r["ms"] * 1e-3
        r["roofline"] = max(bytes_ / bandwidth, flops / peak) * 1e3 / r["ms"]
        if r["op"] == "conv_bwd_weight":
            r["cudnn_det_ms"] = cudnn_ms(r, deterministic=True)
            r["ratio_det"] = r["cudnn_det_ms"] / r["ms"]
    torch.use_deterministic_algorithms(False)
    print(f"{'op':<6} {'case':<24} {'lay':<5} {'dtype':<5} {'name':<56} {'ours ms':>9} {'TFLOP/s':>8} {'TB/s':>6} "
          f"{'roof':>5} {'cuDNN ms':>9} {'ratio':>7} {'det ms':>9} {'det':>7}")
    for r in rows:
        det = (f" {r['cudnn_det_ms']:>9.4f} {r['ratio_det']:>6.2f}x" if "ratio_det" in r else "")
        print(f"{r['op'][9:]:<6} {r['case'][:24]:<24} {r.get('layout', 'nhwgc'):<5} {r['dtype']:<5} "
              f"{r['name'][-56:]:<56} {r['ms']:>9.4f} {r['tflops']:>8.2f} {r['tbps']:>6.2f} {r['roofline']:>5.0%} "
              f"{r['cudnn_ms']:>9.4f} {r['ratio']:>6.2f}x{det}")
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
    few_summary(rows)
    stems_summary(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
