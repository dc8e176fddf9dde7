#!/usr/bin/env python3
"""Per-kernel GPU time of one profiled forward, from `ncu --csv --metrics gpu__time_duration.sum`.

  ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
      tandem-bench target --precision=fp8 --no-peer --iters=1 --profile > ncu.csv
  python3 bench/fp8_probe/ncu_summary.py ncu.csv

Groups kernels by (shortened) name, prints total ms, calls and share, and the split between
GEMMs (cuBLASLt kernels) and everything else, which is what FP8 does not speed up.
"""

import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = re.sub(r"\(.*", "", name)  # drop the argument list
    while re.search(r"<[^<>]*>", name):  # template arguments and ncu's <unnamed> namespaces
        name = re.sub(r"<[^<>]*>", "", name)
    return name.split("::")[-1].split()[-1][:60]


def is_gemm(name):
    return bool(re.search(r"gemm|sm90_xmma|nvjet|cutlass|cublas", name, re.I))


def main():
    rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
    head = rows[0]
    k_name, k_metric, k_value = (head.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value"))
    total = defaultdict(float)
    calls = defaultdict(int)
    for r in rows[1:]:
        if r[k_metric] != "gpu__time_duration.sum":
            continue
        ns = float(r[k_value].replace(",", ""))
        total[r[k_name]] += ns
        calls[r[k_name]] += 1
    grouped = defaultdict(lambda: [0.0, 0, False])
    for n, ns in total.items():
        g = grouped[short(n)]
        g[0] += ns
        g[1] += calls[n]
        g[2] = g[2] or is_gemm(n)
    all_ns = sum(v[0] for v in grouped.values())
    gemm_ns = sum(v[0] for v in grouped.values() if v[2])
    print(f"{'kernel':<62} {'ms':>9} {'calls':>6} {'%':>6}")
    for n, (ns, c, g) in sorted(grouped.items(), key=lambda kv: -kv[1][0]):
        print(f"{n + (' [GEMM]' if g else ''):<62} {ns / 1e6:9.2f} {c:6d} {100 * ns / all_ns:6.1f}")
    print(f"total {all_ns / 1e6:.2f} ms of kernels: GEMMs {gemm_ns / 1e6:.2f} ms "
          f"({100 * gemm_ns / all_ns:.1f}%), the rest {(all_ns - gemm_ns) / 1e6:.2f} ms")


if __name__ == "__main__":
    main()
