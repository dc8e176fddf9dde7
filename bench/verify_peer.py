#!/usr/bin/env python3
"""PyTorch peer of `tandem-bench verify`: one speculative verify step in HF transformers.

A Qwen3-8B-shaped Qwen3ForCausalLM with random bf16 weights on the GPU (sdpa attention), the
way a PyTorch DFlash decode loop (z-lab dflash's dflash_generate) verifies a block: the prefix
is prefilled into a DynamicCache, then each timed step runs the block's tokens with
past_key_values and output_hidden_states (the captured layers are read from hidden_states),
computes the logits of every block row, and crops the cache back to the prefix.

Prints one JSON object on stdout:
  {"prefill_ms", "verify_ms", "step1_ms", "versions": {"torch", "transformers"}}
Progress goes to stderr.
"""

import argparse
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402
from target_peer import build_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", type=int, default=2048)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--layers", default="1,9,17,25,33")
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    layers = [int(x) for x in a.layers.split(",")]
    model = build_model(36)
    vocab = model.config.vocab_size
    g = torch.Generator(device="cuda").manual_seed(0)
    prefix = torch.randint(0, vocab, (1, a.prefix), device="cuda", generator=g)
    block = torch.randint(0, vocab, (1, a.block), device="cuda", generator=g)
    cache = None
    captured = []

    @torch.no_grad()
    def prefill():
        nonlocal cache
        cache = transformers.DynamicCache(config=model.config)
        model(input_ids=prefix, past_key_values=cache, use_cache=True)

    @torch.no_grad()
    def verify(n):
        pos = torch.arange(a.prefix, a.prefix + n, device="cuda").unsqueeze(0)
        out = model(input_ids=block[:, :n], position_ids=pos, past_key_values=cache,
                    use_cache=True, output_hidden_states=True)
        # hidden_states[0] is the embedding output; layer l's output is index l + 1.
        captured[:] = [out.hidden_states[l + 1] for l in layers] + [out.logits]
        cache.crop(a.prefix)

    print(f"verify peer: prefill {a.prefix}, block {a.block}", file=sys.stderr, flush=True)
    result = {"prefill_ms": cuda_time_ms(prefill, iters=3, warmup=1)}
    result["verify_ms"] = cuda_time_ms(lambda: verify(a.block), iters=a.iters)
    result["step1_ms"] = cuda_time_ms(lambda: verify(1), iters=a.iters)
    result["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    print_result(result)


if __name__ == "__main__":
    main()
