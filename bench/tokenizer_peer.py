"""HF tokenizers peer for `tandem-bench tokenizer`: encode_batch over the same lines.

Usage: tokenizer_peer.py TOKENIZER_JSON TEXT_FILE
Prints one JSON line last: {"one_thread_mb_s": .., "all_threads_mb_s": .., "tokens": ..}.
One thread is RAYON_NUM_THREADS=1 in a child process (rayon reads it once at start).
"""
import json
import os
import subprocess
import sys
import time


def measure(tok_path, text_path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    # One JSON string per line: the texts hold newlines of their own.
    lines = [json.loads(l) for l in open(text_path, encoding="utf-8")]
    mb = sum(len(l.encode("utf-8")) for l in lines) / 1e6
    tok.encode_batch(lines[:200], add_special_tokens=False)
    t0 = time.perf_counter()
    enc = tok.encode_batch(lines, add_special_tokens=False)
    dt = time.perf_counter() - t0
    return {"mb_s": mb / dt, "tokens": sum(len(e.ids) for e in enc)}


def main():
    tok_path, text_path = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3 and sys.argv[3] == "--child":
        print(json.dumps(measure(tok_path, text_path)))
        return
    env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="true")
    out = subprocess.run([sys.executable, __file__, tok_path, text_path, "--child"], env=env,
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    one = json.loads(out)
    allt = measure(tok_path, text_path)
    print(json.dumps({"one_thread_mb_s": one["mb_s"], "all_threads_mb_s": allt["mb_s"],
                      "tokens": allt["tokens"]}))


if __name__ == "__main__":
    main()
