"""PyTorch peer of `tandem-bench hybrid` (bench/hybrid_bench.cc).

  gdr:              flash-linear-attention's chunk_gated_delta_rule on [1, 16384, 48, 128]
                    (q, k with 16 heads, GQA inside the kernel when fla supports it, else
                    repeated to 48), cu_seqlens 4 x 4096, use_qk_l2norm_in_kernel; prints
                    {"fla_gdr_ms": ...}.
  forward --layers=N: HF transformers' Qwen3_5 text model body (Qwen3_5TextModel) with N
                    layers at the 27B shape, random bf16 weights, on a [4, 4096] batch, with
                    fla's kernels (transformers uses them when `fla` imports); prints
                    {"hf_fla_forward_ms": ...}. No LM head.
  forward-moe --layers=N: the same for the Qwen3.6-35B-A3B MoE hybrid
                    (Qwen3_5MoeTextModel, the config of examples/qwen3.6-35b-a3b-1gpu.toml:
                    hidden 2048, 256 experts of width 512, top-8 + a shared expert of 512,
                    16/2 attention heads of 256, 16/32 linear heads of 128), random bf16
                    weights. transformers' experts implementations (eager and each one in
                    ALL_EXPERTS_FUNCTIONS: grouped_mm, batched_mm, ...) are timed on layer 0's
                    MoE block at the batch's routing and the fastest runs the forward; prints
                    {"hf_fla_forward_ms", "experts_implementation", "experts_ms", "fla_calls"}.
                    fla's chunked gated delta rule is counted: fla_calls is its forward
                    passes per model forward, which must equal the Gated DeltaNet layers.
                    No LM head.

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


FLA_CALLS = [0]


def count_fla_calls():
    """Counts fla's chunked gated-delta-rule forward passes (chunk_gated_delta_rule_fwd, which
    fla's autograd function looks up at each call) into FLA_CALLS. Wrapping the public
    chunk_gated_delta_rule instead breaks it: transformers' hub wrapper passes it only the
    keyword arguments its signature names."""
    import fla.ops.gated_delta_rule.chunk as chunk
    original = chunk.chunk_gated_delta_rule_fwd

    def counted(*args, **kwargs):
        FLA_CALLS[0] += 1
        return original(*args, **kwargs)
    chunk.chunk_gated_delta_rule_fwd = counted


def set_experts_implementation(model, name):
    """Points every experts module's config at `name` (the modules read
    config._experts_implementation at each call)."""
    configs = {id(mod.config): mod.config for mod in model.modules()
               if hasattr(mod, "gate_up_proj") and hasattr(mod, "config")}
    configs[id(model.config)] = model.config
    for c in configs.values():
        c._experts_implementation = name


def forward_moe(layers, iters):
    count_fla_calls()
    from transformers import Qwen3_5MoeTextConfig
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as m
    cfg = Qwen3_5MoeTextConfig(
        vocab_size=248320, hidden_size=2048, num_hidden_layers=layers, num_attention_heads=16,
        num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32,
        linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
        full_attention_interval=4, rms_norm_eps=1e-6, max_position_embeddings=262144,
        initializer_range=0.02, num_experts=256, num_experts_per_tok=8,
        moe_intermediate_size=512, shared_expert_intermediate_size=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    # Built in bf16 directly (~70 GB at 40 layers).
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = m.Qwen3_5MoeTextModel(cfg).eval()
    torch.set_default_dtype(torch.float32)
    # Random routers and experts whatever post_init did (a zero router would send every
    # token to experts 0..7).
    with torch.no_grad():
        for layer in model.layers:
            layer.mlp.gate.weight.normal_(0, 0.02)
            layer.mlp.experts.gate_up_proj.normal_(0, 0.02)
            layer.mlp.experts.down_proj.normal_(0, 0.02)
    gb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    default_impl = getattr(model.config, "_experts_implementation", None)
    # The experts implementations on layer 0's MoE block at a [16384, 2048] batch's routing.
    block = model.layers[0].mlp
    x = torch.randn(T, cfg.hidden_size, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        routed = block.gate(x)  # (router logits, top-k weights, top-k expert ids)
        w, idx = routed[-2], routed[-1]
    times = {}
    free = torch.cuda.mem_get_info()[0]
    for name in ["eager"] + list(ALL_EXPERTS_FUNCTIONS.keys()):
        if name == "batched_mm":
            # Gathers each token copy's expert weights: T k (3 I H) bf16 elements.
            need = T * cfg.num_experts_per_tok * 3 * cfg.moe_intermediate_size * cfg.hidden_size * 2
            if need > free // 2:
                times[name] = f"skipped: needs {need / 2**30:.0f} GiB"
                continue
        set_experts_implementation(model, name)
        try:
            with torch.no_grad():
                times[name] = round(cuda_time_ms(lambda: block.experts(x, idx, w), iters=3,
                                                 warmup=1), 3)
        except Exception as e:  # an implementation whose package or kernel is missing
            times[name] = f"failed: {type(e).__name__}: {str(e)[:80]}"
        torch.cuda.empty_cache()
    timed = {k: v for k, v in times.items() if isinstance(v, float)}
    if not timed:
        raise RuntimeError(f"no experts implementation ran: {times}")
    best = min(timed, key=timed.get)
    set_experts_implementation(model, best)
    del x, w, idx
    print(f"HF Qwen3_5MoeTextModel, {layers} layers, {gb:.1f} GiB; experts implementations "
          f"(ms, layer 0): {times}; default {default_impl}; using {best}")
    ids = torch.randint(0, cfg.vocab_size, (DOCS, T // DOCS), device="cuda")

    def run():
        with torch.no_grad():
            return model(input_ids=ids, use_cache=False).last_hidden_state
    FLA_CALLS[0] = 0
    run()
    fla_calls = FLA_CALLS[0]
    ms = cuda_time_ms(run, iters=iters, warmup=1)
    print(f"HF + fla forward: {ms:.3f} ms, {T / ms * 1e3:.0f} tok/s; fla calls per forward "
          f"{fla_calls}")
    print_result({"hf_fla_forward_ms": ms, "experts_implementation": best, "experts_ms": times,
                  "experts_default": str(default_impl), "fla_calls": fla_calls})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["gdr", "forward", "forward-moe"])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args()
    if a.mode == "gdr":
        gdr(a.iters * 2)
    elif a.mode == "forward-moe":
        forward_moe(a.layers, a.iters)
    else:
        forward(a.layers, a.iters)


if __name__ == "__main__":
    main()
