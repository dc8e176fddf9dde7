#!/usr/bin/env python3
"""PyTorch peer of `tandem-bench attention`: the same shapes done the way PyTorch users do them.

target: causal attention over 4 documents x 4096 tokens packed into 16384, 32/8 heads of 128,
        F.scaled_dot_product_attention (flash backend) looping over documents.
dflash: 512 anchors x 16 queries over 8192 context tokens, window 2048 per query position
        (the serving rule: slot i at position anchor + i sees keys at positions
        >= anchor + i - 2047, as tandem's kernels), causal inside the block,
        flex_attention compiled with the DFlash mask (create_block_mask), forward +
        backward, in two layouts: "random" (random anchors, 2 docs x 4096) and "drafter"
        (sorted anchors as the drafter samples them, 4 docs x 2048).
Prints one JSON object on stdout. Usage: python3 bench/attention_peer.py [--iters N]
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_common import cuda_time_ms, print_result  # noqa: E402


def target(iters):
    docs, length, hq, hk, d = 4, 4096, 32, 8, 128
    t = docs * length
    q = torch.randn(t, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(t, hk, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(t, hk, d, device="cuda", dtype=torch.bfloat16)
    cu = [i * length for i in range(docs + 1)]

    def run():
        outs = []
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            for i in range(docs):
                s, e = cu[i], cu[i + 1]
                qd, kd, vd = (x[s:e].transpose(0, 1).unsqueeze(0) for x in (q, k, v))
                outs.append(F.scaled_dot_product_attention(qd, kd, vd, is_causal=True,
                                                           enable_gqa=True))
        return outs

    ms = cuda_time_ms(run, iters)
    flops = 4 * d * hq * docs * length * (length + 1) / 2
    return {"sdpa_target_ms": ms, "sdpa_target_tflops": flops / ms / 1e9}


def dflash(iters, layout, length, sort):
    nb, blk, hq, hk, d, window, t = 512, 16, 32, 8, 128, 2048, 8192
    g = torch.Generator().manual_seed(0)
    anchors = torch.randint(0, t, (nb,), generator=g)
    if sort:
        anchors = torch.sort(anchors).values
    doc_start = (anchors // length) * length
    anchors, doc_start = anchors.cuda(), doc_start.cuda()

    def mask_mod(b, h, q_idx, kv_idx):
        block, slot = q_idx // blk, q_idx % blk
        a, s = anchors[block], doc_start[block]
        lo = torch.maximum(s, a + slot - (window - 1))
        ctx = (kv_idx < t) & (kv_idx >= lo) & (kv_idx < a)
        kb = kv_idx - t
        # own keys: causal; the window (W - 1 >= 15) never cuts them here
        own = (kv_idx >= t) & (kb // blk == block) & (kb % blk <= slot)
        return ctx | own

    rows = nb * blk
    mask = create_block_mask(mask_mod, 1, None, rows, t + rows, device="cuda")
    flex = torch.compile(flex_attention)
    mk = lambda n, h: torch.randn(1, h, n, d, device="cuda", dtype=torch.bfloat16,
                                  requires_grad=True)
    q, kb, vb, kc, vc = mk(rows, hq), mk(rows, hk), mk(rows, hk), mk(t, hk), mk(t, hk)
    dout = torch.randn(1, hq, rows, d, device="cuda", dtype=torch.bfloat16)

    def fwd():
        k = torch.cat([kc, kb], dim=2)
        v = torch.cat([vc, vb], dim=2)
        return flex(q, k, v, block_mask=mask, enable_gqa=True, scale=1 / math.sqrt(d))

    def fwd_bwd():
        fwd().backward(dout)

    with torch.no_grad():
        fwd_ms = cuda_time_ms(fwd, iters)
    return {f"flex_dflash_{layout}_fwd_ms": fwd_ms,
            f"flex_dflash_{layout}_fwd_bwd_ms": cuda_time_ms(fwd_bwd, iters)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    out.update(target(args.iters))
    out.update(dflash(args.iters, "random", 4096, False))
    out.update(dflash(args.iters, "drafter", 2048, True))
    print_result(out)


if __name__ == "__main__":
    main()
