#!/usr/bin/env python3
"""Golden tensors for tandem's Qwen3 target forward, from Hugging Face transformers.

Builds a tiny random Qwen3 (vocab 512, hidden 64, 4 layers, 4 query / 2 KV heads of 16,
intermediate 128, seeded), saves it with save_pretrained into qwen3_tiny/ (config.json +
model.safetensors, bf16), and runs a packed batch of 3 documents of odd lengths, each as its
own sequence with positions from 0 (so documents never attend to each other). Writes
qwen3_tiny_golden.safetensors (see golden_common.py for the layout) holding:

  input_ids, position_ids, cu_seqlens        the packed batch
  hidden.{0..3}   F32 [T, 64]   decoder layer outputs: float64 math (HF eager keeps softmax
                                 and RoPE tables in f32) on the saved bf16 weights, stored f32
  final_norm      F32 [T, 64]   after the final RMSNorm
  logits          F32 [T, 512]
  bf16_hf.hidden.{i}, bf16_hf.final_norm, bf16_hf.logits  BF16: the same forward run by
                                 transformers in bfloat16 (eager), to size bf16 tolerances

Run (torch + transformers + safetensors installed; CPU is enough):
  python3 tests/golden/make_qwen3_golden.py            # writes into tests/golden/
"""

import argparse
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import (check_against_hf_hidden_states, pack_documents, qwen3_config,  # noqa: E402
                           run_documents, save_golden)

DOC_LENGTHS = [37, 64, 23]  # odd sizes on purpose: no tile multiple hides a bug


def build_model(seed):
    torch.manual_seed(seed)
    config = qwen3_config(
        transformers,
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
        initializer_range=0.08, use_sliding_window=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    config._attn_implementation = "eager"
    model = transformers.Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        # HF initialises every RMSNorm weight to 1; random scales make a wrongly applied
        # (or skipped) norm weight visible in the goldens.
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
        # The checkpoint is bf16: round now so the reference uses exactly the saved weights.
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=here)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    model = build_model(args.seed)
    n_layers = model.config.num_hidden_layers
    layer_ids = list(range(n_layers))

    model_dir = os.path.join(args.out_dir, "qwen3_tiny")
    os.makedirs(model_dir, exist_ok=True)
    bf16_model = build_model(args.seed).to(torch.bfloat16)
    bf16_model.config._attn_implementation = "eager"
    bf16_model.save_pretrained(model_dir)

    gen = torch.Generator().manual_seed(args.seed + 1)
    docs = [torch.randint(3, model.config.vocab_size, (n,), generator=gen) for n in DOC_LENGTHS]
    input_ids, position_ids, cu_seqlens = pack_documents(docs)

    # Reference: float64 math on the bf16-rounded weights.
    ref_model = model.to(torch.float64)
    check_against_hf_hidden_states(ref_model, docs[0], layer_ids, atol=1e-12)
    ref = run_documents(ref_model, docs, layer_ids)
    bf = run_documents(bf16_model, docs, layer_ids)

    # The saved checkpoint must reproduce the reference when transformers loads it back.
    reloaded = transformers.Qwen3ForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager").to(torch.float64).eval()
    again = run_documents(reloaded, docs, layer_ids)
    diff = (again["logits"] - ref["logits"]).abs().max().item()
    assert diff < 1e-9, f"reloaded checkpoint differs from the reference by {diff}"

    tensors = {"input_ids": input_ids, "position_ids": position_ids, "cu_seqlens": cu_seqlens}
    for k, v in ref.items():
        tensors[k] = v.to(torch.float32)
    for k, v in bf.items():
        tensors["bf16_hf." + k] = v.to(torch.bfloat16)
    bf_err = (bf["logits"].double() - ref["logits"]).abs().max().item()
    golden_path = os.path.join(args.out_dir, "qwen3_tiny_golden.safetensors")
    save_golden(golden_path, tensors, {
        "generator": "tests/golden/make_qwen3_golden.py",
        "model_dir": "qwen3_tiny",
        "seed": str(args.seed),
        "doc_lengths": DOC_LENGTHS,
        "capture_layers": layer_ids,
        "layer_semantics": "hidden.i = output of decoder layer i, before the final norm",
        # HF eager computes softmax and the RoPE tables in f32 even for f64 inputs.
        "reference_precision": "float64 math (f32 softmax and RoPE tables) on bf16 weights, "
                               "stored f32",
        "bf16_hf_max_abs_logit_err": f"{bf_err:.6g}",
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    })
    # Sanity: what we wrote reads back.
    back = load_file(golden_path)
    assert back["logits"].shape == (sum(DOC_LENGTHS), model.config.vocab_size)

    total = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir))
    total += os.path.getsize(golden_path)
    print(f"wrote {model_dir} and {golden_path}: {total / 1e6:.2f} MB in all; "
          f"bf16 HF max |logit err| = {bf_err:.4g}")
    assert total < 2e6, "golden files must stay under 2 MB"


if __name__ == "__main__":
    main()
