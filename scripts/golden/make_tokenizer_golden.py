#!/usr/bin/env python3
"""Tiny byte-level BPE tokenizers trained with Hugging Face `tokenizers`, plus the ids it gives for
a list of test strings: the golden files of tests/tokenizer/ (dsa's C++ tokenizer must match).

Run with an interpreter that has `tokenizers` (e.g. /work/venv-golden/bin/python):
    python scripts/golden/make_tokenizer_golden.py [--out tests/data/tokenizer]

Three tokenizers, each trained on the same generated multilingual text (seeded, so reruns give
the same files for the same `tokenizers` version):
  deepseek_v3: Sequence of Split (digits {1,3}, CJK/kana runs, DeepSeek-V3's letters/punctuation
               pattern) + ByteLevel(use_regex=false); DeepSeek special tokens;
               tokenizer_config.json with bos/eos and add_bos_token.
  glm5:        one Split with GPT-4's cl100k pattern (as GLM uses) + ByteLevel(use_regex=false);
               GLM special tokens; generation_config.json with an eos id list.
  misc:        the other features: DeepSeek-LLM's split (with `\s+$`), Split behaviours Removed / MergedWithPrevious / MergedWithNext /
               Contiguous, invert, a literal pattern, ByteLevel(add_prefix_space, use_regex),
               added tokens with lstrip / rstrip / single_word, TemplateProcessing.
Per tokenizer, cases.json holds for every test string: the text (or its bytes as hex when they
are not valid UTF-8: the text HF sees is Python's decode(errors="replace")), the ids without and
with special tokens, the pre-tokenizer's pieces of the text (with BOS prepended where tokenizer_config.json has add_bos_token, as
transformers does), and decode() of the ids with and without skipping special tokens.
"""
import argparse
import json
import os
import random

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SEED = 1234

# DeepSeek-V3's third split (letters with marks, punctuation/symbol runs, newlines, spaces).
DS_V3 = (
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# The older DeepSeek-LLM letters/punctuation split (used in misc: it has Ruby's line-end `$`).
DS_LLM = (
    r"[\r\n]|\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-Ֆ]+"
    r"|\s?[!-/:-~！-／：-～‘-‟　-。]+|\s+$|[一-龥ࠀ-一가-퟿]+|\p{N}+"
)
CL100K = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

WORDS = ("the of and to in is that for it with as was on be by this are from or have not but what all "
         "were when we there can an your which their said if do will each about how up out them then she "
         "many some so these would other into has more her two like him see time could no make than first "
         "It's don't we're I've you'll he'd THE Quick Brown FOX naïve café über façade Ελλάδα Москва").split()
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "if x != None and y >= 3:\n", "std::vector<int32_t> ids{1, 2, 3};", "#include <cstdio>\n",
        "SELECT * FROM t WHERE id = 42;", "x = {'a': [1, 2.5, -3e10]}", "   // comment\r\n"]


def rand_cjk(r):
    return "".join(chr(r.randint(0x4E00, 0x4FFF)) for _ in range(r.randint(1, 6)))


def rand_piece(r):
    k = r.random()
    if k < 0.40:
        return r.choice(WORDS)
    if k < 0.50:
        return str(r.randint(0, 10 ** r.randint(1, 8)))
    if k < 0.62:
        return rand_cjk(r)
    if k < 0.66:
        return "".join(chr(r.randint(0x3041, 0x30FF)) for _ in range(r.randint(1, 5)))  # kana
    if k < 0.69:
        return "".join(chr(r.randint(0xAC00, 0xAC80)) for _ in range(r.randint(1, 4)))  # hangul
    if k < 0.73:
        return r.choice(["😀", "👍🏽", "🎉", "👨‍👩‍👧", "❤️", "🚀", "∑", "→", "€"])
    if k < 0.80:
        return r.choice([" ", "  ", "\n", "\n\n", "\t", "   ", "\r\n", " \n"])
    if k < 0.86:
        return r.choice(CODE)
    return r.choice([".", ",", "!", "?", "...", "(", ")", "\"", "'", "-", "--", "：", "，", "。", "、"])


def rand_text(r, n):
    out = []
    for _ in range(n):
        out.append(rand_piece(r))
        if r.random() < 0.6:
            out.append(" ")
    return "".join(out)


def corpus():
    r = random.Random(SEED)
    return [rand_text(r, r.randint(5, 40)) for _ in range(3000)]


def train(pre, special, vocab_extra=500):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + len(special) + vocab_extra, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    return tok


