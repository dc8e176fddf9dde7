#!/usr/bin/env python3
"""PyTorch peer of `tandem-bench drafter`: the same DFlash drafter training step in PyTorch.

Qwen3-8B drafter shape (hidden 4096, 5 layers: 4 sliding (window 2048) + 1 full, 32/8 heads
of 128, intermediate 12288), frozen random LM head/embedding of 151936 x 4096 (--shape 27b:
hidden 5120, intermediate 17408, vocab 248320, rope theta 1e7), 8192 context
tokens in 4 documents, 512 anchors, blocks of 16. Attention is flex_attention with a block
mask from create_block_mask; the whole step is torch.compile'd. Precision recipe as tandem:
bf16 compute weights, fp32 master weights and AdamW states (fused AdamW), grad clip 1.0.
Prints a JSON line {"step_ms", "act_gib", "state_gib"} last. With --profile it first prints
one step's GPU kernel time by kind (torch.profiler): GEMMs, attention, optimizer, the rest.

--type dflash2: the DFlash2 drafter of the same shape (docs/dflash2.md): every layer's
attention and MLP wrapped in a grouped dynamic causal convolution (2 taps, groups of 16
channels, block-local), every layer bidirectional inside the block (is_causal false), and the
candidate selector's strict top-16 loss (rank 256, teacher-forced previous token) added with
weight 1. The public DFlash2 configs set no output multiplier or soft cap, so neither is applied.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402

T, DOCS, NB, BS, H, L, HQ, HK, D, I, V = 8192, 4, 512, 16, 4096, 5, 32, 8, 128, 12288, 151936
WINDOW, K_CTX, EPS, THETA = 2048, 5, 1e-6, 1e6
CONV_K, CONV_GROUP, RANK, TOP_K = 2, 16, 256, 16  # --type dflash2
MASK_ID, ID_RANGE = 151669, 151000
# --shape 27b: the Qwen3.6-27B drafter (tandem-bench drafter --shape=27b); heads, layers,
# window and the batch stay.
SHAPES = {"8b": dict(H=4096, I=12288, V=151936, THETA=1e6, MASK_ID=151669, ID_RANGE=151000),
          "27b": dict(H=5120, I=17408, V=248320, THETA=1e7, MASK_ID=248070, ID_RANGE=247000)}
SLIDING = [True, True, True, True, False]
R = NB * BS
dev = "cuda"


def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * w


def rope(x, cos, sin):  # x [N, heads, D]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rope_tables(pos):
    inv = THETA ** (-torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D)
    a = pos.float()[:, None] * inv[None]
    emb = torch.cat([a, a], -1)
    return emb.cos().to(torch.bfloat16)[:, None], emb.sin().to(torch.bfloat16)[:, None]


def make_params():
    p = {}
    for i in range(L):
        for name, shape in [("q", (HQ * D, H)), ("k", (HK * D, H)), ("v", (HK * D, H)),
                            ("o", (H, HQ * D)), ("gate", (I, H)), ("up", (I, H)), ("down", (H, I))]:
            p[f"{i}.{name}"] = torch.randn(shape, device=dev) * 0.02
        for name, n in [("in_n", H), ("post_n", H), ("q_n", D), ("k_n", D)]:
            p[f"{i}.{name}"] = torch.ones(n, device=dev)
    p["fc"] = torch.randn(H, K_CTX * H, device=dev) * 0.02
    p["hidden_norm"] = torch.ones(H, device=dev)
    p["norm"] = torch.ones(H, device=dev)
    return p


def make_dflash2_params():
    """The DFlash2 tensors beside make_params(): per layer two convolutions (base kernel at
    the identity plus noise, a small kernel projection, so the conv is not a no-op), and the
    selector's projection and codebooks."""
    p = {}
    for i in range(L):
        for conv in ("aconv", "mconv"):
            base = torch.randn(2, CONV_K, H, device=dev) * 0.02
            base[:, 0] += 1
            p[f"{i}.{conv}.base"] = base
            p[f"{i}.{conv}.proj"] = torch.randn(2 * CONV_K * (H // CONV_GROUP), H, device=dev) * 0.02
    p["sel.hidden"] = torch.randn(RANK, H, device=dev) * 0.02
    p["sel.pred"] = torch.randn(V, RANK, device=dev) * 0.02
    p["sel.succ"] = torch.randn(V, RANK, device=dev) * 0.02
    return p


def dynamic_conv(x, dyn, kernel):
    """Conv(x; kernel [K, H], dyn [R, K, G]) per block of BS rows, taps reset at block start."""
    xb = x.view(NB, BS, H)
    out = torch.zeros_like(xb)
    for k in range(CONV_K):
        shifted = xb if k == 0 else F.pad(xb[:, : BS - k], (0, 0, k, 0))
        weight = kernel[k] + dyn[:, k].repeat_interleave(CONV_GROUP, -1)
        out = out + weight.view(NB, BS, H) * shifted
    return out.view(R, H)


def conv_branch(w, name, u, fn):
    dyn = (u @ w[name + ".proj"].T).view(R, 2, CONV_K, H // CONV_GROUP)
    return dynamic_conv(fn(dynamic_conv(u, dyn[:, 0], w[name + ".base"][0])), dyn[:, 1],
                        w[name + ".base"][1])


def selector_loss(w, hidden, logits, targets, weights, prev):
    values, ids = logits.topk(TOP_K, dim=-1)
    proj = (hidden @ w["sel.hidden"].T).float()
    pair = w["sel.pred"][prev.clamp(min=0)].float() * proj
    scores = values + torch.einsum("rq,rkq->rk", pair, w["sel.succ"][ids].float())
    hit = ids == targets[:, None]
    cw = weights * hit.any(-1).float()
    ce = torch.logsumexp(scores, -1) - (scores * hit.float()).sum(-1)
    return (ce * cw).sum() / cw.sum().clamp(min=1e-30)


def drafter_loss(w, ctx_layers, emb, lm_head, block_ids, blk_cos, blk_sin, ctx_cos, ctx_sin,
                 targets, weights, masks, prev=None):
    ctx = rms(torch.cat(ctx_layers, -1) @ w["fc"].T, w["hidden_norm"])
    x = emb[block_ids]
    dflash2 = "sel.hidden" in w
    for i in range(L):
        def attn(xn):
            q = rope(rms((xn @ w[f"{i}.q"].T).view(R, HQ, D), w[f"{i}.q_n"]), blk_cos, blk_sin)
            k = rope(rms((xn @ w[f"{i}.k"].T).view(R, HK, D), w[f"{i}.k_n"]), blk_cos, blk_sin)
            v = (xn @ w[f"{i}.v"].T).view(R, HK, D)
            kc = rope(rms((ctx @ w[f"{i}.k"].T).view(T, HK, D), w[f"{i}.k_n"]), ctx_cos, ctx_sin)
            vc = (ctx @ w[f"{i}.v"].T).view(T, HK, D)
            keys = torch.cat([kc, k], 0).transpose(0, 1)[None]
            vals = torch.cat([vc, v], 0).transpose(0, 1)[None]
            o = flex_attention(q.transpose(0, 1)[None], keys, vals, block_mask=masks[SLIDING[i]],
                               enable_gqa=True)
            return o[0].transpose(0, 1).reshape(R, HQ * D) @ w[f"{i}.o"].T

        def mlp(hn):
            return (F.silu(hn @ w[f"{i}.gate"].T) * (hn @ w[f"{i}.up"].T)) @ w[f"{i}.down"].T

        if dflash2:
            x = x + conv_branch(w, f"{i}.aconv", rms(x, w[f"{i}.in_n"]), attn)
            x = x + conv_branch(w, f"{i}.mconv", rms(x, w[f"{i}.post_n"]), mlp)
        else:
            h = x + attn(rms(x, w[f"{i}.in_n"]))
            x = h + mlp(rms(h, w[f"{i}.post_n"]))
    hidden = rms(x, w["norm"])
    logits = (hidden @ lm_head.T).float()
    ce = F.cross_entropy(logits, targets.clamp(min=0), reduction="none")
    loss = (ce * weights).sum() / weights.sum()
    if dflash2:
        loss = loss + selector_loss(w, hidden, logits, targets, weights, prev)
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    ap.add_argument("--type", choices=["dflash", "dflash2"], default="dflash")
    args = ap.parse_args()
    globals().update(SHAPES[args.shape])
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(0)
    emb = (torch.rand(V, H, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
    lm_head = ((torch.rand(V, H, device=dev, generator=g) * 2 - 1) * 0.02).to(torch.bfloat16)
    ctx_layers = [(torch.rand(T, H, device=dev, generator=g) * 2 - 1).to(torch.bfloat16)
                  for _ in range(K_CTX)]
    ids = torch.randint(0, ID_RANGE, (T,), device=dev)
    doc_len = T // DOCS
    pos = torch.arange(T, device=dev) % doc_len
    anchors = torch.sort(torch.randperm(T, device=dev)[:NB]).values
    anchors = torch.where(pos[anchors] >= doc_len - 1, anchors - 1, anchors)
    doc_start = anchors // doc_len * doc_len
    j = torch.arange(BS, device=dev)
    block_ids = torch.where(j[None] == 0, ids[anchors][:, None], MASK_ID).reshape(-1)
    block_pos = (pos[anchors][:, None] + j[None]).reshape(-1)
    tgt_idx = anchors[:, None] + j[None]
    valid = (j[None] >= 1) & (tgt_idx < doc_start[:, None] + doc_len)
    targets = torch.where(valid, ids[tgt_idx.clamp(max=T - 1)], -1).reshape(-1)
    weights = torch.where(valid, torch.exp(-(j[None] - 1).float() / 7), 0.0).reshape(-1)
    prev = torch.where(valid, ids[(tgt_idx - 1).clamp(max=T - 1)], -1).reshape(-1)
    causal_block = args.type == "dflash"  # DFlash2: every layer bidirectional in the block
    blk_cos, blk_sin = rope_tables(block_pos)
    ctx_cos, ctx_sin = rope_tables(pos)

    def mask_for(sliding):
        def mod(b, h, q_idx, kv_idx):
            blk = q_idx // BS
            a = anchors[blk]
            lo = doc_start[blk]
            if sliding:  # the serving rule: slot i sees positions >= anchor + i - (W - 1)
                lo = torch.maximum(lo, a + q_idx % BS - (WINDOW - 1))
            in_ctx = (kv_idx < T) & (kv_idx >= lo) & (kv_idx < a)
            own = (kv_idx >= T) & ((kv_idx - T) // BS == blk)
            if sliding and causal_block:
                own = own & (kv_idx - T <= q_idx)
            return in_ctx | own
        return create_block_mask(mod, None, None, R, T + R, device=dev)

    masks = {True: mask_for(True), False: mask_for(False)}
    master = make_params()
    if args.type == "dflash2":
        master.update(make_dflash2_params())
    w = {n: t.to(torch.bfloat16).requires_grad_(True) for n, t in master.items()}
    for t in master.values():
        t.grad = torch.zeros_like(t)
    opt = torch.optim.AdamW(list(master.values()), lr=6e-4, fused=True)
    loss_fn = torch.compile(drafter_loss)

    def step():
        loss = loss_fn(w, ctx_layers, emb, lm_head, block_ids, blk_cos, blk_sin, ctx_cos, ctx_sin,
                       targets, weights, masks, prev)
        loss.backward()
        for n, t in master.items():
            t.grad.copy_(w[n].grad)
            w[n].grad = None
        torch.nn.utils.clip_grad_norm_(list(master.values()), 1.0)
        opt.step()
        with torch.no_grad():
            for n, t in master.items():
                w[n].copy_(t)
        return loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step_ms = cuda_time_ms(step, args.steps, warmup=0)
    n = sum(t.numel() for t in master.values())
    state = n * (2 + 4 * 4) / 2**30  # bf16 weights + fp32 master, grads, m, v
    act = (torch.cuda.max_memory_allocated() - base) / 2**30
    if args.profile:
        print_profile(step)
    print_result({"step_ms": step_ms, "act_gib": act, "state_gib": state})


def kernel_kind(name):
    n = name.lower()
    if any(k in n for k in ("nvjet", "gemm", "cutlass", "xmma", "matmul")):
        return "gemm"
    if "flex" in n or "attention" in n:
        return "attention"
    if any(k in n for k in ("adam", "multi_tensor", "foreach", "clip")):
        return "optimizer"
    return "other"


def print_profile(step):
    """One step under torch.profiler: GPU kernel milliseconds by kind (one line per kind)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kinds, top = {}, []
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0)
        if us <= 0:
            continue
        kinds[kernel_kind(e.key)] = kinds.get(kernel_kind(e.key), 0.0) + us / 1e3
        top.append((us / 1e3, e.count, e.key[:80]))
    for kind, ms in sorted(kinds.items(), key=lambda x: -x[1]):
        print(f"peer profile: {kind:10s} {ms:8.2f} ms")
    print(f"peer profile: {'total':10s} {sum(kinds.values()):8.2f} ms")
    for ms, n, key in sorted(top, reverse=True)[:15]:
        print(f"peer kernel: {ms:8.2f} ms {n:4d}x {key}")


if __name__ == "__main__":
    main()
