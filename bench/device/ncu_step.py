#!/usr/bin/env python3
"""Where one DFlash drafter training step's GPU time goes, kernel by kernel.

Runs `tandem-bench drafter 3` under Nsight Compute with a single metric
(gpu__time_duration, so each kernel is replayed once), finds one whole step between two
AdamW finish kernels, and prints its kernel time by kind (GEMM, attention, optimizer, CE,
elementwise) and the heaviest kernels. Kernels run one at a time at idle clocks under ncu,
so the sum is ~10% under a step timed in a run; compare kinds, not absolute totals.
The torch peer is kept out (a `python3` that exits 1 is put first on PATH).

  python3 bench/device/ncu_step.py BUNDLE OUTDIR     (BUNDLE from scripts/gpu-bundle.sh)
  python3 bench/device/ncu_step.py --csv FILE         (summarise an earlier run's CSV)
"""
import collections
import csv
import os
import re
import subprocess
import sys


def kind(name):
    if "nvjet" in name or "cublas" in name or "gemm" in name:
        return "gemm"
    if "dflash" in name:
        return "attention"
    if "adamw" in name or "grad_norm" in name:
        return "optimizer"
    if "ce_" in name:
        return "ce"
    return "elementwise"


def profile(bundle, out):
    """Runs the bench under ncu; returns the CSV's path."""
    os.makedirs(out, exist_ok=True)
    nopy = os.path.join(out, "nopy")
    os.makedirs(nopy, exist_ok=True)
    with open(os.path.join(nopy, "python3"), "w") as f:
        f.write("#!/bin/sh\nexit 1\n")
    os.chmod(os.path.join(nopy, "python3"), 0o755)
    env = dict(os.environ, PATH=nopy + ":" + os.environ["PATH"],
               LD_LIBRARY_PATH=os.path.join(bundle, "lib") + ":" +
               os.environ.get("LD_LIBRARY_PATH", ""))
    csv_path = os.path.join(out, "ncu_step.csv")
    with open(csv_path, "w") as f:
        subprocess.run(["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum",
                        "--launch-skip", "600", "--launch-count", "700", "--csv",
                        "--print-units", "base", os.path.join(bundle, "bin", "tandem-bench"),
                        "drafter", "3"], stdout=f, stderr=subprocess.DEVNULL, env=env,
                       check=False)
    return csv_path


def summarize(csv_path):
    rows = [r for r in csv.reader(open(csv_path)) if len(r) > 10]
    hdr, rows = rows[0], rows[1:]
    ki, vi, ii = hdr.index("Kernel Name"), hdr.index("Metric Value"), hdr.index("ID")
    seq = sorted((int(r[ii]), re.sub(r"\(.*", "", r[ki]), float(r[vi].replace(",", "")) / 1e3)
                 for r in rows)
    ends = [i for i, s in enumerate(seq) if "adamw_finish" in s[1]]
    if len(ends) < 2:
        sys.exit("ncu_step: fewer than two optimizer steps in the profiled window")
    step = seq[ends[0] + 1:ends[1] + 1]
    kinds, per = collections.defaultdict(float), collections.defaultdict(lambda: [0, 0.0])
    for _, name, us in step:
        kinds[kind(name)] += us
        per[name][0] += 1
        per[name][1] += us
    print(f"one step: {len(step)} kernels, {sum(kinds.values()) / 1e3:.2f} ms")
    for k, us in sorted(kinds.items(), key=lambda x: -x[1]):
        print(f"  {k:12s} {us / 1e3:8.2f} ms")
    for name, (n, us) in sorted(per.items(), key=lambda x: -x[1][1])[:30]:
        print(f"  {us / 1e3:8.2f} ms {n:4d}x  {name[:90]}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--csv":
        summarize(sys.argv[2])
    elif len(sys.argv) == 3:
        summarize(profile(sys.argv[1], sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
