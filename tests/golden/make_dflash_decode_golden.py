#!/usr/bin/env python3
"""Golden decodes for tandem's DFlash speculative decoding (models/speculative).

A PyTorch reference of the decode loop of z-lab's `spec_generate` (greedy), run on:
  dflash_decode_tiny/target/   a tiny Qwen3 in the HF layout, loaded with transformers
                               (Qwen3ForCausalLM, eager attention, DynamicCache + crop)
  dflash_decode_tiny/drafter/  a tiny DFlash drafter in the HF layout (DFlashDraftModel
                               config.json + model.safetensors), run by the plain-PyTorch
                               drafter below (the math of docs/architecture.md, "The DFlash drafter")
Both directories are committed. The target follows the synthetic data's rule (every layer
adds ~nothing, lm_head maps token x to perm[x]) and the drafter was trained by tandem's tiny
job on that data (tests/eval/eval_trained_test.cc writes both with
TANDEM_EVAL_FIXTURE_OUT=DIR TANDEM_EVAL_FIXTURE_HEAD_DIM=64: a drafter head dim the CUDA
block attention takes, so the same golden runs on the CPU and the GPU): with a random target and drafter nearly every draft would be
rejected and the golden could not tell a wrong drafter from a right one.

Loop per prompt (temperature 0):
  prefill the prompt, capture hidden_states[id + 1] for each target layer id, pick the argmax
  of the last row; then until max_new_tokens tokens exist (or a stop token):
  block = [last token, mask x 15] at positions start .. start + 15; the drafter runs over the
  context features of every cached token (no noise) and its final hidden states go through
  the target's lm_head; drafts = argmax of slots 1..B-1; the target verifies the B tokens
  with its KV cache; accept the longest prefix of drafts equal to the target's argmax, plus
  the target's next token; crop the cache to the accepted tokens.
The drafter recomputes the context keys/values every step (the reference caches them; the
values are the same). Math in float32 on the bf16 weights.

Writes tests/golden/dflash_decode_tiny_golden.safetensors:
  __metadata__ = {"format": "tandem-golden", "version": "1", "block_size", "max_new_tokens",
                  "prompts", "min_target_margin", "min_draft_margin"}
  prompt.{i}, tokens.{i}, accept.{i}   I32: the prompt, the generated tokens, the accept
                                        length of every verify step
  margin.{i}                            F32: per verify step, how far its accept decision
                                        is from flipping (below)
Margins: for the drafts compared with the target's picks (the accepted ones and the first
rejected one), how far "draft == pick" is from flipping: top-1 minus top-2 logit where they
agree, top-1 minus the pick's logit where not. tandem computes in bf16 with fp32
accumulation, this reference in fp32, so a step whose margin is within rounding noise may
go either way; the C++ test compares accept lengths up to a prompt's first such step (after
it the two runs verify different blocks) and the tokens always (the target's picks have
margins > 30 here, and greedy speculative decoding returns the target's own tokens).

Run (torch + transformers + safetensors): python3 tests/golden/make_dflash_decode_golden.py
"""

import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import save_golden  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_NEW_TOKENS = 40
EXTRA_PROMPTS = 4  # candidates beyond prompts.jsonl, made by the target from random starts
MAX_KEPT = 10
DT = torch.float32


def rms_norm(x, w, eps):
    x32 = x.to(DT)
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, pos, theta):
    # x [T, heads, d]; NeoX halves, as Qwen3.
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = pos.to(torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(DT)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(DT)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Drafter:
    """The DFlash drafter's forward for one block over a context (no noise, no cache)."""

    def __init__(self, path):
        with open(os.path.join(path, "config.json")) as f:
            self.cfg = json.load(f)
        c = self.cfg
        assert all(t == "full_attention" for t in c.get("layer_types", [])), \
            "the reference drafter implements full-attention layers only"
        self.w = {k: v.to(DT) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
        self.hq, self.hk, self.d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.eps = c["rms_norm_eps"]
        rp = c.get("rope_parameters") or {}
        self.theta = rp.get("rope_theta", c.get("rope_theta", 10000.0))
        self.layers = c["num_hidden_layers"]
        self.block_size = c["block_size"]
        self.mask = c["dflash_config"]["mask_token_id"]
        self.layer_ids = c["dflash_config"]["target_layer_ids"]

    def forward(self, ctx_feats, block_emb, start):
        """ctx_feats [T, k*H], block_emb [bs, H] -> final hidden [bs, H]."""
        w, eps = self.w, self.eps
        t, bs = ctx_feats.shape[0], block_emb.shape[0]
        ctx = rms_norm(ctx_feats @ w["fc.weight"].T, w["hidden_norm.weight"], eps)
        pos_ctx = torch.arange(t)
        pos_blk = torch.arange(start, start + bs)
        x = block_emb.to(DT)
        g = self.hq // self.hk
        for i in range(self.layers):
            p = f"layers.{i}."
            xn = rms_norm(x, w[p + "input_layernorm.weight"], eps)
            q = (xn @ w[p + "self_attn.q_proj.weight"].T).view(bs, self.hq, self.d)
            q = rope(rms_norm(q, w[p + "self_attn.q_norm.weight"], eps), pos_blk, self.theta)

            def kv(h, pos):
                n = h.shape[0]
                k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, self.hk, self.d)
                k = rope(rms_norm(k, w[p + "self_attn.k_norm.weight"], eps), pos, self.theta)
                v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, self.hk, self.d)
                return k, v

            kc, vc = kv(ctx, pos_ctx)  # the context skips input_layernorm
            kb, vb = kv(xn, pos_blk)
            k = torch.cat([kc, kb]).repeat_interleave(g, dim=1)  # [T+bs, hq, d]
            v = torch.cat([vc, vb]).repeat_interleave(g, dim=1)
            s = torch.einsum("qhd,khd->hqk", q, k) / self.d ** 0.5  # all visible
            a = torch.einsum("hqk,khd->qhd", s.softmax(-1), v).reshape(bs, self.hq * self.d)
            h = x + a @ w[p + "self_attn.o_proj.weight"].T
            hn = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
            gate = hn @ w[p + "mlp.gate_proj.weight"].T
            up = hn @ w[p + "mlp.up_proj.weight"].T
            x = h + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        return rms_norm(x, w["norm.weight"], eps)


