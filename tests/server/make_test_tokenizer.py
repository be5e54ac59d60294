#!/usr/bin/env python3
"""Writes tests/data/server/tokenizer.json: a small byte-level BPE tokenizer for the server tests.

Ids fit the tiny checkpoints' vocabulary of 512: <s> = 0 (BOS, added by the post-processor as the
DeepSeek and GLM tokenizers add theirs), </s> = 1 (EOS, the tiny config's eos), the 256 byte
symbols at 2..257, and 254 merges learned (greedy BPE, most frequent pair first, ties by the
pair) on the English text below and made-up words. Deterministic: running it again gives the same file.
"""
import collections
import json
import os
import re

TEXT = """
The quick brown fox jumps over the lazy dog. A server answers requests that clients send to it;
the client reads the answer and sends the next request. Tokens are generated one after the other
and streamed to the client as they are made, so that the first words arrive before the last ones
are known. When the text reaches a stop string the generation ends there. Hello world! Hello again,
and hello to everyone who reads this. The weather is nice today, and the sun is shining on the
water. Numbers like 12, 345 and 2024 appear in text too, as do questions: what is the answer?
""" * 3
# Made-up words from syllables: enough distinct pairs for the merges to fill the 512 ids.
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "vo", "pe", "zu", "gra", "ble", "xo", "qui", "dy", "wen"]
TEXT += " ".join(SYLLABLES[i % 16] + SYLLABLES[(i * 7 + 3) % 16] + SYLLABLES[(i * 5 + 1) % 16] for i in range(400))


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def main():
    b2u = bytes_to_unicode()
    vocab = {"<s>": 0, "</s>": 1}
    for b in range(256):
        vocab[b2u[b]] = 2 + b
    pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
    words = collections.Counter("".join(b2u[b] for b in w.encode("utf-8")) for w in pat.findall(TEXT))
    seqs = {w: list(w) for w in words}
    merges = []
    while len(vocab) < 512:
        pairs = collections.Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        merges.append(f"{a} {b}")
        vocab[a + b] = len(vocab)
        for w in seqs:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": 0, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
            {"id": 1, "content": "</s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges},
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "server", "tokenizer.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {os.path.normpath(out)}: {len(vocab)} ids, {len(merges)} merges")


if __name__ == "__main__":
    main()
