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

# checkpoint_state_fuzz also reads trainer_state.json and DIR/best.
put("checkpoint_state_fuzz", "trainer_state.json", json.dumps(
    {"format": "tandem-dflash-trainer", "version": 1, "step": 200, "seed": 7}, indent=2) + "\n")
put("checkpoint_state_fuzz", "best",
    json.dumps({"dir": "step_00000200", "step": 200, "tau": 4.8125, "prompts": 8}) + "\n")

# metrics_http_fuzz: requests as clients send them.
put("metrics_http_fuzz", "get", b"GET /metrics HTTP/1.1\r\nHost: localhost:9400\r\n"
    b"User-Agent: Prometheus/2.53\r\nAccept: text/plain;version=0.0.4\r\n\r\n")
put("metrics_http_fuzz", "head_query", b"HEAD /metrics?name[]=tandem_up HTTP/1.0\r\n\r\n")
put("metrics_http_fuzz", "post", b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
put("metrics_http_fuzz", "not_found", b"GET /metrics/../etc HTTP/1.1\r\n\r\n")
put("metrics_http_fuzz", "long_header",
    b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 8200 + b"\r\n\r\n")


def byte_level():
    """GPT-2's byte-to-code-point table (data/tokenizer/byte_level.h)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BL = byte_level()


def bl(s):
    return "".join(BL[b] for b in s.encode())


QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenizer(merges, added=(), pre=None, normalizer=None, ignore_merges=False):
    vocab = {BL[b]: b for b in range(256)}
    merge_list = []
    for a, b in merges:
        for piece in (a, b, a + b):
            vocab.setdefault(bl(piece), len(vocab))
        merge_list.append([bl(a), bl(b)])
    added_tokens = [{"id": len(vocab) + k, "content": c, "special": True, "lstrip": False,
                     "rstrip": False, "single_word": False, "normalized": False}
                    for k, c in enumerate(added)]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
             "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": ignore_merges, "vocab": vocab, "merges": merge_list}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre,
            "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": False,
                                                "trim_offsets": False, "use_regex": False},
            "model": model}


def with_text(text, tok):
    t = text.encode()
    return bytes([len(t)]) + t + json.dumps(tok, ensure_ascii=False, indent=1).encode()


MERGES = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (" ", "w"), ("o", "r"),
          (" w", "or"), ("l", "d"), (" wor", "ld"), ("i", "n"), (" ", "t"), (" t", "he")]
CHATML = ("<|im_start|>", "<|im_end|>", "<think>", "</think>")
qwen_pre = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": QWEN_SPLIT}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
put("tokenizer_fuzz", "qwen_like.bin", with_text(
    "<|im_start|>user\nhello world, ünïcödé 你好 123!<|im_end|>",
    tokenizer(MERGES, CHATML, qwen_pre, {"type": "NFC"})))
put("tokenizer_fuzz", "gpt2_like.bin", with_text(
    "hello world  in the\tend's 42", tokenizer(
        MERGES, (), {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                     "use_regex": True}, {"type": "Sequence", "normalizers": [{"type": "NFC"}]})))
put("tokenizer_fuzz", "llama3_like.bin", with_text(
    "hello world<|eot_id|>", tokenizer(
        MERGES, ("<|begin_of_text|>", "<|eot_id|>"),
        {"type": "Split", "pattern": {"Regex": QWEN_SPLIT}, "behavior": "Isolated",
         "invert": False}, None, ignore_merges=True)))
put("tokenizer_fuzz", "string_merges.bin", b"\x05hello" + json.dumps(dict(
    tokenizer(MERGES), model=dict(tokenizer(MERGES)["model"],
                                  merges=[f"{bl(a)} {bl(b)}" for a, b in MERGES]))).encode())
# Wide: a thousand merges over a long text; catastrophic: a pattern that backtracks.
wide = [("a" * (k + 1), "a") for k in range(400)] + [(chr(97 + k % 26), chr(97 + k // 26 % 26))
                                                   for k in range(600)]
put("tokenizer_fuzz", "wide.bin", with_text("a" * 200 + " abcdefghijklmnopqrstuvwxyz", tokenizer(
    wide, CHATML, qwen_pre)))
put("tokenizer_fuzz", "backtrack.bin", with_text("a" * 120 + "b", tokenizer(
    MERGES, (), {"type": "Split", "pattern": {"Regex": "(a+)+c|\\s+"}, "behavior": "Isolated",
                 "invert": False})))
put("tokenizer_fuzz", "deep.bin", b"\x00" + json.dumps(dict(
    tokenizer(MERGES), normalizer={"type": "Sequence", "normalizers": [
        {"type": "Sequence", "normalizers": [{"type": "NFC"}]}] * 2})).encode()[:-1] +
    b', "x": ' + deep.encode() + b"}")

# chat_template_fuzz: [template]\0[context]. A ChatML template with tools and reasoning in the
# style of Qwen's, the Jinja2 goldens (tests/golden/jinja_golden.jsonl), and deep nesting.
CHATML_TEMPLATE = """{%- if tools %}
{{- '<|im_start|>system\\n' }}{% if messages[0].role == 'system' %}{{ messages[0].content + '\\n\\n' }}{% endif %}
{{- '# Tools\\n<tools>' }}{% for tool in tools %}{{ '\\n' ~ (tool | tojson) }}{% endfor %}{{ '\\n</tools><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(last_query=messages|length - 1) %}
{%- for message in messages[::-1] %}{% set i = (messages|length - 1) - loop.index0 %}
{%- if message.role == 'user' and ns.last_query == messages|length - 1 %}{% set ns.last_query = i %}{% endif %}
{%- endfor %}
{%- macro think(r) %}{{ '<think>\\n' + r.strip('\\n') + '\\n</think>\\n\\n' }}{% endmacro %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{%- set content = message.content %}{% set reasoning = message.reasoning_content | default('', true) %}
{%- if not reasoning and '</think>' in content %}{% set reasoning = content.split('</think>')[0].split('<think>')[-1] %}{% set content = content.split('</think>')[-1].lstrip('\\n') %}{% endif %}
{{- '<|im_start|>assistant\\n' }}{% if loop.index0 > ns.last_query %}{{ think(reasoning) }}{% endif %}{{ content }}
{%- for call in message.tool_calls | default([]) %}{% set f = call.function if call.function else call %}
{{- '\\n<tool_call>\\n{"name": "' + f.name + '", "arguments": ' + (f.arguments if f.arguments is string else f.arguments | tojson) + '}\\n</tool_call>' }}
{%- endfor %}{{ '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{ '<|im_start|>user' }}{% endif %}
{{- '\\n<tool_response>\\n' + message.content | string + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\\n' }}{% endif %}
{%- else %}{{ raise_exception('unknown role ' ~ message.role) }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}"""
LLAMA_TEMPLATE = """{{- bos_token }}{%- set date = strftime_now('%d %b %Y') %}
{%- for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{% endfor %}
{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}
{{- ' '.join(['a', 'b']) }}{{ {'k': [1, 2.5, none, true]} | tojson(indent=2) }}{{ range(3) | list | length }}
{%- for k, v in {'x': 1}.items() %}{{ k }}={{ v }}{% endfor %}{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"""
put("chat_template_fuzz", "chatml.bin", CHATML_TEMPLATE)
put("chat_template_fuzz", "llama.bin", LLAMA_TEMPLATE + "\0" + json.dumps(
    {"messages": [{"role": "user", "content": "  hi  "}], "bos_token": "<|begin_of_text|>",
     "add_generation_prompt": True}))
with open("tests/golden/jinja_golden.jsonl") as f:
    for line in f.readlines()[1:]:
        r = json.loads(line)
        put("chat_template_fuzz", f"jinja_{r['name']}.bin",
            r["template"] + "\0" + json.dumps(r["context"], ensure_ascii=False))
put("chat_template_fuzz", "deep_blocks.bin", "{% if true %}" * 70 + "x" + "{% endif %}" * 70)
put("chat_template_fuzz", "deep_expr.bin", "{{ " + "(" * 70 + "1" + ")" * 70 + " }}")
put("chat_template_fuzz", "deep_context.bin", "{{ messages | tojson }}\0" + '{"messages": ' + deep
    + "}")
put("chat_template_fuzz", "wide_loop.bin", "{% set ns = namespace(s='') %}{% for i in range(5000) %}"
    "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.s | length }}")

# chat_line_fuzz: [flags][one JSONL line]. Conversations from the tokenizer golden (tools,
# reasoning, several turns), ShareGPT, and lines that are bad in each way.
with open("tests/golden/tokenizer_golden.jsonl") as f:
    chats = [r for r in map(json.loads, f) if r.get("kind") == "chat"]
picked, seen = [], set()
for r in chats:
    shape = (tuple(m["role"] for m in r["messages"]), "tools" in r,
             any("reasoning_content" in m or "tool_calls" in m for m in r["messages"]))
    if shape not in seen and len(picked) < 12:
        seen.add(shape)
        picked.append(r)
for k, r in enumerate(picked):
    rec = {"messages": r["messages"]}
    if r.get("tools"):
        rec["tools"] = r["tools"]
    put("chat_line_fuzz", f"golden_{k}.bin", bytes([(k * 37) & 0xFC | k % 2]) + json.dumps(
        rec, ensure_ascii=False).encode())
put("chat_line_fuzz", "sharegpt.bin", b"\x92" + json.dumps({"conversations": [
    {"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"},
    {"from": "gpt", "value": "Hello!"}, {"from": "human", "value": "Bye"},
    {"from": "gpt", "value": "<think>\nshort\n</think>\n\nBye."}]}).encode())
for name, line in [("not_json", b"{\"messages\": [}"), ("wrong_role", b'{"messages": [{"role": '
                   b'"robot", "content": "x"}]}'), ("assistant_first", b'{"messages": [{"role": '
                   b'"assistant", "content": "a"}, {"role": "user", "content": "u"}]}'),
                   ("big_int", b'{"messages": [{"role": "user", "content": "u", "n": '
                   b'123456789012345678901234567890}]}')]:
    put("chat_line_fuzz", f"bad_{name}.bin", b"\x05" + line)
put("chat_line_fuzz", "deep_tools.bin", b"\x01" + json.dumps({"messages": [
    {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}).encode()[:-1] +
    b', "tools": ' + deep.encode() + b"}")

# chat_set_fuzz: [shards.json]\0[chats.jsonl]. The settings are the ones the target resumes
# with; the resume states pin the chats below (size and FNV-1a of the bytes before `byte`).
CHAT_SETTINGS = {"--model": "qwen3-fixture", "--shard-tokens": "64", "--format": "auto",
                 "--vocab": "0", "--skip-bad": "true", "--max-line-bytes": "4194304",
                 "--max-turns": "512"}
CHAT_LINES = [json.dumps({"messages": [{"role": "user", "content": f"question {k}?"},
                                       {"role": "assistant", "content": f"answer {k}."}]})
              for k in range(4)]
CHAT_LINES.insert(2, "not json")
CHATS = ("\n".join(CHAT_LINES) + "\n").encode()


def fnv_tail(data, end):
    h = 1469598103934665603
    for c in data[max(0, end - 4096):end]:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def convert_state(lines_done):
    end = len(b"".join(line.encode() + b"\n" for line in CHAT_LINES[:lines_done]))
    return {"version": 1, "format": "openai", "byte": end, "line": lines_done,
            "input_bytes": len(CHATS), "tail_hash": f"{fnv_tail(CHATS, end):016x}",
            "lines": lines_done, "conversations": lines_done - (lines_done > 2),
            "examples": 2, "tokens": 5, "loss_tokens": 3, "shards": 1,
            "bad": {"not_json": 1} if lines_done > 2 else {}, "events": {}, "warnings": {},
            "bad_examples": ["chats.jsonl:3: not JSON"] if lines_done > 2 else []}


def manifest(complete, shards, convert, settings=CHAT_SETTINGS):
    return json.dumps({"kind": "tandem sharded set", "version": 1, "complete": complete,
                       "shards": [{"name": f"shard-{k:05d}", "documents": 2, "tokens": 5}
                                  for k in range(shards)],
                       "producer": {"settings": settings, "convert": convert}}, indent=1)


put("chat_set_fuzz", "fresh.bin", manifest(False, 0, {}).encode() + b"\0" + CHATS)
put("chat_set_fuzz", "resume.bin", manifest(False, 1, convert_state(3)).encode() + b"\0" + CHATS)
put("chat_set_fuzz", "resume_at_end.bin",
    manifest(False, 1, convert_state(5)).encode() + b"\0" + CHATS)
put("chat_set_fuzz", "complete.bin", manifest(True, 1, convert_state(5)).encode() + b"\0" + CHATS)
put("chat_set_fuzz", "other_settings.bin", manifest(
    False, 1, convert_state(3), dict(CHAT_SETTINGS, **{"--shard-tokens": "400"})).encode() + b"\0"
    + CHATS)
put("chat_set_fuzz", "deep.bin", manifest(False, 0, {}).encode()[:-1] + b', "x": '
    + deep.encode() + b"}\0" + CHATS)

# prompt_set_fuzz: [flags][prompt file], one seed per layout.
PROMPTS = {
    1: ['{"input_ids": [9707, 11, 1879, 0]}', '{"prompt_ids": [1, 2, 3]}', '{"ids": []}'],
    2: [json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Hello?"},
                                 {"role": "assistant", "content": "dropped"}]})],
    3: [json.dumps({"conversations": [{"from": "human", "value": "Hi there"}]})],
    4: [json.dumps({"turns": ["Write a haiku.", "Another."], "category": "writing"})],
    5: [json.dumps({"question": "Natalia sold 48 clips. How many?", "answer": "72"})],
    6: [json.dumps({"problem": "Find $x$ if $2x = 4$.", "level": "Level 1"})],
    7: [json.dumps({"prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n", "task_id": "H/0"})],
    8: [json.dumps({"text": "Write a function to add.", "test_list": ["assert add(1,2)==3"]})],
}
for fmt_id, lines in PROMPTS.items():
    put("prompt_set_fuzz", f"layout_{fmt_id}.bin", bytes([fmt_id | 0x10]) + ("\n".join(lines)
                                                                              + "\n\n").encode())
put("prompt_set_fuzz", "auto_mixed.bin", b"\x70" + b'\n{"question": "q?"}\n{"problem": "p"}\n'
    b'not json\n{"question": ""}\n')
put("prompt_set_fuzz", "deep.bin", b"\x10" + b'{"messages": ' + deep.encode() + b"}\n")

# metrics_report_fuzz: the report's test run, and records with extreme numbers.
with open("tools/report/testdata/run.jsonl", "rb") as f:
    put("metrics_report_fuzz", "run.jsonl", f.read())
put("metrics_report_fuzz", "extremes.jsonl", b"\n".join([
    b'{"kind": "header", "schema": 3, "t": 0, "settings": {"b": 1, "a": "x"}, '
    b'"settings_order": ["a", "b", "c"]}',
    b'{"kind": "train", "t": -5, "step": 1e300, "total_steps": -1e300, "loss": 1e308}',
    b'{"kind": "train", "t": 1e308, "step": -3, "loss": -1e-320, "tok_s": 18446744073709551615}',
    b'{"step": 2, "loss": 0.5}',
    b'{"kind": "sample", "t": 1e308, "window_s": 0, "store": {"used": -1, "capacity": 0}, '
    b'"stages": {"a": {"seconds": 1e308}}, "channels": {"c": {"depth": -1e308}}}',
    b'{"kind": "header", "schema": 1e300}', b'{"kind": "end", "state": "failed", "error": "x"}',
    b'{"kind": "future"}']) + b"\n")
put("metrics_report_fuzz", "deep.jsonl", b'{"kind": "train", "step": 1, "x": ' + deep.encode()
    + b"}\n")
