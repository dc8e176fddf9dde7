#!/usr/bin/env python3
"""Golden tensors for tandem's Qwen3.5/3.6 mixture-of-experts hybrid forward, from transformers.

Builds a tiny random Qwen3.5-MoE in the vision-language wrapper layout
(`Qwen3_5MoeForConditionalGeneration`, `model_type` qwen3_5_moe with a nested `text_config`
of model_type qwen3_5_moe_text): text vocab 512, hidden 64, 4 layers (layer 3 gated
attention, the rest Gated DeltaNet), attention 4 query / 2 KV heads of 32 with
partial_rotary_factor 0.25, Gated DeltaNet 2 key / 4 value heads of 16, conv kernel 4, and in
every layer a MoE block: 8 experts of width 32, top-2 (weights renormalised, as transformers'
router always does), plus a shared expert of width 48 behind a sigmoid gate; a one-block
vision tower. Saves it with save_pretrained into qwen3_5_moe_tiny/ (bf16; the expert layout
is whatever this transformers version writes, recorded in the metadata; tandem reads both)
and appends an `mtp.*` tensor to the checkpoint (real checkpoints carry one).

Runs a packed batch of documents of odd lengths, each document alone with positions from 0.
The experts run transformers' eager (reference) path. Writes
qwen3_5_moe_tiny_golden.safetensors (layout in golden_common.py):

  input_ids, position_ids, cu_seqlens   the packed batch
  hidden.{0..3}  F32 [T, 64]   decoder layer outputs of the fp32 forward (CPU, no TF32) on
                               the saved bf16 weights
  final_norm     F32 [T, 64]   after the final norm
  bf16_hf.hidden.{i}, bf16_hf.final_norm  BF16: the same documents through transformers in
                               bfloat16 (GPU when present, torch fallback kernels)
  alone.hidden.{1..3}  F32     decoder layer i alone on bf16(hidden.{i-1}) (fp32, CPU), and
  bf16_hf.alone.hidden.{i}    the same layer in HF bf16
  router.{l}.topk          I32 [T, 2]  the experts each token picks in layer l in the fp32
                               model (fp32 logits and softmax, top-k)
  bf16_hf.router.{l}.topk  I32 [T, 2]  the same in the bf16 model (bf16 logits, fp32 softmax,
                               as transformers routes)

Run (torch + transformers >= 5 with Qwen3_5MoeConfig; a GPU is used when present):
  python3 tests/golden/make_qwen3_5_moe_golden.py --out-dir tests/golden
"""

import copy
import json
import os
import sys

import torch
import transformers
from safetensors import safe_open

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import pack_documents, route_topk, save_golden  # noqa: E402
from hybrid_golden import (Hooks, add_layers_alone, add_mtp_tensor, golden_tensors,  # noqa: E402
                           init_hybrid_param, parse_args)

DOC_LENGTHS = [37, 130, 1, 23]  # odd; one spans three chunks of 64, one is a single token
NUM_LAYERS = 4
NUM_EXPERTS = 8
TOP_K = 2
HIDDEN = 64


def use_eager(config):
    """Eager attention and the per-expert eager experts loop (the reference path; it also
    runs in fp32 on the CPU), on the wrapper config and its text config."""
    for c in (config, getattr(config, "text_config", None)):
        if c is not None:
            c._attn_implementation = "eager"
            c._experts_implementation = "eager"


def build_config():
    text = dict(
        vocab_size=512, hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS,
        layer_types=["linear_attention"] * (NUM_LAYERS - 1) + ["full_attention"],
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
        max_position_embeddings=1024, rms_norm_eps=1e-6, tie_word_embeddings=False,
        attention_bias=False, initializer_range=0.05,
        linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 2],
                         "mrope_interleaved": True},
        num_experts=NUM_EXPERTS, num_experts_per_tok=TOP_K, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, output_router_logits=False,
        router_aux_loss_coef=0.001, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2,
                  out_hidden_size=HIDDEN, patch_size=2, spatial_merge_size=2,
                  temporal_patch_size=2, num_position_embeddings=16)
    config = transformers.Qwen3_5MoeConfig(text_config=text, vision_config=vision,
                                           tie_word_embeddings=False)
    use_eager(config)
    return config


def build_model(seed):
    torch.manual_seed(seed)
    model = transformers.Qwen3_5MoeForConditionalGeneration(build_config()).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("model.language_model.") or init_hybrid_param(name, p):
                continue
            if name.endswith("mlp.gate.weight"):  # the router: clear winners, few near-ties
                p.copy_(0.3 * torch.randn_like(p))
            elif name.endswith("shared_expert_gate.weight"):  # gates away from 0.5
                p.copy_(0.3 * torch.randn_like(p))
            elif name.endswith("experts.gate_up_proj"):  # [E, 2I, H]: like Linear(H, 2I)
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
            elif name.endswith("experts.down_proj"):  # [E, H, I]: like Linear(I, H)
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
        for p in model.parameters():  # the checkpoint is bf16: use exactly its weights
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


