"""PyTorch peer of `tandem-bench hybrid` (bench/hybrid_bench.cc).

  gdr:              flash-linear-attention's chunk_gated_delta_rule on [1, 16384, 48, 128]
                    (q, k with 16 heads, GQA inside the kernel when fla supports it, else
                    repeated to 48), cu_seqlens 4 x 4096, use_qk_l2norm_in_kernel; prints
                    {"fla_gdr_ms": ...}.
  forward --layers=N: HF transformers' Qwen3_5 text model body (Qwen3_5TextModel) with N
                    layers at the 27B shape, random bf16 weights, on a [4, 4096] batch, with
                    fla's kernels (transformers uses them when `fla` imports); prints
                    {"hf_fla_forward_ms": ...}. No LM head.

fla is pure Python + Triton: put its source folder on PYTHONPATH.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402

T, DOCS = 16384, 4


def gdr(iters):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    dev = torch.device("cuda")
    torch.manual_seed(0)
    hk, hv, d = 16, 48, 128
    q = torch.randn(1, T, hk, d, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, T, hk, d, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, T, hv, d, device=dev, dtype=torch.bfloat16)
    g = -0.05 - 1.5 * torch.rand(1, T, hv, device=dev, dtype=torch.float32)
    beta = 0.05 + 0.9 * torch.rand(1, T, hv, device=dev, dtype=torch.float32)
    cu = torch.arange(0, T + 1, T // DOCS, device=dev, dtype=torch.int32)

    def run(qq, kk):
        return chunk_gated_delta_rule(qq, kk, v, g=g, beta=beta, cu_seqlens=cu,
                                      use_qk_l2norm_in_kernel=True)
    try:
        run(q, k)  # GQA in the kernel (recent fla)
        qq, kk, note = q, k, "gqa"
    except Exception as e:  # older fla: value heads == key heads
        qq, kk = q.repeat_interleave(hv // hk, dim=2), k.repeat_interleave(hv // hk, dim=2)
        note = f"repeated q/k ({type(e).__name__})"
    ms = cuda_time_ms(lambda: run(qq, kk), iters=iters, warmup=3)
    print(f"fla chunk_gated_delta_rule: {ms:.3f} ms ({note})")
    print_result({"fla_gdr_ms": ms, "fla_gdr_note": note})


def forward(layers, iters):
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    cfg = Qwen3_5TextConfig(
        vocab_size=248320, hidden_size=5120, intermediate_size=17408, num_hidden_layers=layers,
        num_attention_heads=24, num_key_value_heads=4, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4, full_attention_interval=4,
        rms_norm_eps=1e-6, max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    # Built in bf16 directly: 62 layers at this shape are 104 GB in fp32.
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = m.Qwen3_5TextModel(cfg).eval()
    torch.set_default_dtype(torch.float32)
    fast = getattr(m, "is_fast_path_available", None)
    layer0 = model.layers[0].linear_attn
    print(f"HF Qwen3_5TextModel, {layers} layers; chunk kernel: "
          f"{getattr(layer0, 'chunk_gated_delta_rule', None)}; fast path: {fast}")
    ids = torch.randint(0, cfg.vocab_size, (DOCS, T // DOCS), device="cuda")

    def run():
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).last_hidden_state
    ms = cuda_time_ms(run, iters=iters, warmup=2)
    print(f"HF + fla forward: {ms:.3f} ms, {T / ms * 1e3:.0f} tok/s")
    print_result({"hf_fla_forward_ms": ms})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["gdr", "forward"])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()
    if a.mode == "gdr":
        gdr(a.iters * 2)
    else:
        forward(a.layers, a.iters)


if __name__ == "__main__":
    main()
