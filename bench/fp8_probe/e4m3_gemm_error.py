#!/usr/bin/env python3
"""How far one block-scaled e4m3 GEMM is from the fp32 product, on Gaussian data.

The error floor that FP8 puts under any FP8 forward: y = x W^T with x quantized per row per 128
columns and W per 128x128 block (tandem's and DeepSeek-V3/Qwen's layout), both dequantized and
multiplied in fp32, against the fp32 product of the unquantized operands; bf16 operands for
comparison. Prints the relative L2 error and the mean / min per-row cosine.

  python3 bench/fp8_probe/e4m3_gemm_error.py      (needs torch; a GPU if present)
"""

import torch


def quant_rows(x):  # 1x128 groups along the last dim
    m, k = x.shape
    g = x.view(m, k // 128, 128)
    s = g.abs().amax(-1, keepdim=True).clamp_min(1e-30) / 448.0
    return ((g / s).to(torch.float8_e4m3fn).float() * s).view(m, k)


def quant_blocks(w):  # 128x128 blocks
    n, k = w.shape
    b = w.view(n // 128, 128, k // 128, 128)
    s = b.abs().amax(dim=(1, 3), keepdim=True).clamp_min(1e-30) / 448.0
    return ((b / s).to(torch.float8_e4m3fn).float() * s).view(n, k)


def report(name, y, ref):
    cos = torch.nn.functional.cosine_similarity(y.double(), ref.double(), dim=-1)
    rel = ((y - ref).double().norm() / ref.double().norm()).item()
    print(f"{name:<28} rel L2 {rel:.4f}  cos mean {cos.mean().item():.6f} min {cos.min().item():.6f}")


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(0)
    for m, n, k in [(2048, 4096, 4096), (2048, 4096, 12288)]:
        x = torch.randn(m, k, device=dev, generator=g)
        w = torch.randn(n, k, device=dev, generator=g) * 0.02
        ref = x @ w.T
        print(f"M={m} N={n} K={k}")
        report("  bf16 x, bf16 W", x.bfloat16().float() @ w.bfloat16().float().T, ref)
        report("  e4m3 x (1x128), bf16 W", quant_rows(x) @ w.T, ref)
        report("  bf16 x, e4m3 W (128x128)", x @ quant_blocks(w).T, ref)
        report("  e4m3 x, e4m3 W", quant_rows(x) @ quant_blocks(w).T, ref)


if __name__ == "__main__":
    main()
