"""PyTorch peer of `tandem-bench kernels` section "math": the same shapes with torch.matmul,
a chunked F.cross_entropy LM head (forward + backward to the hidden rows) and fused AdamW on
a flat 600M-parameter buffer. Prints one JSON object on stdout."""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402


def gemms(dev):
    out = {}
    bf = torch.bfloat16
    n = 8192
    a, b = torch.randn(n, n, device=dev, dtype=bf), torch.randn(n, n, device=dev, dtype=bf)
    out["ceiling 8192^3"] = 2 * n**3 / cuda_time_ms(lambda: a @ b, 10) / 1e9
    layers = [("q", 4096, 4096), ("k", 4096, 1024), ("v", 4096, 1024), ("o", 4096, 4096),
              ("gate", 4096, 12288), ("up", 4096, 12288), ("down", 12288, 4096)]
    for rows, tag, kinds in [(16384, "target", ["fwd"]), (8192, "drafter", ["fwd", "dgrad", "wgrad"])]:
        for name, k, nout in layers:
            x = torch.randn(rows, k, device=dev, dtype=bf)
            w = torch.randn(nout, k, device=dev, dtype=bf)
            dy = torch.randn(rows, nout, device=dev, dtype=bf)
            dw = torch.zeros(nout, k, device=dev, dtype=torch.float32)
            fns = {"fwd": lambda: x @ w.t(), "dgrad": lambda: dy @ w,
                   "wgrad": lambda: dw.add_((dy.t() @ x).float())}
            for kind in kinds:
                out[f"{tag} {name} {kind}"] = 2 * rows * k * nout / cuda_time_ms(fns[kind], 10) / 1e9
            del x, w, dy, dw
    return out


def lm_head_ce(dev, rows=8192, hidden=4096, vocab=151936, chunk=2048):
    torch.manual_seed(0)
    h = (torch.randn(rows, hidden, device=dev) * 0.5).bfloat16()
    w = (torch.randn(vocab, hidden, device=dev) * 0.02).bfloat16()
    tgt = torch.randint(0, vocab, (rows,), device=dev)
    wt = torch.ones(rows, device=dev)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()

    def step():
        x = h.detach().requires_grad_()
        wsum = wt.sum()
        for r0 in range(0, rows, chunk):
            logits = x[r0:r0 + chunk] @ w.t()
            ce = F.cross_entropy(logits.float(), tgt[r0:r0 + chunk], reduction="none")
            ((ce * wt[r0:r0 + chunk]).sum() / wsum).backward()
        return x.grad

    ms = cuda_time_ms(step, 5, warmup=2)
    peak = torch.cuda.max_memory_allocated() - base
    return {"ms": ms, "tflops": 4 * rows * hidden * vocab / ms / 1e9, "peak_bytes": peak,
            "chunk_rows": chunk}


def adamw(dev, n=600_000_000):
    p = torch.zeros(n, device=dev, dtype=torch.float32, requires_grad=True)
    p.grad = torch.randn(n, device=dev) * 1e-3
    opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.1, fused=True)
    ms = cuda_time_ms(opt.step, 10, warmup=2)
    return {"ms": ms, "gbps": 28 * n / ms / 1e6}  # p, g, m, v read; p, m, v written


def main():
    dev = torch.device("cuda")
    print_result({"torch": torch.__version__, "gemm_tflops": gemms(dev),
                      "lm_head_ce": lm_head_ce(dev), "adamw": adamw(dev)})


if __name__ == "__main__":
    sys.exit(main())
