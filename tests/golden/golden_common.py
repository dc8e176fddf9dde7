"""Shared functions of tandem's golden generators (run where torch + transformers exist).

Golden files are safetensors with a versioned header:
  __metadata__ = {"format": "tandem-golden", "version": "1", ...}
Packed-batch layout used by every golden file:
  input_ids    I32 [T]    documents concatenated
  position_ids I32 [T]    restart at 0 for every document
  cu_seqlens   I32 [D+1]  document starts, cu_seqlens[-1] == T
  hidden.{i}   [T, H]     output of decoder layer i (the residual stream after layer i,
                          before the final norm); HF's hidden_states[i + 1] for i < N - 1
"""

import json

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

GOLDEN_FORMAT = "tandem-golden"
GOLDEN_VERSION = "1"


def dflash_target_layer_ids(num_target_layers, num_context_layers):
    """z-lab's build_target_layer_ids: round(1 + i*(N-4)/(k-1)), k == 1 -> [N // 2]."""
    if num_context_layers == 1:
        return [num_target_layers // 2]
    span = num_target_layers - 4
    return [int(round(1 + (i * span) / (num_context_layers - 1)))
            for i in range(num_context_layers)]


def pack_documents(docs):
    """docs: list of 1-D int64 tensors -> (input_ids, position_ids, cu_seqlens) as int32."""
    input_ids = torch.cat(docs).to(torch.int32)
    position_ids = torch.cat([torch.arange(d.numel()) for d in docs]).to(torch.int32)
    cu = [0]
    for d in docs:
        cu.append(cu[-1] + d.numel())
    return input_ids, position_ids, torch.tensor(cu, dtype=torch.int32)


class LayerCapture:
    """Forward hooks on decoder layers and the final norm; records outputs per call."""

    def __init__(self, model, layer_ids):
        self.layer_ids = list(layer_ids)
        self.outputs = {}
        self.final_norm = None
        self._handles = []
        layers = model.model.layers
        for i in self.layer_ids:
            self._handles.append(layers[i].register_forward_hook(self._layer_hook(i)))
        self._handles.append(model.model.norm.register_forward_hook(self._norm_hook))

    def _layer_hook(self, i):
        def hook(_module, _inputs, output):
            out = output[0] if isinstance(output, (tuple, list)) else output
            self.outputs[i] = out.detach()
        return hook

    def _norm_hook(self, _module, _inputs, output):
        self.final_norm = output.detach()

    def remove(self):
        for h in self._handles:
            h.remove()


@torch.no_grad()
def run_documents(model, docs, layer_ids, keep_logits=True, logits_rows=None):
    """Runs each document as its own sequence (so no document can attend to another), with
    positions 0..len-1, and concatenates the results in packed order.

    Returns {"hidden.{i}": [T, H], "final_norm": [T, H], "logits": [T, V] or rows}.
    logits_rows(doc_len) -> index tensor of rows to keep per document (None: all).
    """
    device = next(model.parameters()).device
    cap = LayerCapture(model, layer_ids)
    hidden = {i: [] for i in layer_ids}
    norms, logits = [], []
    try:
        for d in docs:
            ids = d.view(1, -1).to(device)
            pos = torch.arange(d.numel(), device=device).view(1, -1)
            out = model(input_ids=ids, position_ids=pos, use_cache=False)
            for i in layer_ids:
                hidden[i].append(cap.outputs[i][0])
            norms.append(cap.final_norm[0])
            if keep_logits:
                rows = out.logits[0]
                if logits_rows is not None:
                    rows = rows[logits_rows(d.numel()).to(device)]
                logits.append(rows)
    finally:
        cap.remove()
    result = {f"hidden.{i}": torch.cat(hidden[i]) for i in layer_ids}
    result["final_norm"] = torch.cat(norms)
    if keep_logits:
        result["logits"] = torch.cat(logits)
    return result


@torch.no_grad()
def check_against_hf_hidden_states(model, doc, layer_ids, atol):
    """Cross-checks the hooks with HF's output_hidden_states for layers below the last one
    (HF's last entry has the final norm applied, which is why tandem uses hooks)."""
    device = next(model.parameters()).device
    ids = doc.view(1, -1).to(device)
    pos = torch.arange(doc.numel(), device=device).view(1, -1)
    cap = LayerCapture(model, layer_ids)
    try:
        out = model(input_ids=ids, position_ids=pos, use_cache=False, output_hidden_states=True)
    finally:
        cap.remove()
    n = len(model.model.layers)
    for i in layer_ids:
        if i < n - 1:
            diff = (out.hidden_states[i + 1] - cap.outputs[i]).abs().max().item()
            assert diff <= atol, f"layer {i}: hook vs hidden_states[{i + 1}] differ by {diff}"


def route_topk(weight, x, k):
    """The k experts a MoE router with `weight` [E, H] picks for rows x [T, H], as
    transformers routes: logits in the weight's dtype, softmax in at least fp32, top-k.
    Returns i32 [T, k] on x's device."""
    logits = F.linear(x.to(weight.dtype), weight)
    wide = torch.float64 if weight.dtype == torch.float64 else torch.float32
    probs = F.softmax(logits, dim=-1, dtype=wide)
    return torch.topk(probs, k, dim=-1).indices.to(torch.int32)


def save_golden(path, tensors, metadata):
    md = {"format": GOLDEN_FORMAT, "version": GOLDEN_VERSION}
    md.update({k: (v if isinstance(v, str) else json.dumps(v)) for k, v in metadata.items()})
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, path, metadata=md)


def qwen3_config(transformers_module, **fields):
    """A Qwen3Config for transformers 4.x (rope_theta) or 5.x (rope_parameters)."""
    theta = fields.pop("rope_theta")
    major = int(transformers_module.__version__.split(".")[0])
    if major >= 5:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": float(theta)}
    else:
        fields["rope_theta"] = float(theta)
    return transformers_module.Qwen3Config(**fields)
