#!/usr/bin/env python3
"""Golden tensors for tandem's DFlash2 drafter (models/dflash/dflash2_golden_test.cc).

The tiny drafter of make_dflash_golden.py (same batch, plan, context and target head), made a
DFlash2 drafter as docs/dflash2.md describes it, in plain PyTorch and float64:
  - every layer wraps attention and the MLP in a grouped dynamic causal convolution
    (attention_conv, mlp_conv): u = norm(x); dyn = u . kernel_projection^T viewed
    [2 side, K tap, G group]; the branch reads Conv(u; base[0], dyn[0]); its output is
    convolved with Conv(.; base[1], dyn[1]) before the residual add. Taps reset at every block
    start (row r's position in its block is r % BS); the context is never convolved;
  - the block embeddings are scaled by input_embedding_scale; logits = cap * tanh(m * z / cap)
    with z = lm_head(norm(x)), m = output_multiplier, cap = final_logit_softcapping;
  - the candidate selector's strict top-k loss (over the whole vocabulary of 64, see V), teacher-forced (the previous slot's true token,
    plan.prev_ids), weighted by the DFlash slot weights, added with weight ALPHA.
The config has is_causal false (every layer bidirectional inside the block, as DFlash2 configs
are), with the window of make_dflash_golden.py's is_causal false variant.

Writes tests/golden/dflash2_tiny_golden.safetensors (< 1 MB) with make_dflash_golden.py's
layout plus plan.prev_ids, loss.dflash and loss.selector (F32 [1], before ALPHA), and
selector.covered (I32 [1], rows whose target is a candidate). __metadata__ also carries
"selector_loss_weight".
  python3 tests/golden/make_dflash2_golden.py
"""

import argparse
import copy
import json

import torch

import make_dflash_golden as base
from make_dflash_golden import BS, DT, H, bf16, rms

# The vocabulary is cut to 64 and every token is a candidate (top-k = vocab): the candidate
# set is then the same whatever rounding the logits see, so a bf16 run can be compared with
# this float64 one (with 256 random logits, neighbours at a top-k boundary sit 1e-4 apart
# and bf16 swaps them). The strict top-k rule itself is tested on the kernels.
V = 64
K, GROUP, RANK, TOP_K = 3, 8, 8, V
MULTIPLIER, SOFTCAP, EMBED_SCALE, ALPHA = 0.8, 6.0, 1.5, 1.0
G = H // GROUP


def config():
    c = copy.deepcopy(base.CONFIG)
    c["architectures"] = ["DFlash2DraftModel"]
    c["vocab_size"] = V
    c["dflash_config"]["mask_token_id"] = V - 1
    c["is_causal"] = False
    c["sliding_window"] = BS
    c["dflash_config"].update({
        "conv_kernel_size": K, "conv_group_size": GROUP, "selector_rank": RANK,
        "selector_top_k": TOP_K, "output_multiplier": MULTIPLIER,
        "final_logit_softcapping": SOFTCAP, "input_embedding_scale": EMBED_SCALE})
    return c


def param_shapes():
    shapes = base.param_shapes()
    for i in range(base.L):
        for conv in ("attention_conv", "mlp_conv"):
            shapes[f"layers.{i}.{conv}.base_kernel"] = (2, K, H)
            shapes[f"layers.{i}.{conv}.kernel_projection.weight"] = (2 * K * G, H)
    shapes["candidate_selector.hidden_projection.weight"] = (RANK, H)
    shapes["candidate_selector.predecessor_codebook"] = (V, RANK)
    shapes["candidate_selector.successor_codebook"] = (V, RANK)
    return shapes


def random_params(g):
    """make_dflash_golden.py's draw, then the conv's own scales: base kernels near the
    identity (tap 0 = 1) and small kernel projections, so the layers stay in range."""
    P = base.random_params(param_shapes(), g)
    for name, t in P.items():
        if name.endswith("base_kernel"):
            eye = torch.zeros(2, K, H, dtype=DT)
            eye[:, 0] = 1
            P[name] = bf16(eye + 0.3 * t.detach()).requires_grad_(True)
        elif name.endswith("kernel_projection.weight"):
            P[name] = bf16(t.detach() / 6).requires_grad_(True)
    return P


def conv(x, dyn, kernel):
    """Conv(x; kernel [K, H], dyn [R, K, G]) over the packed blocks of BS rows."""
    R = x.shape[0]
    pos = torch.arange(R) % BS
    out = torch.zeros_like(x)
    for k in range(K):
        shifted = torch.zeros_like(x)
        shifted[k:] = x[: R - k]
        shifted = shifted * (pos >= k).to(DT)[:, None]
        weight = kernel[k][None, :] + dyn[:, k].repeat_interleave(GROUP, dim=1)
        out = out + weight * shifted
    return out


