"""Shared by the PyTorch peers of tandem-bench (bench/*_peer*.py): CUDA-event timing and the
one JSON line each peer prints last on stdout (the C++ side reads that line).

Import it after putting this file's folder on sys.path, so the peers run from any directory:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_common import cuda_time_ms, print_result
"""
import json

import torch


def cuda_time_ms(fn, iters=20, warmup=3):
    """Mean milliseconds per call of fn over `iters` calls after `warmup` untimed calls,
    measured with CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def print_result(result):
    """Prints `result` (a dict) as the single JSON line the benchmark parses."""
    print(json.dumps(result), flush=True)
