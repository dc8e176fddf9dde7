"""Functions shared by the Qwen3.5/3.6 hybrid golden generators (make_qwen3_5_golden.py and
make_qwen3_5_moe_golden.py; run where torch + transformers exist): the command line, the
random values of the hybrid's own parameters, forward hooks on a text model, each decoder
layer alone, the `mtp.*` tensor real checkpoints carry, and the golden tensors of a packed
batch.
"""

import argparse
import copy
import os

import torch
from safetensors.torch import load_file, save_file


def parse_args(doc):
    """--out-dir (default: this folder) and --seed; turns TF32 off for the references."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return args


def init_hybrid_param(name, p):
    """Draws the hybrid's norm and Gated DeltaNet parameters `name` of the text model (their
    HF inits are constants that would hide a misapplied weight). Returns whether it did."""
    if name.endswith("linear_attn.norm.weight"):  # plain weight (init 1)
        p.copy_(1.0 + 0.2 * torch.randn_like(p))
    elif name.endswith("norm.weight"):  # zero-centred (1 + w), init 0
        p.copy_(0.2 * torch.randn_like(p))
    elif name.endswith("dt_bias"):
        p.copy_(1.0 + 0.5 * torch.randn_like(p))
    elif name.endswith("A_log"):  # A in [0.05, 1]: decays that neither vanish nor stay 1
        p.copy_(torch.empty_like(p).uniform_(0.05, 1.0).log())
    elif name.endswith("conv1d.weight"):
        p.copy_(0.3 * torch.randn_like(p))
    else:
        return False
    return True


class Hooks:
    """Every decoder layer's output and the final norm's output of a text model; with
    `routers`, also the input of every layer's MoE router (`mlp.gate`)."""

    def __init__(self, text_model, routers=False):
        self.out, self.norm, self.router_in = {}, None, {}
        self.handles = []
        for i, layer in enumerate(text_model.layers):
            self.handles.append(layer.register_forward_hook(self._layer(i)))
            if routers:
                self.handles.append(layer.mlp.gate.register_forward_pre_hook(self._router(i)))
        self.handles.append(text_model.norm.register_forward_hook(self._final))

    def _layer(self, i):
        def hook(_m, _i, output):
            self.out[i] = (output[0] if isinstance(output, (tuple, list)) else output).detach()
        return hook

    def _router(self, i):
        def hook(_m, args):
            x = args[0].detach()
            self.router_in[i] = x.reshape(-1, x.shape[-1])
        return hook

    def _final(self, _m, _i, output):
        self.norm = output.detach()

    def remove(self):
        for h in self.handles:
            h.remove()


@torch.no_grad()
def layer_alone(model, layer, inputs, docs, device, dtype, text_model_class, prepare=None):
    """Decoder layer `layer` of wrapper `model` on the given [T, H] inputs (rounded to bf16),
    each document alone: a one-layer `text_model_class` whose embedding rows are the inputs,
    so only the public model API is used. `prepare(config)` adjusts its config (attention /
    experts implementation). Returns its output [T, H]."""
    text_cfg = model.config.text_config
    cfg = copy.deepcopy(text_cfg)
    cfg.num_hidden_layers = 1
    cfg.vocab_size = inputs.shape[0]
    cfg.layer_types = [text_cfg.layer_types[layer]]
    if prepare is not None:
        prepare(cfg)
    one = text_model_class(cfg).eval()
    src = model.model.language_model
    state = {"embed_tokens.weight": inputs.to(torch.bfloat16).float(),
             "norm.weight": src.norm.weight.detach().float()}
    for k, v in src.layers[layer].state_dict().items():
        state["layers.0." + k] = v.detach().float()
    one.load_state_dict(state)
    one.config._attn_implementation = "eager"
    if prepare is not None:
        prepare(one.config)
    one = one.to(device=device, dtype=dtype)
    outs, start = [], 0
    for d in docs:
        ids = torch.arange(start, start + d.numel(), device=device).view(1, -1)
        pos = torch.arange(d.numel(), device=device).view(1, -1)
        hooks = Hooks(one)
        try:
            one(input_ids=ids, position_ids=pos, use_cache=False)
        finally:
            hooks.remove()
        outs.append(hooks.out[0][0].float().cpu())
        start += d.numel()
    return torch.cat(outs)


def add_mtp_tensor(model_dir, hidden):
    """Appends an `mtp.*` tensor to the saved checkpoint (real checkpoints carry an MTP head;
    loaders must skip it). Returns the checkpoint's tensor names."""
    path = os.path.join(model_dir, "model.safetensors")
    tensors = load_file(path)
    assert not any(k.startswith("mtp.") for k in tensors)
    tensors["mtp.fc.weight"] = torch.zeros(hidden, 2 * hidden, dtype=torch.bfloat16)
    save_file(tensors, path, metadata={"format": "pt"})
    return sorted(tensors)


def golden_tensors(packed, ref, bf):
    """The golden file's tensors: the packed batch (input_ids, position_ids, cu_seqlens), the
    reference's outputs `ref` (f32) and HF bf16's `bf` as `bf16_hf.*`; and HF bf16's max |err|
    per tensor."""
    tensors = dict(zip(("input_ids", "position_ids", "cu_seqlens"), packed))
    errs = {}
    for k, v in ref.items():
        tensors[k] = v.to(torch.float32)
        tensors["bf16_hf." + k] = bf[k].to(torch.bfloat16)
        errs[k] = (bf[k].float() - v).abs().max().item()
    return tensors, errs


def add_layers_alone(tensors, model, ref, docs, device, num_layers, text_model_class,
                     prepare=None):
    """Adds `alone.hidden.{i}` (layer i alone in fp32 on the CPU, on bf16(ref hidden.{i-1}))
    and `bf16_hf.alone.hidden.{i}` (the same in HF bf16 on `device`) for i in 1..N-1.
    Returns HF bf16's max |err| per layer."""
    errs = {}
    for i in range(1, num_layers):
        inp = ref[f"hidden.{i - 1}"]
        a_ref = layer_alone(model, i, inp, docs, "cpu", torch.float32, text_model_class, prepare)
        a_bf = layer_alone(model, i, inp, docs, device, torch.bfloat16, text_model_class, prepare)
        tensors[f"alone.hidden.{i}"] = a_ref
        tensors[f"bf16_hf.alone.hidden.{i}"] = a_bf.to(torch.bfloat16)
        errs[i] = (a_bf - a_ref).abs().max().item()
    return errs