def branch(w, conv_name, u, fn):
    dyn = (u @ w(conv_name + ".kernel_projection.weight").T).view(-1, 2, K, G)
    kernel = w(conv_name + ".base_kernel")
    return conv(fn(conv(u, dyn[:, 0], kernel[0])), dyn[:, 1], kernel[1])


def selector_loss(P, h, logits, plan, parts=None):
    """The strict top-k selector loss and the number of covered rows."""
    wts = torch.tensor(plan["weights"], dtype=DT)
    tgt = torch.tensor(plan["targets"])
    prev = torch.tensor(plan["prev_ids"])
    values, ids = logits.topk(TOP_K, dim=-1)
    if parts is not None and TOP_K < V:  # how far a weighted row's k-th logit is from the next
        both = logits.detach().topk(TOP_K + 1, dim=-1).values
        parts["min_gap"] = float((both[:, -2] - both[:, -1])[wts > 0].min())
    proj = h @ P["candidate_selector.hidden_projection.weight"].T          # [R, RANK]
    pred = P["candidate_selector.predecessor_codebook"][prev.clamp(min=0)]  # [R, RANK]
    succ = P["candidate_selector.successor_codebook"][ids]                 # [R, k, RANK]
    scores = values + torch.einsum("rq,rkq->rk", pred * proj, succ)
    hit = ids == tgt[:, None]
    covered = hit.any(-1) & (wts > 0)
    cw = wts * covered.to(DT)
    ce = torch.logsumexp(scores, -1) - (scores * hit.to(DT)).sum(-1)
    return (ce * cw).sum() / cw.sum(), int(covered.sum())


def forward(P, ctx_layers, emb, lm_head, plan, parts=None):
    T = ctx_layers[0].shape[0]
    ctx = base.context(P, ctx_layers)
    x = emb[torch.tensor(plan["block_ids"])] * EMBED_SCALE
    vis = base.visibility(plan, T)
    for i in range(base.L):
        p = f"layers.{i}."
        w = lambda n: P[p + n]
        attn = lambda y: base.attention(w, y, ctx, plan, vis[base.LAYER_TYPES[i]])
        x = x + branch(w, "attention_conv", rms(x, w("input_layernorm.weight")), attn)
        x = x + branch(w, "mlp_conv", rms(x, w("post_attention_layernorm.weight")),
                       lambda y: base.mlp(w, y))
    h = rms(x, P["norm.weight"])
    logits = SOFTCAP * torch.tanh(h @ lm_head.T * MULTIPLIER / SOFTCAP)
    dflash = base.weighted_ce(logits, plan)
    selector, covered = selector_loss(P, h, logits, plan, parts)
    if parts is not None:
        parts.update(dflash=dflash.item(), selector=selector.item(), covered=covered)
    return dflash + ALPHA * selector


def main():
    global TOP_K
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top-k", type=int, default=TOP_K, help="selector_top_k (default %(default)s)")
    ap.add_argument("--dry-run", action="store_true", help="print the losses, write nothing")
    args = ap.parse_args()
    TOP_K = args.top_k
    base.V, base.MASK = V, V - 1
    torch.manual_seed(0)
    base.CONFIG = config()
    T, plan = base.build_batch()
    g = torch.Generator().manual_seed(2)
    emb, lm_head, ctx_layers = base.random_inputs(T, g)
    P = random_params(g)
    parts = {}
    forward(P, ctx_layers, emb, lm_head, plan, parts)
    if args.dry_run:
        print(f"top-k {TOP_K}: {parts}")  # min_gap: a boundary rounding would move
        return
    out = base.golden_tensors(P, lambda Q: forward(Q, ctx_layers, emb, lm_head, plan), emb,
                              lm_head, ctx_layers, plan, base.PLAN_KEYS + ("prev_ids",))
    out["loss.dflash"] = torch.tensor([parts["dflash"]], dtype=torch.float32)
    out["loss.selector"] = torch.tensor([parts["selector"]], dtype=torch.float32)
    out["selector.covered"] = torch.tensor([parts["covered"]], dtype=torch.int32)
    meta = {"format": "tandem-golden", "version": "2", "config": json.dumps(base.CONFIG),
            "adamw": json.dumps(base.ADAMW), "selector_loss_weight": json.dumps(ALPHA)}
    base.save(out, "dflash2_tiny_golden.safetensors", meta)
    print(f"dflash loss {parts['dflash']:.6f}, selector loss {parts['selector']:.6f}, "
          f"{parts['covered']} covered rows")


if __name__ == "__main__":
    main()