def deepseek_v3():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"),
        pre_tokenizers.Split(Regex("[一-龥\u3040-ゟ゠-ヿ]+"), "isolated"),
        pre_tokenizers.Split(Regex(DS_V3), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    special = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>"]
    tok = train(pre, special)
    # Non-special added tokens (normalized=True: matched in a second pass, as in DeepSeek's files).
    tok.add_tokens([AddedToken("<think>", special=False, normalized=True),
                    AddedToken("</think>", special=False, normalized=True),
                    AddedToken("<｜tool▁call▁begin｜>", special=False, normalized=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    config = {"bos_token": {"content": "<｜begin▁of▁sentence｜>", "lstrip": False},
              "eos_token": "<｜end▁of▁sentence｜>", "add_bos_token": True, "add_eos_token": False}
    return tok, {"tokenizer_config.json": config}


def glm5():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(CL100K), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    special = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
               "<|assistant|>", "<|observation|>"]
    tok = train(pre, special)
    gen = {"eos_token_id": [tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|user|>")]}
    return tok, {"generation_config.json": gen}


def misc():
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(DS_LLM), "isolated"),
        pre_tokenizers.Split(Regex(r"\s*;\s*"), "removed"),
        pre_tokenizers.Split("::", "merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[$#@]"), "merged_with_next"),
        pre_tokenizers.Split(Regex(r"[-=]"), "contiguous"),
        pre_tokenizers.Split(Regex(r"[^|]+"), "isolated", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
    ])
    special = ["<s>", "</s>", "<mask>"]
    tok = train(pre, special, vocab_extra=300)
    tok.add_tokens([AddedToken("<mask>", special=True, lstrip=True, rstrip=True, normalized=False),
                    AddedToken("hello", special=False, single_word=True)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[
        ("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok, {}


def test_strings(tok_specials):
    fixed = [
        "", " ", "  ", "\n", "Hello world", "Hello, world! How's it going? I'M FINE, THEY'RE OK.",
        "The year 2024 had 365 days; 1234567 is a number.", "3.14159 and 1,000,000 and 007",
        "你好，世界！今天天气很好。", "日本語のテキストです。カタカナ", "한국어 텍스트", "Ελληνικά και русский текст",
        "emoji 😀👍🏽🎉 family 👨‍👩‍👧 heart ❤️ rocket🚀", "tabs\tand\t\ttabs", "trailing spaces   ",
        "line one  \nline two \n\n\nline four\r\nwindows", "   leading spaces", "a\u00a0b\u3000c\u2028d\u0085e",
        "x\u00a0\u00a0\u00a0y", "end\u3000\u3000", "\u2003\u2003word 12\u00a0\u00a034", "IT'S ſ'S Straße",
        "def f(x):\n    return x * 2\n\n\nclass A:\n        pass\n", "if (a != b && c >= d) { x += 1; }",
        "don't can't won't ſ ß ﬁ İstanbul", "naïve café — “quotes” ‘single’ …", "mixed中文and English123数字",
        "zero-width\u200bjoiner\u200d and combining e\u0301 a\u0308", "x" * 300, " " * 50 + "end", "\n" * 10,
        "a;b ; c;;d", "std::vector::push_back", "$var #tag @user", "a--b==c-=d", "x|y||z|", "hello world hellos ahello hello",
        "key <mask> value", "key<mask>value", "  <mask>  ", "a" + "\t" * 3 + "b\u000bc\u000cd",
    ]
    for s in tok_specials:
        fixed += [s, f"before{s}after", f"{s}{s}", f" {s} text {s}", s[:-1], f"{s[:3]} {s[3:]}"]
    r = random.Random(SEED + 1)
    fixed.append("".join(chr(r.randint(0x4E00, 0x4FFF)) for _ in range(3000)))  # one long piece
    fixed.append(rand_text(r, 400))
    rand = [rand_text(r, r.randint(1, 30)) for _ in range(60)]
    # Random strings with special tokens spliced in.
    for _ in range(15):
        s = rand_text(r, r.randint(2, 12))
        k = r.randint(0, len(s))
        rand.append(s[:k] + r.choice(tok_specials) + s[k:])
    invalid = [b"\xff", b"abc\xffdef", b"\xc3", b"\xe4\xbd", b"ok\xe4\xbd\xa0\xe4\xbdmore", b"\xed\xa0\x80",
               b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\x80\x80x\xc0\xaf", b"\xf0\x9f\x98\x80\xf0\x9f"]
    return [("text", s) for s in fixed + rand] + [("hex", b) for b in invalid]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "tokenizer"))
    args = ap.parse_args()
    for name, make in [("deepseek_v3", deepseek_v3), ("glm5", glm5), ("misc", misc)]:
        tok, extra = make()
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        for fname, content in extra.items():
            with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
                json.dump(content, f, ensure_ascii=False, indent=1)
        bos = extra.get("tokenizer_config.json", {}).get("bos_token")
        bos_content = bos["content"] if isinstance(bos, dict) else bos
        specials = [t.content for t in tok.get_added_tokens_decoder().values()]
        cases = []
        for kind, s in test_strings(specials):
            text = s.decode("utf-8", errors="replace") if kind == "hex" else s
            ids = tok.encode(text, add_special_tokens=False).ids
            ids_sp = tok.encode(text, add_special_tokens=True).ids
            if extra.get("tokenizer_config.json", {}).get("add_bos_token"):
                # transformers' LlamaTokenizerFast (DeepSeek's tokenizer class) adds BOS itself.
                ids_sp = [tok.token_to_id(bos_content)] + ids_sp
            case = {"hex": s.hex()} if kind == "hex" else {"text": s}
            case.update(ids=ids, ids_special=ids_sp, decoded=tok.decode(ids, skip_special_tokens=False),
                        decoded_skip=tok.decode(ids_sp, skip_special_tokens=True))
            # The pre-tokenizer's pieces of the whole text (no added-token split), byte-level mapped.
            case["pieces"] = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
            cases.append(case)
        meta = {"tokenizers_version": tokenizers.__version__, "seed": SEED,
                "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                "special_ids": sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special),
                "cases": cases}
        with open(os.path.join(d, "cases.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, ensure_ascii=False, indent=0)
        print(f"{name}: vocab {meta['vocab_size']}, {len(cases)} cases, "
              f"{os.path.getsize(os.path.join(d, 'tokenizer.json'))} bytes")


if __name__ == "__main__":
    main()
