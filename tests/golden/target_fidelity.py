#!/usr/bin/env python3
"""Does tandem compute what transformers computes on this checkpoint? Any target family.

Builds a golden batch from transformers for a target checkpoint (dense Qwen3 / Llama-3 or the
Qwen3.5 / Qwen3.6 hybrid, wrapper or text-only layout), runs `tandem-bench fidelity` on the
same checkpoint on the GPU (bf16 and fp8), and prints, per captured layer and for the logits of
the last 8 tokens of each document, the error of

  tandem bf16   tandem's target, precision = "bf16", the packed batch as DFlash runs it
  tandem fp8    the same with precision = "fp8" (block-scaled e4m3 projections)
  HF bf16       transformers' bf16 forward, each document alone

against transformers' fp32 forward of the same bf16 weights (TF32 off, each document alone):
relative L2 over the whole [T, H] matrix, max |error|, and mean per-token cosine. The verdict
per case is the golden tests' criterion, "as accurate as transformers' own bf16": at every
layer, max |err| <= 2x HF bf16's + 1e-3 and relative L2 <= max(1e-2, 1.5x HF bf16's).

  # a real checkpoint, its first 8 layers (the full 27B does not fit twice in fp32):
  python3 tests/golden/target_fidelity.py --model /models/Qwen3.6-27B --num-layers 8 \
      --work /tmp/fid --bench build/bench/tandem-bench
  # random weights at a real model's widths (no checkpoint needed):
  python3 tests/golden/target_fidelity.py --random qwen3.6-27b --num-layers 8 \
      --work /tmp/fid --bench build/bench/tandem-bench [--json out.json]

With --num-layers N (or --random) the script first writes the checkpoint that both sides run,
`WORK/model` (bf16, N layers). WORK also gets golden.safetensors (golden_common.py's layout
plus logits_tail and the bf16_hf.* tensors) and tandem.safetensors (the bench's output).
Needs torch, transformers and safetensors, and a CUDA GPU.
"""

import argparse
import json
import os
import subprocess
import sys

import torch
import transformers
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import pack_documents, save_golden  # noqa: E402

TAIL_ROWS = 8                     # as tandem-bench fidelity's logits tail
DOC_LENGTHS = [333, 129, 77, 9]   # odd lengths; the last is barely longer than the tail

# Widths of released targets, for --random (text configs; layers set by --num-layers).
PRESETS = {
    "qwen3.6-27b": dict(
        model_type="qwen3_5_text", vocab_size=248320, hidden_size=5120,
        intermediate_size=17408, num_attention_heads=24, num_key_value_heads=4, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=48, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_conv_kernel_dim=4, full_attention_interval=4,
        rms_norm_eps=1e-6, max_position_embeddings=262144, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                         "partial_rotary_factor": 0.25}),
    "qwen3-8b": dict(
        model_type="qwen3", vocab_size=151936, hidden_size=4096, intermediate_size=12288,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
        max_position_embeddings=40960, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
}


def text_config(config):
    return getattr(config, "text_config", None) or config


def decoder(model):
    """The decoder stack (layers, norm) of a causal LM or of a vision-language wrapper."""
    inner = model.model
    return getattr(inner, "language_model", inner)


def truncate(config, n):
    tc = text_config(config)
    if n > tc.num_hidden_layers:
        sys.exit(f"--num-layers {n}: the model has only {tc.num_hidden_layers} layers")
    tc.num_hidden_layers = n
    if getattr(tc, "layer_types", None):
        tc.layer_types = tc.layer_types[:n]
    return config


def load_model(path, dtype):
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModelForImageTextToText):
        try:
            return auto.from_pretrained(path, dtype=dtype).eval()
        except ValueError:
            continue
    sys.exit(f"{path}: transformers has no causal-LM class for this config")


def make_checkpoint(args, out_dir):
    """WORK/model: the checkpoint both sides run (bf16, --num-layers layers)."""
    os.makedirs(out_dir, exist_ok=True)
    if args.random:
        fields = dict(PRESETS[args.random])
        model_type = fields.pop("model_type")
        fields["num_hidden_layers"] = args.num_layers
        if model_type == "qwen3_5_text":
            interval = fields.pop("full_attention_interval")
            fields["layer_types"] = ["full_attention" if (i + 1) % interval == 0
                                     else "linear_attention" for i in range(args.num_layers)]
        config = transformers.AutoConfig.for_model(model_type, **fields)
        torch.manual_seed(args.seed)
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    else:
        config = truncate(transformers.AutoConfig.from_pretrained(args.model), args.num_layers)
        model = None
        for auto in (transformers.AutoModelForCausalLM,
                     transformers.AutoModelForImageTextToText):
            try:
                model = auto.from_pretrained(args.model, config=config, dtype=torch.bfloat16)
                break
            except ValueError:
                continue
        if model is None:
            sys.exit(f"{args.model}: transformers has no causal-LM class for this config")
    model.save_pretrained(out_dir)
    return out_dir


@torch.no_grad()
def run_documents(model, docs, layers):
    """Each document alone, positions from 0: {hidden.i: [T, H]} and logits_tail."""
    device = next(model.parameters()).device
    stack = decoder(model)
    outs, hooks = {}, []
    for i in layers:
        def hook(_m, _inp, output, i=i):
            outs[i] = (output[0] if isinstance(output, (tuple, list)) else output).detach()
        hooks.append(stack.layers[i].register_forward_hook(hook))
    hidden = {i: [] for i in layers}
    tails = []
    try:
        for d in docs:
            ids = d.view(1, -1).to(device)
            pos = torch.arange(d.numel(), device=device).view(1, -1)
            out = model(input_ids=ids, position_ids=pos, use_cache=False,
                        logits_to_keep=TAIL_ROWS)
            for i in layers:
                hidden[i].append(outs[i][0].float().cpu())
            tails.append(out.logits[0, -TAIL_ROWS:].float().cpu())
    finally:
        for h in hooks:
            h.remove()
    res = {f"hidden.{i}": torch.cat(hidden[i]) for i in layers}
    res["logits_tail"] = torch.cat(tails)
    return res


