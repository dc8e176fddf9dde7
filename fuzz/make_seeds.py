#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ that are not copied from elsewhere in the repo
(the control-plane seeds are `capnp encode` outputs, see fuzz/corpus/control_frame_fuzz/).
Small valid inputs for each target plus a few near-misses; run from the repo root."""
import json
import os
import struct

ROOT = "fuzz/corpus"


def put(target, name, data):
    os.makedirs(f"{ROOT}/{target}", exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(f"{ROOT}/{target}/{name}", mode) as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    header, blobs, off = {}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs += raw
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs


f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
put("safetensors_fuzz", "two.safetensors",
    safetensors([("w", "F32", [2, 2], f32(1, 2, 3, 4)), ("b", "BF16", [2], b"\x80\x3f\x00\x40")],
                {"format": "pt"}))
put("safetensors_fuzz", "ints.safetensors",
    safetensors([("step", "I32", [1], struct.pack("<i", 7)), ("e", "F16", [0], b""),
                 ("m", "U8", [3], b"\x00\x01\x02"), ("x", "I64", [], struct.pack("<q", -1))]))

put("safetensors_index_fuzz", "index.json", json.dumps({
    "metadata": {"total_size": 52},
    "weight_map": {"a.weight": "shard-a.safetensors", "a.bias": "shard-a.safetensors",
                   "b.weight": "shard-b.safetensors"}}, indent=1))
put("safetensors_index_fuzz", "wrong_shard.json", json.dumps({
    "weight_map": {"a.weight": "shard-b.safetensors", "b.weight": "../shard-b.safetensors"}}))

qwen3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 512,
         "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
         "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu",
         "attention_bias": False, "bos_token_id": 1, "eos_token_id": [2, 3]}
put("hf_config_fuzz", "qwen3.json", json.dumps(qwen3, indent=1))
llama = dict(qwen3, architectures=["LlamaForCausalLM"], model_type="llama", dtype="float32",
             rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
del llama["torch_dtype"], llama["rope_theta"]
put("hf_config_fuzz", "llama.json", json.dumps(llama, indent=1))
drafter = dict(qwen3, architectures=["DFlashDraftModel"], num_hidden_layers=2, block_size=16,
               num_target_layers=6, layer_types=["full_attention", "sliding_attention"],
               sliding_window=128, dflash_config={"mask_token_id": 511,
                                                  "target_layer_ids": [1, 4]})
put("hf_config_fuzz", "dflash.json", json.dumps(drafter, indent=1))


def data_set(docs, mask=None, vocab_bound=None, flags=0):
    offsets = [0]
    for d in docs:
        offsets.append(offsets[-1] + len(d))
    toks = [t for d in docs for t in d]
    vb = vocab_bound if vocab_bound is not None else (max(toks) + 1 if toks else 0)
    header = (b"TANDEMDS" + struct.pack("<IIQQII", 1, 1 if mask is not None else 0, len(docs),
                                        len(toks), vb, 0) + b"\0" * 24)
    off = struct.pack(f"<{len(offsets)}Q", *offsets)
    tok = struct.pack(f"<{len(toks)}I", *toks)
    m = bytes(mask) if mask is not None else b""
    return (bytes([flags | (1 if mask is not None else 0)]) + struct.pack("<HH", len(off), len(tok))
            + header + off + tok + m)


put("data_set_fuzz", "plain.bin", data_set([[1, 2, 3], [4, 5], [6, 7, 8, 9]], flags=0x34))
put("data_set_fuzz", "mask.bin", data_set([[1, 2, 3], [40, 50]], mask=[0, 1, 1, 1, 0], flags=0x26))
put("data_set_fuzz", "vocab_lie.bin", data_set([[1, 2, 999], [4, 5]], vocab_bound=10, flags=0x18))

put("jsonl_fuzz", "ok.jsonl", b"\x14" + b'{"input_ids": [1, 2, 3]}\n{"input_ids": [4, 5], '
    b'"loss_mask": [0, 1]}\n\n{"input_ids": [299, 300]}\n')
put("jsonl_fuzz", "bad.jsonl", b"\x05" + b'{"input_ids": [1, -2]}\nnot json\n[1]\n'
    b'{"input_ids": []}\n{"input_ids": [1.5]}\n{"input_ids": [7, 8], "loss_mask": [1, 2]}\n')

state = {"format": "tandem-dflash-job", "version": 2, "step": 20, "tokens": 5120,
         "positions": {"0": {"epoch": 0, "next_batch": 20}, "1": {"epoch": 1, "next_batch": 3}},
         "identity": {"seed": 1, "target_model": "random", "target_layer_ids": [1, 4],
                      "target_replicas": 2, "max_tokens": 256, "data": "synthetic"},
         "files": {"model.safetensors": {"bytes": 1234, "xxh3_64": "0123456789abcdef"},
                   "config.json": {"bytes": 99, "xxh3_64": "fedcba9876543210"}}}
put("checkpoint_state_fuzz", "v2.json", json.dumps(state, indent=2))
put("checkpoint_state_fuzz", "v1.json", json.dumps(
    {"format": "tandem-dflash-job", "step": 30, "tokens": 0,
     "positions": {"0": {"epoch": 0, "next_batch": 30}}}, indent=2))
put("checkpoint_state_fuzz", "step_dir_name", "step_00000020")

# Deep nesting, refused before anything recurses (JSON: 128 levels, job files: 64). The seeds
# nest a little past the limits; the mutator grows them from there.
deep = "[" * 300 + "]" * 300
put("hf_config_fuzz", "deep.json", '{"model_type": "qwen3", "hidden_act": ' + deep + '}')
put("safetensors_index_fuzz", "deep.json",
    '{"weight_map": {"a": "x.safetensors"}, "metadata": {"m": ' + deep + '}}')
deep_header = b'{"a": {"dtype": "F32", "shape": [' + deep.encode() + b'], "data_offsets": [0, 4]}}'
put("safetensors_fuzz", "deep.safetensors",
    struct.pack("<Q", len(deep_header)) + deep_header + b"\0" * 4)
put("job_spec_fuzz", "deep.toml",
    '[actors.a]\nclass = "x"\n' + "actors.a" + ".b" * 100 + ' = 1\nv = ' + "[" * 70 + "]" * 70
    + "\n")
