#!/usr/bin/env python3
"""Golden tensors for tandem's Qwen3-MoE target forward (model_type qwen3_moe), from transformers.

Builds a tiny random Qwen3-MoE (vocab 512, hidden 64, 4 layers, 4 query / 2 KV heads of 16,
8 experts of width 32, top-2 with norm_topk_prob, layer 2 dense through mlp_only_layers with
intermediate 128, seeded) with transformers' eager (reference) experts path, saves it with
save_pretrained into qwen3_moe_tiny/ (bf16; the expert layout is whatever this transformers
version writes, recorded in the metadata; tandem reads both), and runs a packed batch of 3
documents of odd lengths, each as its own sequence with positions from 0. Writes
qwen3_moe_tiny_golden.safetensors (layout in golden_common.py):

  input_ids, position_ids, cu_seqlens        the packed batch
  hidden.{0..3}   F32 [T, 64]   decoder layer outputs: float64 math on the saved bf16 weights
  final_norm      F32 [T, 64]   after the final RMSNorm
  logits          F32 [T, 512]
  bf16_hf.hidden.{i}, bf16_hf.final_norm, bf16_hf.logits  BF16: the same forward by
                                 transformers in bfloat16 (eager), to size bf16 tolerances
  router.{l}.topk          I32 [T, 2]  the experts each token picks in MoE layer l (0, 1, 3)
                                 in the float64 model: softmax in float64, top-k
  bf16_hf.router.{l}.topk  I32 [T, 2]  the same in the bf16 model (bf16 logits, fp32 softmax,
                                 as transformers routes)

Run (torch + transformers + safetensors installed; CPU is enough):
  python3 tests/golden/make_qwen3_moe_golden.py            # writes into tests/golden/
"""

import argparse
import os
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import (check_against_hf_hidden_states, pack_documents,  # noqa: E402
                           route_topk, run_documents, save_golden)

DOC_LENGTHS = [37, 64, 23]  # odd sizes on purpose
NUM_LAYERS = 4
DENSE_LAYERS = [2]
TOP_K = 2


