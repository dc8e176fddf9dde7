#!/usr/bin/env python3
"""Golden tensors for tandem's DFlash drafter (models/dflash/dflash_golden_test.cc).

A tiny DFlash drafter written here in plain PyTorch with the math of docs/architecture.md ("The
DFlash drafter"): context = hidden_norm(fc(concat of k target layers)); every layer projects the
context through its own k_proj/v_proj (+k_norm, RoPE at the context positions) and puts it
before the block's keys/values; queries only from the block; blocks of 16 (slot 0 = anchor
token, slots 1..15 = mask token, positions anchor+j); context keys strictly before the
anchor, same document; own block bidirectional in full layers, causal in sliding layers; in
sliding layers a window per query position as servers apply it (SGLang: causal with
window_left = sliding_window - 1; SpecForge's dflash_mask.py trains the same): slot j at
position p sees keys, context and block alike, at positions >= p - (WINDOW - 1). loss = CE of slots 1..15 weighted exp(-(j-1)/7), masked
by loss mask and document end, normalised by the weight sum. Noise = 0.

--is-causal VALUE... makes one file per value, the mask as z-lab's loader reads a config's
`is_causal`: "absent" (the default, no key: the per-layer rule above) writes
dflash_tiny_golden.safetensors; "true" / "false" put the key in the config, where it applies
to every layer (block causal, or bidirectional), the window still from layer_types, and write
dflash_tiny_is_causal_{true,false}_golden.safetensors. The window bounds keys on both sides
of a query, as servers apply it; "false" uses a window of 16 (the block size), so the side
after the query never cuts a block key. Both variants in one command:
  python3 tests/golden/make_dflash_golden.py --is-causal false true

Math in float64 (weights are bf16-representable so tandem starts from the same numbers).
Writes tests/golden/dflash_tiny_golden.safetensors (< 1 MB) with
  __metadata__ = {"format": "tandem-golden", "version": "2", "config": <config.json text>,
                  "adamw": <json>}
  context.{i} BF16 [T, H]; embedding, lm_head BF16 [V, H]; plan.* I32/F32 tables;
  param.<hf key> BF16; grad.<hf key> F32; loss F32 [1]; trajectory F32 [10] (loss before
  each of 10 AdamW steps on the same batch, grad clip 1.0, constant lr).
"""

import argparse
import copy
import json
import math
import os

import torch
from safetensors.torch import save_file

torch.manual_seed(0)
DT = torch.float64
V, H, HQ, HK, D, I, L, BS, WINDOW, MASK = 256, 64, 4, 2, 16, 128, 2, 16, 8, 255
LAYER_TYPES = ["sliding_attention", "full_attention"]
TARGET_LAYERS = [1, 5]
THETA, EPS = 10000.0, 1e-6
DOCS = [40, 28, 20]
ANCHORS = [5, 22, 33, 47, 60, 72, 79]
NB = 8  # one padding block
ADAMW = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
         "grad_clip": 1.0, "steps": 10}

CONFIG = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "vocab_size": V,
    "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": HQ,
    "num_key_value_heads": HK, "head_dim": D, "intermediate_size": I,
    "max_position_embeddings": 4096, "rms_norm_eps": EPS, "rope_theta": THETA,
    "use_sliding_window": True, "sliding_window": WINDOW, "layer_types": LAYER_TYPES,
    "hidden_act": "silu", "tie_word_embeddings": False, "block_size": BS,
    "num_target_layers": 8,
    "dflash_config": {"mask_token_id": MASK, "target_layer_ids": TARGET_LAYERS},
}


def bf16(t):
    return t.to(torch.bfloat16).to(DT)


