#!/usr/bin/env python3
"""A Qwen3-8B-shaped model with random weights, and HF hidden states to check tandem at size.

Writes into OUT_DIR (not committed; about 16 GB of bf16 weights plus ~130 MB of goldens):
  config.json, model-0000i-of-0000n.safetensors, model.safetensors.index.json
      save_pretrained of a random Qwen3 with Qwen3-8B's shape (36 layers, hidden 4096,
      32/8 heads of 128, intermediate 12288, vocab 151936), bf16, sharded (exercises the
      index path of tandem's reader)
  golden_hidden.safetensors (layout in golden_common.py), for 2 documents x 512 tokens:
      input_ids, position_ids, cu_seqlens
      hidden.{1,9,17,25,33}  F32 [1024, 4096]  fp32 forward (TF32 off) on the bf16 weights
      bf16_hf.hidden.{i}     BF16 [1024, 4096] the bf16 transformers forward (eager)
      logits_tail            F32 [16, 151936]  fp32 logits of the last 8 tokens of each doc
      bf16_hf.logits_tail    BF16 [16, 151936]

Run on a GPU host with torch + transformers (needs ~60 GB of GPU memory, ~20 GB of disk):
  python3 tests/golden/make_qwen3_8b_shaped.py --out-dir /tmp/qwen3_8b_shaped
"""

import argparse
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import (check_against_hf_hidden_states, dflash_target_layer_ids,  # noqa: E402
                           pack_documents, qwen3_config, run_documents, save_golden)

TAIL = 8


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=2)
    ap.add_argument("--doc-len", type=int, default=512)
    ap.add_argument("--max-shard-size", default="5GB")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    config = qwen3_config(
        transformers,
        vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
        use_sliding_window=False, bos_token_id=151643, eos_token_id=151645)
    config._attn_implementation = "eager"
    layer_ids = dflash_target_layer_ids(config.num_hidden_layers, 5)
    assert layer_ids == [1, 9, 17, 25, 33], layer_ids

    t0 = time.time()
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(args.device):
        model = transformers.Qwen3ForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p, dtype=torch.float32))
    print(f"built the model in {time.time() - t0:.0f}s", flush=True)

    t0 = time.time()
    model.save_pretrained(args.out_dir, max_shard_size=args.max_shard_size)
    print(f"saved in {time.time() - t0:.0f}s", flush=True)

    gen = torch.Generator().manual_seed(args.seed + 1)
    docs = [torch.randint(0, config.vocab_size, (args.doc_len,), generator=gen)
            for _ in range(args.docs)]
    input_ids, position_ids, cu_seqlens = pack_documents(docs)
    tail = lambda n: torch.arange(n - TAIL, n)  # noqa: E731

    bf = run_documents(model, docs, layer_ids, logits_rows=tail)
    model = model.float()  # same (bf16-valued) weights, fp32 math
    check_against_hf_hidden_states(model, docs[0][:64], layer_ids, atol=0.0)
    ref = run_documents(model, docs, layer_ids, logits_rows=tail)

    tensors = {"input_ids": input_ids, "position_ids": position_ids, "cu_seqlens": cu_seqlens}
    for i in layer_ids:
        tensors[f"hidden.{i}"] = ref[f"hidden.{i}"].float()
        tensors[f"bf16_hf.hidden.{i}"] = bf[f"hidden.{i}"].to(torch.bfloat16)
    tensors["logits_tail"] = ref["logits"].float()
    tensors["bf16_hf.logits_tail"] = bf["logits"].to(torch.bfloat16)
    errs = {i: (bf[f"hidden.{i}"].float() - ref[f"hidden.{i}"]).abs().max().item()
            for i in layer_ids}
    path = os.path.join(args.out_dir, "golden_hidden.safetensors")
    save_golden(path, tensors, {
        "generator": "tests/golden/make_qwen3_8b_shaped.py",
        "seed": str(args.seed),
        "doc_lengths": [args.doc_len] * args.docs,
        "capture_layers": layer_ids,
        "logits_tail_rows": f"last {TAIL} tokens of each document, in document order",
        "layer_semantics": "hidden.i = output of decoder layer i, before the final norm",
        "reference_precision": "fp32 math (TF32 off) on bf16 weights",
        "bf16_hf_max_abs_hidden_err": {str(k): f"{v:.6g}" for k, v in errs.items()},
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    })
    print(f"wrote {path}; bf16 HF max |hidden err| per layer: "
          + ", ".join(f"{k}: {v:.4g}" for k, v in errs.items()))


if __name__ == "__main__":
    main()