def moe_config():
    fields = dict(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=NUM_LAYERS,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
        attention_bias=False, hidden_act="silu", initializer_range=0.08,
        use_sliding_window=False, num_experts=8, num_experts_per_tok=TOP_K,
        moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=DENSE_LAYERS, output_router_logits=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if int(transformers.__version__.split(".")[0]) >= 5:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    else:
        fields["rope_theta"] = 10000.0
    config = transformers.Qwen3MoeConfig(**fields)
    config._attn_implementation = "eager"
    # transformers 5 picks an experts kernel (grouped_mm, batched_mm, eager); the reference
    # is the per-expert eager loop, which also runs in float64.
    config._experts_implementation = "eager"
    return config


def build_model(seed):
    torch.manual_seed(seed)
    model = transformers.Qwen3MoeForCausalLM(moe_config()).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # random scales make a misapplied norm visible
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif p.dim() >= 2 and float(p.abs().max()) == 0.0:
                # Experts' fused parameters may start empty or zero: draw them like Linear.
                p.copy_(0.08 * torch.randn_like(p))
        for p in model.parameters():  # the checkpoint is bf16: the reference uses those values
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


class RouterCapture:
    """Records the input of every MoE layer's router (mlp.gate) and routes it as
    transformers does: logits in the model's dtype, softmax in at least fp32, top-k."""

    def __init__(self, model):
        self.inputs = {}
        self.handles = []
        for i, layer in enumerate(model.model.layers):
            gate = getattr(layer.mlp, "gate", None)
            if gate is not None:
                self.handles.append(gate.register_forward_pre_hook(self.hook(i)))

    def hook(self, i):
        def fn(module, args):
            self.inputs.setdefault(i, []).append(args[0].detach().reshape(-1, args[0].shape[-1]))
        return fn

    def topk(self, model):
        out = {}
        for i, xs in self.inputs.items():
            out[i] = route_topk(model.model.layers[i].mlp.gate.weight, torch.cat(xs), TOP_K)
        return out

    def remove(self):
        for h in self.handles:
            h.remove()


def run_with_routing(model, docs, layer_ids):
    cap = RouterCapture(model)
    try:
        result = run_documents(model, docs, layer_ids)
    finally:
        cap.remove()
    return result, cap.topk(model)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=here)
    ap.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args()

    model = build_model(args.seed)
    layer_ids = list(range(NUM_LAYERS))
    model_dir = os.path.join(args.out_dir, "qwen3_moe_tiny")
    os.makedirs(model_dir, exist_ok=True)
    bf16_model = build_model(args.seed).to(torch.bfloat16)
    bf16_model.save_pretrained(model_dir)

    gen = torch.Generator().manual_seed(args.seed + 1)
    docs = [torch.randint(3, model.config.vocab_size, (n,), generator=gen) for n in DOC_LENGTHS]
    input_ids, position_ids, cu_seqlens = pack_documents(docs)

    ref_model = model.to(torch.float64)
    check_against_hf_hidden_states(ref_model, docs[0], layer_ids, atol=1e-12)
    ref, ref_route = run_with_routing(ref_model, docs, layer_ids)
    bf, bf_route = run_with_routing(bf16_model, docs, layer_ids)
    assert sorted(ref_route) == [i for i in layer_ids if i not in DENSE_LAYERS], ref_route.keys()

    reloaded = transformers.Qwen3MoeForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager").eval()
    reloaded.config._experts_implementation = "eager"
    reloaded = reloaded.to(torch.float64)
    again = run_documents(reloaded, docs, layer_ids)
    diff = (again["logits"] - ref["logits"]).abs().max().item()
    assert diff < 1e-9, f"reloaded checkpoint differs from the reference by {diff}"

    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        names = list(f.keys())
    layout = "fused" if any(n.endswith("mlp.experts.gate_up_proj") for n in names) else "per-expert"

    tensors = {"input_ids": input_ids, "position_ids": position_ids, "cu_seqlens": cu_seqlens}
    for k, v in ref.items():
        tensors[k] = v.to(torch.float32)
    for k, v in bf.items():
        tensors["bf16_hf." + k] = v.to(torch.bfloat16)
    differ = {}
    for i in ref_route:
        tensors[f"router.{i}.topk"] = ref_route[i]
        tensors[f"bf16_hf.router.{i}.topk"] = bf_route[i]
        a = ref_route[i].sort(dim=-1).values
        b = bf_route[i].sort(dim=-1).values
        differ[i] = float((a != b).any(dim=-1).float().mean())
    bf_err = (bf["logits"].double() - ref["logits"]).abs().max().item()
    golden_path = os.path.join(args.out_dir, "qwen3_moe_tiny_golden.safetensors")
    save_golden(golden_path, tensors, {
        "generator": "tests/golden/make_qwen3_moe_golden.py",
        "model_dir": "qwen3_moe_tiny",
        "seed": str(args.seed),
        "doc_lengths": DOC_LENGTHS,
        "capture_layers": layer_ids,
        "moe_layers": sorted(ref_route),
        "expert_layout": layout,
        "layer_semantics": "hidden.i = output of decoder layer i, before the final norm",
        "reference_precision": "float64 math on bf16 weights, stored f32",
        "bf16_hf_max_abs_logit_err": f"{bf_err:.6g}",
        "bf16_hf_router_differ_share": {str(k): round(v, 4) for k, v in differ.items()},
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    })
    back = load_file(golden_path)
    assert back["logits"].shape == (sum(DOC_LENGTHS), model.config.vocab_size)

    total = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir))
    total += os.path.getsize(golden_path)
    print(f"wrote {model_dir} ({layout} experts) and {golden_path}: {total / 1e6:.2f} MB in "
          f"all; bf16 HF max |logit err| = {bf_err:.4g}; HF bf16 router sets differing from "
          f"the float64 reference per MoE layer: {differ}")
    assert total < 2e6, "golden files must stay under 2 MB"


if __name__ == "__main__":
    main()
