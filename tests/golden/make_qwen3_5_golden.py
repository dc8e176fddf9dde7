#!/usr/bin/env python3
"""Golden tensors for tandem's Qwen3.5/3.6 hybrid target forward, from transformers.

Builds a tiny random Qwen3.5 in the vision-language wrapper layout
(`Qwen3_5ForConditionalGeneration`, `model_type` qwen3_5 with a nested `text_config`):
text vocab 512, hidden 64, 8 layers (full_attention_interval 4: layers 3 and 7 are gated
attention, the rest Gated DeltaNet), attention 4 query / 2 KV heads of 32 with
partial_rotary_factor 0.25, Gated DeltaNet 2 key / 4 value heads of 16 (value head j uses
key head j / 2), conv kernel 4, intermediate 128, plus a one-block vision tower. Saves it
with save_pretrained into qwen3_5_tiny/ (bf16) and appends an `mtp.*` tensor to the
checkpoint (real checkpoints carry one; loaders must skip it).

Runs a packed batch of documents of odd lengths (one longer than two chunks of 64, one of a
single token), each document alone with positions from 0: transformers' packed path
carries the conv and delta-rule state across documents, tandem restarts them. Writes
qwen3_5_tiny_golden.safetensors (layout in golden_common.py):

  input_ids, position_ids, cu_seqlens   the packed batch
  alone.hidden.{1..7}  F32    decoder layer i alone on bf16(hidden.{i-1}) (fp32, CPU), and
  bf16_hf.alone.hidden.{i}    the same layer in HF bf16: one layer's rounding error, free of
                               the amplification of earlier layers' errors
  hidden.{0..7}  F32 [T, 64]   decoder layer outputs of the fp32 forward (CPU, no TF32) on
                               the saved bf16 weights
  final_norm     F32 [T, 64]   after the final norm
  bf16_hf.hidden.{i}, bf16_hf.final_norm  BF16: the same documents through transformers in
                               bfloat16 on the GPU (torch fallback kernels), to size bf16
                               tolerances

Run (torch + transformers >= 5 with Qwen3_5TextConfig; a GPU is used when present):
  python3 tests/golden/make_qwen3_5_golden.py --out-dir tests/golden
"""

import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import pack_documents, save_golden  # noqa: E402
from hybrid_golden import (Hooks, add_layers_alone, add_mtp_tensor, golden_tensors,  # noqa: E402
                           init_hybrid_param, parse_args)

DOC_LENGTHS = [37, 130, 1, 23]  # odd; one spans three chunks of 64, one is a single token
NUM_LAYERS = 8


def build_config():
    text = dict(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=NUM_LAYERS,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
        max_position_embeddings=1024, rms_norm_eps=1e-6, tie_word_embeddings=False,
        attention_bias=False, initializer_range=0.05,
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 2],
                         "mrope_interleaved": True},
        full_attention_interval=4, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2,
                  out_hidden_size=64, patch_size=2, spatial_merge_size=2,
                  temporal_patch_size=2, num_position_embeddings=16)
    return transformers.Qwen3_5Config(text_config=text, vision_config=vision,
                                      tie_word_embeddings=False)


def build_model(seed):
    torch.manual_seed(seed)
    model = transformers.Qwen3_5ForConditionalGeneration(build_config()).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("model.language_model."):
                init_hybrid_param(name, p)
        for p in model.parameters():  # the checkpoint is bf16: use exactly its weights
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


@torch.no_grad()
def run_documents(text_model, docs):
    device = next(text_model.parameters()).device
    hooks = Hooks(text_model)
    hidden = {i: [] for i in range(NUM_LAYERS)}
    norms = []
    try:
        for d in docs:
            ids = d.view(1, -1).to(device)
            pos = torch.arange(d.numel(), device=device).view(1, -1)
            text_model(input_ids=ids, position_ids=pos, use_cache=False)
            for i in range(NUM_LAYERS):
                hidden[i].append(hooks.out[i][0].cpu())
            norms.append(hooks.norm[0].cpu())
    finally:
        hooks.remove()
    res = {f"hidden.{i}": torch.cat(hidden[i]) for i in range(NUM_LAYERS)}
    res["final_norm"] = torch.cat(norms)
    return res