def metrics(got, ref):
    got, ref = got.double(), ref.double()
    cos = torch.nn.functional.cosine_similarity(got, ref, dim=-1)
    return {"rel_l2": ((got - ref).norm() / ref.norm()).item(),
            "max_abs": (got - ref).abs().max().item(),
            "mean_cos": cos.mean().item(), "min_cos": cos.min().item()}


def as_accurate(m, hf):
    """The golden tests' criterion (models/qwen3/qwen3_golden_util.h)."""
    return (m["max_abs"] <= 2 * hf["max_abs"] + 1e-3 and
            m["rel_l2"] <= max(1e-2, 1.5 * hf["rel_l2"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a target checkpoint directory (HF layout)")
    src.add_argument("--random", choices=sorted(PRESETS), help="random weights at these widths")
    ap.add_argument("--num-layers", type=int, default=None,
                    help="run only the first N layers (writes WORK/model)")
    ap.add_argument("--layers", default=None, help="layers to capture, e.g. 1,3,7 (default all)")
    ap.add_argument("--work", required=True, help="directory for the checkpoint and outputs")
    ap.add_argument("--bench", required=True, help="tandem-bench (or tandem-bench-target)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.random and not args.num_layers:
        ap.error("--random needs --num-layers")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.work, exist_ok=True)

    model_dir = args.model
    if args.random or args.num_layers:
        model_dir = make_checkpoint(args, os.path.join(args.work, "model"))
    tc = text_config(transformers.AutoConfig.from_pretrained(model_dir))
    layers = (sorted(int(x) for x in args.layers.split(",")) if args.layers
              else list(range(tc.num_hidden_layers)))
    gen = torch.Generator().manual_seed(args.seed)
    docs = [torch.randint(0, tc.vocab_size, (n,), generator=gen) for n in DOC_LENGTHS]
    input_ids, position_ids, cu_seqlens = pack_documents(docs)

    ref_model = load_model(model_dir, torch.float32).to("cuda")
    ref = run_documents(ref_model, docs, layers)
    del ref_model
    torch.cuda.empty_cache()
    hf_model = load_model(model_dir, torch.bfloat16).to("cuda")
    hf = run_documents(hf_model, docs, layers)
    del hf_model
    torch.cuda.empty_cache()

    tensors = {"input_ids": input_ids, "position_ids": position_ids, "cu_seqlens": cu_seqlens}
    for k, v in ref.items():
        tensors[k] = v
        tensors["bf16_hf." + k] = hf[k]
    golden_path = os.path.join(args.work, "golden.safetensors")
    save_golden(golden_path, tensors, {
        "generator": "tests/golden/target_fidelity.py", "model_type": tc.model_type,
        "doc_lengths": DOC_LENGTHS, "capture_layers": layers,
        "reference_precision": "float32 on the GPU, TF32 off, on the bf16 weights",
        "torch_version": torch.__version__, "transformers_version": transformers.__version__})

    tandem_path = os.path.join(args.work, "tandem.safetensors")
    subprocess.run([args.bench, "fidelity", f"--model={model_dir}", f"--golden={golden_path}",
                    f"--out={tandem_path}"], check=True)
    tandem = load_file(tandem_path)
    cases = [("tandem bf16", lambda k: tandem["tandem_bf16." + k])]
    if "tandem_fp8.logits_tail" in tandem:  # absent when the bench refused fp8 (it says why)
        cases.append(("tandem fp8", lambda k: tandem["tandem_fp8." + k]))
    cases.append(("HF bf16", lambda k: hf[k]))
    result = {"model": model_dir, "model_type": tc.model_type, "hidden_size": tc.hidden_size,
              "doc_lengths": DOC_LENGTHS, "rows": {}}
    print(f"model {model_dir} ({tc.model_type}, hidden {tc.hidden_size}, "
          f"{tc.num_hidden_layers} layers), documents {DOC_LENGTHS}")
    print("| tensor | case | rel L2 | max abs | mean cos | min cos |")
    print("| --- | --- | --- | --- | --- | --- |")
    verdict = {name: True for name, _ in cases if name != "HF bf16"}
    for key in [f"hidden.{i}" for i in layers] + ["logits_tail"]:
        row = {name: metrics(get(key), ref[key]) for name, get in cases}
        result["rows"][key] = row
        for name, m in row.items():
            print(f"| {key} | {name} | {m['rel_l2']:.4g} | {m['max_abs']:.4g} | "
                  f"{m['mean_cos']:.6f} | {m['min_cos']:.6f} |")
        if key != "logits_tail":
            for name in verdict:
                verdict[name] = verdict[name] and as_accurate(row[name], row["HF bf16"])
    for name, ok in verdict.items():
        print(f"{name}: {'as accurate as' if ok else 'NOT as accurate as'} transformers' bf16 "
              f"at every captured layer (max |err| <= 2x HF's + 1e-3, rel L2 <= "
              f"max(1e-2, 1.5x HF's))")
    result["verdict"] = verdict
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if verdict["tandem bf16"] else 1


if __name__ == "__main__":
    sys.exit(main())
