"""PyTorch peer of `tandem-bench kernels` section "elementwise".

Times the same memory-bound ops at the same Qwen3-8B shapes with plain PyTorch (F.rms_norm,
RoPE as written in HF transformers, F.silu(g) * u, add, .to(dtype), embedding, cat + noise)
and prints one JSON object {op name: milliseconds} on stdout. Op names match the C++ table.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402

T, H, HQ, HK, D, I, R, V, K = 16384, 4096, 32, 8, 128, 12288, 8192, 151936, 5


def rotate_half(x):  # HF transformers
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):  # HF transformers
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def main():
    if not torch.cuda.is_available():
        print_result({})
        return 0
    dev, bf = "cuda", torch.bfloat16
    out = {}
    x = torch.randn(T, H, device=dev, dtype=bf)
    w = torch.ones(H, device=dev, dtype=bf)
    out["rmsnorm_fwd"] = cuda_time_ms(lambda: F.rms_norm(x, (H,), w, 1e-6))

    xr = torch.randn(R, H, device=dev, dtype=bf, requires_grad=True)
    wr = torch.ones(H, device=dev, dtype=bf, requires_grad=True)
    yr = F.rms_norm(xr, (H,), wr, 1e-6)
    gr = torch.randn_like(yr)
    out["rmsnorm_bwd"] = cuda_time_ms(
        lambda: torch.autograd.grad(yr, (xr, wr), gr, retain_graph=True))

    q = torch.randn(T, HQ, D, device=dev, dtype=bf)
    k = torch.randn(T, HK, D, device=dev, dtype=bf)
    wd = torch.ones(D, device=dev, dtype=bf)
    out["rmsnorm_head_fwd"] = cuda_time_ms(lambda: F.rms_norm(q, (D,), wd, 1e-6))

    pos = torch.arange(T, device=dev)
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, D, 2, device=dev).float() / D))
    freqs = pos.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(bf), emb.sin().to(bf)
    out["rope_fwd_qk"] = cuda_time_ms(lambda: apply_rotary_pos_emb(q, k, cos, sin))

    gu = torch.randn(T, 2 * I, device=dev, dtype=bf)

    def swiglu():
        g, u = gu.chunk(2, dim=-1)
        return F.silu(g) * u
    out["swiglu_fwd"] = cuda_time_ms(swiglu)

    gur = torch.randn(R, 2 * I, device=dev, dtype=bf, requires_grad=True)
    g_, u_ = gur.chunk(2, dim=-1)
    ys = F.silu(g_) * u_
    gs = torch.randn_like(ys)
    out["swiglu_bwd"] = cuda_time_ms(lambda: torch.autograd.grad(ys, gur, gs, retain_graph=True))

    y = torch.randn(T, H, device=dev, dtype=bf)
    out["residual_add"] = cuda_time_ms(lambda: x + y)
    xf = x.float()
    out["cast_bf16_f32"] = cuda_time_ms(lambda: x.to(torch.float32))
    out["cast_f32_bf16"] = cuda_time_ms(lambda: xf.to(bf))

    table = torch.randn(V, H, device=dev, dtype=bf)
    ids = torch.randint(0, V, (T,), device=dev)
    out["embedding"] = cuda_time_ms(lambda: F.embedding(ids, table))

    layers = [torch.randn(T, H, device=dev, dtype=bf) for _ in range(K)]

    def concat_noise():
        c = torch.cat(layers, dim=-1)
        return c + (torch.rand_like(c) * 2 - 1) * 0.05
    out["concat_noise"] = cuda_time_ms(concat_noise)

    d2d_src = torch.empty(1 << 30, device=dev, dtype=torch.uint8)
    d2d_dst = torch.empty_like(d2d_src)
    out["copy_d2d"] = cuda_time_ms(lambda: d2d_dst.copy_(d2d_src))
    print_result(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
