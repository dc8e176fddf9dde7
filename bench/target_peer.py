#!/usr/bin/env python3
"""PyTorch peer of `tandem-bench target`: the same target forward in HF transformers.

A Qwen3-8B-shaped Qwen3 with random bf16 weights on the GPU, truncated after the last
captured layer (as tandem stops there; no LM head), run the way users run a frozen target for
DFlash / EAGLE training: a batch of `docs` equal-length documents of `doc-len` tokens with
a causal mask (equivalent to per-document attention over the packed batch for equal lengths)
and forward hooks that keep the captured layers' outputs. Modes:
  eager       transformers' default attention (sdpa), no compilation
  compile     the same under torch.compile (default mode; compile time not timed)
  eager_attn  attn_implementation="eager" (materialised softmax), no compilation

Prints one JSON object on stdout:
  {"eager": {"ms", "tok_s", "peak_bytes", "weight_bytes"}, "compile": {...}, ...,
   "versions": {"torch", "transformers"}}
Progress goes to stderr.
"""

import argparse
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def build_model(num_layers):
    fields = dict(
        vocab_size=151936, hidden_size=4096, intermediate_size=12288,
        num_hidden_layers=num_layers, num_attention_heads=32, num_key_value_heads=8,
        head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
        tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
        use_sliding_window=False)
    if int(transformers.__version__.split(".")[0]) >= 5:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6}
    else:
        fields["rope_theta"] = 1e6
    config = transformers.Qwen3Config(**fields)
    config._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.Qwen3ForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    model.requires_grad_(False)
    return model


def set_attn(model, impl):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl
        for m in model.modules():
            if hasattr(m, "config"):
                m.config._attn_implementation = impl


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--doc-len", type=int, default=4096)
    ap.add_argument("--layers", default="1,9,17,25,33")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--modes", default="eager,compile")
    args = ap.parse_args()
    layers = [int(x) for x in args.layers.split(",")]
    modes = [m for m in args.modes.split(",") if m]

    t0 = time.time()
    model = build_model(max(layers) + 1)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    log(f"peer: built {max(layers) + 1}-layer model ({weight_bytes / 2**30:.1f} GiB) "
        f"in {time.time() - t0:.0f}s")

    captured = {}
    for i in layers:
        def hook(_m, _inp, out, i=i):
            captured[i] = out[0] if isinstance(out, (tuple, list)) else out
        model.model.layers[i].register_forward_hook(hook)

    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 151936, (args.docs, args.doc_len), generator=gen).cuda()
    pos = torch.arange(args.doc_len, device="cuda").expand(args.docs, -1)
    tokens = args.docs * args.doc_len

    def forward(base):
        with torch.no_grad():
            base(input_ids=ids, position_ids=pos, use_cache=False)
        return [captured[i] for i in layers]

    result = {"versions": {"torch": torch.__version__,
                           "transformers": transformers.__version__}}
    for mode in modes:
        set_attn(model, "eager" if mode == "eager_attn" else "sdpa")
        base = model.model
        if mode == "compile":
            base = torch.compile(model.model)
            t0 = time.time()
            forward(base)
            log(f"peer: torch.compile warm-up {time.time() - t0:.0f}s")
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        ms = cuda_time_ms(lambda: forward(base), args.iters, warmup=2)
        peak = torch.cuda.max_memory_allocated()
        result[mode] = {"ms": ms, "tok_s": tokens / ms * 1e3, "peak_bytes": peak,
                        "weight_bytes": weight_bytes}
        log(f"peer: {mode}: {ms:.2f} ms, {tokens / ms * 1e3:.0f} tok/s, "
            f"peak {peak / 2**30:.2f} GiB")
        captured.clear()
        torch.cuda.empty_cache()
    print_result(result)


if __name__ == "__main__":
    main()