@torch.no_grad()
def run_documents(text_model, docs):
    device = next(text_model.parameters()).device
    n = len(text_model.layers)
    hidden = {i: [] for i in range(n)}
    topk = {i: [] for i in range(n)}
    norms = []
    hooks = Hooks(text_model, routers=True)
    try:
        for d in docs:
            ids = d.view(1, -1).to(device)
            pos = torch.arange(d.numel(), device=device).view(1, -1)
            text_model(input_ids=ids, position_ids=pos, use_cache=False)
            for i in range(n):
                hidden[i].append(hooks.out[i][0].cpu())
                w = text_model.layers[i].mlp.gate.weight
                topk[i].append(route_topk(w, hooks.router_in[i], TOP_K).cpu())
            norms.append(hooks.norm[0].cpu())
    finally:
        hooks.remove()
    res = {f"hidden.{i}": torch.cat(hidden[i]) for i in range(n)}
    res["final_norm"] = torch.cat(norms)
    return res, {i: torch.cat(topk[i]) for i in range(n)}


def check_text_only_names(model):
    """Qwen3_5MoeForCausalLM names its parameters as the wrapper's language model under
    model.* (compared as modules name them: the saved expert layout may differ)."""
    text_config = copy.deepcopy(model.config.text_config)
    use_eager(text_config)
    got = set(transformers.Qwen3_5MoeForCausalLM(text_config).state_dict())
    want = {k.replace("model.language_model.", "model.") for k in model.state_dict()
            if k.startswith("model.language_model.") or k == "lm_head.weight"}
    assert got == want, f"text-only names differ: {sorted(got ^ want)[:10]}"


def set_eager_on(model):
    use_eager(model.config)
    use_eager(model.model.language_model.config)


def main():
    args = parse_args(__doc__)

    model = build_model(args.seed)
    model_dir = os.path.join(args.out_dir, "qwen3_5_moe_tiny")
    os.makedirs(model_dir, exist_ok=True)
    bf16_model = build_model(args.seed).to(torch.bfloat16)
    bf16_model.save_pretrained(model_dir)
    keys = add_mtp_tensor(model_dir, HIDDEN)
    check_text_only_names(model)
    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        names = list(f.keys())
    layout = "fused" if any(n.endswith("mlp.experts.gate_up_proj") for n in names) else "per-expert"
    assert any(n.endswith("mlp.shared_expert_gate.weight") for n in keys), keys[:20]

    gen = torch.Generator().manual_seed(args.seed + 1)
    docs = [torch.randint(3, 512, (n,), generator=gen) for n in DOC_LENGTHS]
    input_ids, position_ids, cu_seqlens = pack_documents(docs)

    for m in (model, bf16_model):
        set_eager_on(m)
    ref, ref_route = run_documents(model.model.language_model, docs)  # fp32 on the CPU
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf, bf_route = run_documents(bf16_model.to(device).model.language_model, docs)

    # The saved checkpoint (with its mtp tensor) must reproduce the reference when loaded.
    reloaded = transformers.Qwen3_5MoeForConditionalGeneration.from_pretrained(
        model_dir, dtype=torch.float32).eval()
    set_eager_on(reloaded)
    again, _ = run_documents(reloaded.model.language_model, docs)
    diff = (again["final_norm"] - ref["final_norm"]).abs().max().item()
    assert diff < 1e-5, f"reloaded checkpoint differs from the reference by {diff}"

    tensors, errs = golden_tensors((input_ids, position_ids, cu_seqlens), ref, bf)
    differ = {}
    for i in range(NUM_LAYERS):
        assert ref_route[i].shape == (sum(DOC_LENGTHS), TOP_K), ref_route[i].shape
        tensors[f"router.{i}.topk"] = ref_route[i]
        tensors[f"bf16_hf.router.{i}.topk"] = bf_route[i]
        a = ref_route[i].sort(dim=-1).values
        b = bf_route[i].sort(dim=-1).values
        differ[i] = float((a != b).any(dim=-1).float().mean())
    alone_errs = add_layers_alone(tensors, model, ref, docs, device, NUM_LAYERS,
                                  transformers.Qwen3_5MoeTextModel, use_eager)
    golden_path = os.path.join(args.out_dir, "qwen3_5_moe_tiny_golden.safetensors")
    save_golden(golden_path, tensors, {
        "generator": "tests/golden/make_qwen3_5_moe_golden.py",
        "model_dir": "qwen3_5_moe_tiny",
        "seed": str(args.seed),
        "doc_lengths": DOC_LENGTHS,
        "capture_layers": list(range(NUM_LAYERS)),
        "moe_layers": list(range(NUM_LAYERS)),
        "expert_layout": layout,
        "layer_semantics": "hidden.i = output of decoder layer i, before the final norm",
        "reference_precision": "float32 on the CPU (transformers' torch fallback kernels, "
                               "eager experts) on bf16 weights",
        "bf16_hf_device": device,
        "alone": "alone.hidden.i: layer i alone (fp32, CPU) on bf16(hidden.{i-1}), each "
                 "document alone; bf16_hf.alone.hidden.i the same in HF bf16",
        "bf16_hf_alone_max_abs_err": json.dumps({str(k): round(e, 6) for k, e in alone_errs.items()}),
        "bf16_hf_max_abs_err": json.dumps({k: round(e, 6) for k, e in errs.items()}),
        "bf16_hf_router_differ_share": json.dumps({str(k): round(v, 4) for k, v in differ.items()}),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    })
    total = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir))
    total += os.path.getsize(golden_path)
    print("bf16 HF max |err| per tensor:", json.dumps(errs))
    print("bf16 HF max |err| per layer alone:", json.dumps(alone_errs))
    print("HF bf16 router sets differing from the fp32 reference per layer:", json.dumps(differ))
    print(f"wrote {model_dir} ({layout} experts) and {golden_path}: {total / 1e6:.2f} MB in all")
    assert total < 3e6, "golden files must stay small"


if __name__ == "__main__":
    main()