def margin(logits):
    top = logits.topk(2, dim=-1).values
    return float((top[..., 0] - top[..., 1]).min())


@torch.no_grad()
def decode(target, drafter, prompt, block, max_new):
    embed = target.model.embed_tokens.weight.to(DT)
    lm_head = target.lm_head.weight.to(DT)
    cache = transformers.DynamicCache()
    ids = torch.tensor([prompt])
    out = target(ids, position_ids=torch.arange(len(prompt))[None], past_key_values=cache,
                 use_cache=True, output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i + 1][0] for i in drafter.layer_ids], -1).to(DT)
    tmargin = margin(out.logits[0, -1:])
    tokens = [int(out.logits[0, -1].argmax())]
    accepts, margins = [], []
    while len(tokens) < max_new:
        start = len(prompt) + len(tokens) - 1  # == tokens in the cache
        assert cache.get_seq_length() == start == feats.shape[0]
        blk = [tokens[-1]] + [drafter.mask] * (drafter.block_size - 1)
        hid = drafter.forward(feats, embed[torch.tensor(blk)], start)
        dlog = hid[1:block] @ lm_head.T
        drafts = [int(x) for x in dlog.argmax(-1)]
        vblk = [tokens[-1]] + drafts
        out = target(torch.tensor([vblk]), position_ids=torch.arange(start, start + block)[None],
                     past_key_values=cache, use_cache=True, output_hidden_states=True)
        post = [int(x) for x in out.logits[0].argmax(-1)]
        tmargin = min(tmargin, margin(out.logits[0]))
        acc = 0
        while acc + 1 < block and vblk[acc + 1] == post[acc]:
            acc += 1
        # Only the drafts compared with the target's picks (the accepted ones and the first
        # rejected one) decide anything, and only through "draft == target's pick": its
        # margin is top-1 minus top-2 where they agree, top-1 minus the pick's logit where not.
        dmargin = float("inf")
        for j in range(min(acc + 1, block - 1)):
            row, pick = dlog[j], post[j]
            if drafts[j] == pick:
                dmargin = min(dmargin, margin(row[None]))
            else:
                dmargin = min(dmargin, float(row.max() - row[pick]))
        margins.append(dmargin)
        cache.crop(start + acc + 1)
        new = torch.cat([out.hidden_states[i + 1][0] for i in drafter.layer_ids], -1).to(DT)
        feats = torch.cat([feats, new[: acc + 1]])
        accepts.append(acc + 1)
        tokens += vblk[1: acc + 1] + [post[acc]]
    return tokens[:max_new], accepts, tmargin, margins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(HERE, "dflash_decode_tiny"))
    ap.add_argument("--out", default=os.path.join(HERE, "dflash_decode_tiny_golden.safetensors"))
    args = ap.parse_args()
    torch.manual_seed(0)
    target = transformers.Qwen3ForCausalLM.from_pretrained(
        os.path.join(args.dir, "target"), dtype=DT, attn_implementation="eager").eval()
    drafter = Drafter(os.path.join(args.dir, "drafter"))
    with open(os.path.join(args.dir, "prompts.jsonl")) as f:
        candidates = [json.loads(line)["input_ids"] for line in f if line.strip()]
    gen = torch.Generator().manual_seed(1)
    vocab = target.config.vocab_size
    with torch.no_grad():
        for k in range(EXTRA_PROMPTS):  # the target's own greedy text from a random start
            ids = [int(torch.randint(vocab, (1,), generator=gen))]
            while len(ids) < 8 + k % 5:
                ids.append(int(target(torch.tensor([ids])).logits[0, -1].argmax()))
            candidates.append(ids)
    tensors, tm = {}, float("inf")
    prompts = candidates[:MAX_KEPT]
    for i, p in enumerate(prompts):
        toks, acc, a, margins = decode(target, drafter, p, drafter.block_size, MAX_NEW_TOKENS)
        tm = min(tm, a)
        tensors[f"prompt.{i}"] = torch.tensor(p, dtype=torch.int32)
        tensors[f"tokens.{i}"] = torch.tensor(toks, dtype=torch.int32)
        tensors[f"accept.{i}"] = torch.tensor(acc, dtype=torch.int32)
        tensors[f"margin.{i}"] = torch.tensor(margins, dtype=torch.float32)
        print(f"prompt {i}: accept lengths {acc}, margins {[round(m, 3) for m in margins]}")
    n = sum(len(tensors[f"accept.{i}"]) for i in range(len(prompts)))
    tau = sum(int(tensors[f"accept.{i}"].sum()) for i in range(len(prompts))) / n
    print(f"tau {tau:.3f}; smallest target margin {tm:.3f}")
    save_golden(args.out, tensors,
                {"block_size": drafter.block_size, "max_new_tokens": MAX_NEW_TOKENS,
                 "prompts": len(prompts), "min_target_margin": tm})


if __name__ == "__main__":
    main()