def check_text_only_names(config, wrapper_keys):
    """Qwen3_5ForCausalLM names its weights as the wrapper's language model under model.*."""
    text_model = transformers.Qwen3_5ForCausalLM(config.text_config)
    got = set(text_model.state_dict())
    want = {k.replace("model.language_model.", "model.") for k in wrapper_keys
            if k.startswith("model.language_model.") or k == "lm_head.weight"}
    assert got == want, f"text-only names differ: {sorted(got ^ want)[:10]}"


def main():
    args = parse_args(__doc__)

    model = build_model(args.seed)
    model_dir = os.path.join(args.out_dir, "qwen3_5_tiny")
    os.makedirs(model_dir, exist_ok=True)
    bf16_model = build_model(args.seed).to(torch.bfloat16)
    bf16_model.save_pretrained(model_dir)
    keys = add_mtp_tensor(model_dir, 64)
    check_text_only_names(model.config, keys)

    gen = torch.Generator().manual_seed(args.seed + 1)
    docs = [torch.randint(3, 512, (n,), generator=gen) for n in DOC_LENGTHS]
    input_ids, position_ids, cu_seqlens = pack_documents(docs)

    for m in (model, bf16_model):
        m.config.text_config._attn_implementation = "eager"
        m.model.language_model.config._attn_implementation = "eager"
    ref = run_documents(model.model.language_model, docs)  # fp32 on the CPU
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf = run_documents(bf16_model.to(device).model.language_model, docs)

    # The saved checkpoint (with its mtp tensor) must reproduce the reference when loaded.
    reloaded = transformers.Qwen3_5ForConditionalGeneration.from_pretrained(
        model_dir, dtype=torch.float32).eval()
    reloaded.config.text_config._attn_implementation = "eager"
    again = run_documents(reloaded.model.language_model, docs)
    diff = (again["final_norm"] - ref["final_norm"]).abs().max().item()
    assert diff < 1e-5, f"reloaded checkpoint differs from the reference by {diff}"

    tensors, errs = golden_tensors((input_ids, position_ids, cu_seqlens), ref, bf)
    alone_errs = add_layers_alone(tensors, model, ref, docs, device, NUM_LAYERS,
                                  transformers.Qwen3_5TextModel)
    golden_path = os.path.join(args.out_dir, "qwen3_5_tiny_golden.safetensors")
    save_golden(golden_path, tensors, {
        "generator": "tests/golden/make_qwen3_5_golden.py",
        "model_dir": "qwen3_5_tiny",
        "seed": str(args.seed),
        "doc_lengths": DOC_LENGTHS,
        "capture_layers": list(range(NUM_LAYERS)),
        "layer_semantics": "hidden.i = output of decoder layer i, before the final norm",
        "reference_precision": "float32 on the CPU (transformers' torch fallback kernels) "
                               "on bf16 weights",
        "bf16_hf_device": device,
        "alone": "alone.hidden.i: layer i alone (fp32, CPU) on bf16(hidden.{i-1}), each "
                 "document alone; bf16_hf.alone.hidden.i the same in HF bf16",
        "bf16_hf_alone_max_abs_err": json.dumps({str(k): round(e, 6) for k, e in alone_errs.items()}),
        "bf16_hf_max_abs_err": json.dumps({k: round(e, 6) for k, e in errs.items()}),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    })
    total = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir))
    total += os.path.getsize(golden_path)
    print("bf16 HF max |err| per tensor:", json.dumps(errs))
    print("bf16 HF max |err| per layer alone:", json.dumps(alone_errs))
    print(f"wrote {model_dir} and {golden_path}: {total / 1e6:.2f} MB in all")
    assert total < 3e6, "golden files must stay small"


if __name__ == "__main__":
    main()