def param_shapes():
    shapes = {}
    for i in range(L):
        p = f"layers.{i}."
        shapes[p + "self_attn.q_proj.weight"] = (HQ * D, H)
        shapes[p + "self_attn.k_proj.weight"] = (HK * D, H)
        shapes[p + "self_attn.v_proj.weight"] = (HK * D, H)
        shapes[p + "self_attn.o_proj.weight"] = (H, HQ * D)
        shapes[p + "mlp.gate_proj.weight"] = (I, H)
        shapes[p + "mlp.up_proj.weight"] = (I, H)
        shapes[p + "mlp.down_proj.weight"] = (H, I)
        shapes[p + "input_layernorm.weight"] = (H,)
        shapes[p + "post_attention_layernorm.weight"] = (H,)
        shapes[p + "self_attn.q_norm.weight"] = (D,)
        shapes[p + "self_attn.k_norm.weight"] = (D,)
    shapes["fc.weight"] = (H, len(TARGET_LAYERS) * H)
    shapes["hidden_norm.weight"] = (H,)
    shapes["norm.weight"] = (H,)
    return shapes


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rope(x, pos):  # x [N, heads, D], HF rotate_half layout
    inv = THETA ** (-torch.arange(0, D, 2, dtype=DT) / D)
    a = pos.to(DT)[:, None] * inv[None, :]
    cos = torch.cat([a.cos(), a.cos()], -1)[:, None, :]
    sin = torch.cat([a.sin(), a.sin()], -1)[:, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def build_batch():
    g = torch.Generator().manual_seed(1)
    ids, pos, doc, mask, cu = [], [], [], [], [0]
    for di, n in enumerate(DOCS):
        ids += torch.randint(0, V - 1, (n,), generator=g).tolist()
        pos += list(range(n))
        doc += [di] * n
        mask += [0, 0, 0] + [1] * (n - 3)
        cu.append(cu[-1] + n)
    T = len(ids)
    plan = {"anchors": [0] * NB, "doc_start": [0] * NB, "block_ids": [MASK] * (NB * BS),
            "block_pos": [r % BS for r in range(NB * BS)], "targets": [-1] * (NB * BS),
            "weights": [0.0] * (NB * BS), "prev_ids": [-1] * (NB * BS)}
    for b, a in enumerate(ANCHORS):
        assert mask[a] and mask[a + 1] and doc[a] == doc[a + 1]
        start, end = cu[doc[a]], cu[doc[a] + 1]
        plan["anchors"][b], plan["doc_start"][b] = a, start
        plan["block_ids"][b * BS] = ids[a]
        for j in range(BS):
            plan["block_pos"][b * BS + j] = pos[a] + j
            if j >= 1 and a + j - 1 < end:  # the true token of the slot before (DFlash2's selector)
                plan["prev_ids"][b * BS + j] = ids[a + j - 1]
            if j >= 1 and a + j < end and mask[a + j]:
                plan["targets"][b * BS + j] = ids[a + j]
                plan["weights"][b * BS + j] = math.exp(-(j - 1) / 7)
    plan["ctx_pos"] = pos
    return T, plan


def visibility(plan, T):
    """Per layer type, which keys each block row sees: bool [R, T + R] (context, then block).

    A layer is causal inside the block by its type, unless the config's is_causal says so
    for every layer; a sliding layer's window bounds |query - key| < sliding_window."""
    R = NB * BS
    vis = {}
    for lt in set(CONFIG["layer_types"]):
        sliding = lt == "sliding_attention"
        causal = CONFIG.get("is_causal", sliding)
        window = CONFIG["sliding_window"]
        m = torch.zeros(R, T + R, dtype=torch.bool)
        for b in range(NB):
            a, s = plan["anchors"][b], plan["doc_start"][b]
            for j in range(BS):  # query at position a + j; key positions: context t, block a + i
                lo = max(s, a + j - (window - 1)) if sliding else s
                m[b * BS + j, lo:a] = True
                for i in range(BS):
                    m[b * BS + j, T + b * BS + i] = ((not causal or i <= j) and
                                                     (not sliding or abs(j - i) <= window - 1))
        vis[lt] = m
    return vis


def context(P, ctx_layers):
    return rms(torch.cat(ctx_layers, -1) @ P["fc.weight"].T, P["hidden_norm.weight"])


def attention(w, xq, ctx, plan, vis):
    """The attention branch of one layer: o_proj(attention) for block rows xq [R, H]; the
    queries and the block's keys/values come from xq, the context's from ctx."""
    T, R = ctx.shape[0], xq.shape[0]
    ctx_pos = torch.tensor(plan["ctx_pos"])
    blk_pos = torch.tensor(plan["block_pos"])
    q = rope(rms((xq @ w("self_attn.q_proj.weight").T).view(R, HQ, D), w("self_attn.q_norm.weight")), blk_pos)
    k = rope(rms((xq @ w("self_attn.k_proj.weight").T).view(R, HK, D), w("self_attn.k_norm.weight")), blk_pos)
    v = (xq @ w("self_attn.v_proj.weight").T).view(R, HK, D)
    kc = rope(rms((ctx @ w("self_attn.k_proj.weight").T).view(T, HK, D), w("self_attn.k_norm.weight")), ctx_pos)
    vc = (ctx @ w("self_attn.v_proj.weight").T).view(T, HK, D)
    keys = torch.cat([kc, k], 0).repeat_interleave(HQ // HK, 1)   # [T+R, HQ, D]
    vals = torch.cat([vc, v], 0).repeat_interleave(HQ // HK, 1)
    s = torch.einsum("rhd,khd->hrk", q, keys) / math.sqrt(D)
    s = s.masked_fill(~vis[None], float("-inf"))
    o = torch.einsum("hrk,khd->rhd", torch.softmax(s, -1), vals).reshape(R, HQ * D)
    return o @ w("self_attn.o_proj.weight").T


def mlp(w, x):
    act = torch.nn.functional.silu(x @ w("mlp.gate_proj.weight").T) * (x @ w("mlp.up_proj.weight").T)
    return act @ w("mlp.down_proj.weight").T


def weighted_ce(logits, plan):
    wts = torch.tensor(plan["weights"], dtype=DT)
    tgt = torch.tensor(plan["targets"])
    ce = torch.nn.functional.cross_entropy(logits, tgt.clamp(min=0), reduction="none")
    return (ce * wts).sum() / wts.sum()


def forward(P, ctx_layers, emb, lm_head, plan):
    T = ctx_layers[0].shape[0]
    ctx = context(P, ctx_layers)
    x = emb[torch.tensor(plan["block_ids"])]
    vis = visibility(plan, T)
    for i in range(L):
        p = f"layers.{i}."
        w = lambda n: P[p + n]
        h = x + attention(w, rms(x, w("input_layernorm.weight")), ctx, plan, vis[LAYER_TYPES[i]])
        x = h + mlp(w, rms(h, w("post_attention_layernorm.weight")))
    return weighted_ce(rms(x, P["norm.weight"]) @ lm_head.T, plan)


def make(is_causal):
    """One golden file for an is_causal value: "absent", "true" or "false"."""
    global CONFIG
    base = CONFIG
    CONFIG = copy.deepcopy(base)
    file_name = "dflash_tiny_golden.safetensors"
    if is_causal != "absent":
        CONFIG["is_causal"] = is_causal == "true"
        file_name = f"dflash_tiny_is_causal_{is_causal}_golden.safetensors"
        if is_causal == "false":
            CONFIG["sliding_window"] = BS
    try:
        write(file_name)
    finally:
        CONFIG = base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--is-causal", nargs="+", choices=["absent", "true", "false"],
                    default=["absent"], help="one golden file per value (default: absent)")
    for value in ap.parse_args().is_causal:
        torch.manual_seed(0)
        make(value)


def random_inputs(T, g):
    emb = bf16(torch.rand(V, H, generator=g, dtype=DT) * 2 - 1)
    lm_head = bf16((torch.rand(V, H, generator=g, dtype=DT) * 2 - 1) * 0.3)
    ctx_layers = [bf16(torch.rand(T, H, generator=g, dtype=DT) * 2 - 1) for _ in TARGET_LAYERS]
    return emb, lm_head, ctx_layers


def random_params(shapes, g):
    P = {}
    for name, shape in shapes.items():
        r = torch.rand(*shape, generator=g, dtype=DT) * 2 - 1
        P[name] = bf16(1.0 + 0.2 * r if len(shape) == 1 else 0.3 * r).requires_grad_(True)
    return P


def adamw_trajectory(P, loss_fn):
    """Loss before each of ADAMW["steps"] AdamW steps on the same batch: fp32 master (here
    float64), forward on the bf16-rounded copy like tandem, clip by the global norm, constant
    lr."""
    master = {n: t.detach().clone() for n, t in P.items()}
    m = {n: torch.zeros_like(t) for n, t in master.items()}
    v = {n: torch.zeros_like(t) for n, t in master.items()}
    traj = []
    for step in range(ADAMW["steps"]):
        Q = {n: bf16(t).requires_grad_(True) for n, t in master.items()}
        l = loss_fn(Q)
        l.backward()
        traj.append(l.item())
        norm = math.sqrt(sum(float(q.grad.pow(2).sum()) for q in Q.values()))
        clip = min(1.0, ADAMW["grad_clip"] / (norm + 1e-6))
        t = step + 1
        for n in master:
            gr = Q[n].grad * clip
            m[n] = ADAMW["beta1"] * m[n] + (1 - ADAMW["beta1"]) * gr
            v[n] = ADAMW["beta2"] * v[n] + (1 - ADAMW["beta2"]) * gr * gr
            mh = m[n] / (1 - ADAMW["beta1"] ** t)
            vh = v[n] / (1 - ADAMW["beta2"] ** t)
            master[n] = master[n] - ADAMW["lr"] * mh / (vh.sqrt() + ADAMW["eps"])
    return traj


def golden_tensors(P, loss_fn, emb, lm_head, ctx_layers, plan, plan_keys):
    """The golden file's tensors: inputs, plan, params, loss, grads and the trajectory."""
    out = {"embedding": emb.to(torch.bfloat16), "lm_head": lm_head.to(torch.bfloat16)}
    for i, c in enumerate(ctx_layers):
        out[f"context.{i}"] = c.to(torch.bfloat16)
    for key in plan_keys:
        out["plan." + key] = torch.tensor(plan[key], dtype=torch.int32)
    out["plan.weights"] = torch.tensor(plan["weights"], dtype=torch.float32)
    for name, t in P.items():
        out["param." + name] = t.detach().to(torch.bfloat16)
    loss = loss_fn(P)
    loss.backward()
    out["loss"] = loss.detach().float().reshape(1)
    for name, t in P.items():
        out["grad." + name] = t.grad.float()
    out["trajectory"] = torch.tensor(adamw_trajectory(P, loss_fn), dtype=torch.float32)
    return out


def save(out, file_name, meta):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), file_name)
    save_file({k: t.contiguous() for k, t in out.items()}, path, metadata=meta)
    traj = out["trajectory"].tolist()
    print(f"wrote {path} ({os.path.getsize(path)} bytes), loss {out['loss'].item():.6f}, "
          f"trajectory {[round(x, 4) for x in traj]}")


PLAN_KEYS = ("anchors", "doc_start", "block_ids", "block_pos", "targets", "ctx_pos")


def write(file_name):
    T, plan = build_batch()
    g = torch.Generator().manual_seed(2)
    emb, lm_head, ctx_layers = random_inputs(T, g)
    P = random_params(param_shapes(), g)
    out = golden_tensors(P, lambda Q: forward(Q, ctx_layers, emb, lm_head, plan), emb, lm_head,
                         ctx_layers, plan, PLAN_KEYS)
    meta = {"format": "tandem-golden", "version": "2", "config": json.dumps(CONFIG),
            "adamw": json.dumps(ADAMW)}
    save(out, file_name, meta)


if __name__ == "__main__":
    main()
