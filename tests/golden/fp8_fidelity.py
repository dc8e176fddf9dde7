#!/usr/bin/env python3
"""Fidelity of tandem's bf16 and fp8 targets (and transformers' bf16) against an fp32 reference.

On the Qwen3-8B-shaped random checkpoint of make_qwen3_8b_shaped.py (36 layers, bf16 weights),
for the golden batch (2 documents x 512 tokens), compares three forwards with the fp32 forward
of transformers on the same bf16 weights (TF32 off):
  tandem bf16   `tandem-bench fidelity` (Qwen3Target, precision = "bf16")
  tandem fp8    the same, precision = "fp8" (block-scaled e4m3 projections)
  HF bf16       transformers' bf16 eager forward (stored by make_qwen3_8b_shaped.py)
Per captured layer (hidden.{1,9,17,25,33}): mean and min per-token cosine similarity and the
relative L2 error ||x - ref|| / ||ref|| over the whole [T, H] matrix; for the logits of the last
8 tokens of each document the same, plus top-1 agreement with the fp32 argmax. Prints a
markdown table and writes the numbers as JSON. The bar: mean cosine >= 0.999 at every
captured layer.

  python3 tests/golden/fp8_fidelity.py --dir /tmp/q8 --bench build-cuda/bench/tandem-bench \
      [--json out.json]
(makes the checkpoint with make_qwen3_8b_shaped.py first when DIR has no golden_hidden.safetensors)
"""

import argparse
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
BAR_MEAN_COS = 0.999


def metrics(got, ref):
    got, ref = got.double(), ref.double()
    cos = torch.nn.functional.cosine_similarity(got, ref, dim=-1)
    rel = ((got - ref).norm() / ref.norm()).item()
    out = {"mean_cos": cos.mean().item(), "min_cos": cos.min().item(), "rel_l2": rel,
           "max_abs": (got - ref).abs().max().item()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="make_qwen3_8b_shaped.py output directory")
    ap.add_argument("--bench", required=True, help="tandem-bench (or tandem-bench-target)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    golden_path = os.path.join(args.dir, "golden_hidden.safetensors")
    if not os.path.exists(golden_path):
        subprocess.run([sys.executable, os.path.join(HERE, "make_qwen3_8b_shaped.py"),
                        "--out-dir", args.dir], check=True)
    tandem_path = os.path.join(args.dir, "tandem_fidelity.safetensors")
    subprocess.run([args.bench, "fidelity", f"--model={args.dir}", f"--out={tandem_path}"],
                   check=True)
    golden = load_file(golden_path)
    tandem = load_file(tandem_path)
    layers = sorted(int(k.split(".")[1]) for k in golden if k.startswith("hidden."))
    cases = [("tandem bf16", "tandem_bf16."), ("tandem fp8", "tandem_fp8."), ("HF bf16", "bf16_hf.")]
    source = {"tandem_bf16.": tandem, "tandem_fp8.": tandem, "bf16_hf.": golden}
    result = {"layers": {}, "logits_tail": {}, "bar_mean_cos": BAR_MEAN_COS}
    print("| layer | case | mean cos | min cos | rel L2 | max abs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for i in layers:
        ref = golden[f"hidden.{i}"]
        result["layers"][str(i)] = {}
        for name, prefix in cases:
            m = metrics(source[prefix][f"{prefix}hidden.{i}"], ref)
            result["layers"][str(i)][name] = m
            print(f"| {i} | {name} | {m['mean_cos']:.6f} | {m['min_cos']:.6f} | "
                  f"{m['rel_l2']:.4g} | {m['max_abs']:.4g} |")
    ref = golden["logits_tail"]
    top_ref = ref.argmax(-1)
    for name, prefix in cases:
        got = source[prefix][f"{prefix}logits_tail"]
        m = metrics(got, ref)
        m["top1_agree"] = (got.float().argmax(-1) == top_ref).float().mean().item()
        result["logits_tail"][name] = m
        print(f"| logits (last 8/doc) | {name} | {m['mean_cos']:.6f} | {m['min_cos']:.6f} | "
              f"{m['rel_l2']:.4g} | {m['max_abs']:.4g} | top-1 = fp32's: {m['top1_agree']:.3f}")
    for name, _ in cases:
        worst = min(result["layers"][str(i)][name]["mean_cos"] for i in layers)
        verdict = "met" if worst >= BAR_MEAN_COS else "MISSED"
        print(f"bar mean cos >= {BAR_MEAN_COS} at every layer, {name}: {verdict} "
              f"(worst {worst:.6f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
