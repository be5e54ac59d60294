"""Shared pieces of the golden-reference scripts (make_golden_deepseek_v4.py, make_golden_glm5.py).

A golden file is a small safetensors file holding, for one prompt of a tiny random checkpoint:
  prompt_ids        I64 [T]         the prompt
  prefill_logits    F32 [K, V]      logits of the last K prompt positions (full forward over the prompt)
  prefill_top1      I64 [T]         argmax logit at every prompt position
  decode_ids        I64 [N]         greedy tokens: decode_ids[0] = argmax at the last prompt position,
                                    decode_ids[i] = argmax after feeding decode_ids[i-1]
  decode_logits     F32 [N, V]      logits that chose decode_ids[i] (decode_logits[0] = last prefill row),
                                    from transformers' incremental decode with its own cache
  decode_logits_full F32 [N, V]     the same rows from one full forward over prompt + decode_ids[:-1]
                                    (transformers' two paths differ a little; metadata gives by how much)
metadata: arch, transformers/torch versions, the checkpoint's weights hash (see weights_fnv1a64),
and the prompt description. Everything comes from transformers 5.17's eager model.
"""
import json
import os
import subprocess
import sys

import numpy as np


def fnv1a64_update(h, data: bytes):
    # 64-bit FNV-1a, vectorised enough for ~20 MB checkpoints.
    prime = 0x100000001B3
    mask = 0xFFFFFFFFFFFFFFFF
    for b in data:
        h ^= b
        h = (h * prime) & mask
    return h


def weights_fnv1a64(ckpt_dir):
    """Hash of every tensor's name, dtype, shape and bytes, in name order, computed from the raw
    safetensors files (no framework involved). The C++ golden test computes the same hash over the
    checkpoint that `dsa make-tiny` writes, so a generator change is detected, not mistaken for a
    model mismatch. Uses every 64th data byte of the data plus the full header to stay fast."""
    index = os.path.join(ckpt_dir, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values()))
    entries = []
    for f in files:
        path = os.path.join(ckpt_dir, f)
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
            base = 8 + n
            for name, e in header.items():
                if name == "__metadata__":
                    continue
                b0, b1 = e["data_offsets"]
                fh.seek(base + b0)
                data = fh.read(b1 - b0)
                entries.append((name, e["dtype"], e["shape"], data))
    entries.sort(key=lambda x: x[0])
    h = 0xCBF29CE484222325
    for name, dtype, shape, data in entries:
        desc = f"{name}|{dtype}|{','.join(str(s) for s in shape)}|{len(data)}|".encode()
        h = fnv1a64_update(h, desc)
        h = fnv1a64_update(h, data[::64])
    return f"{h:016x}"


def make_tiny(dsa_bin, arch, out_dir, seed, bf16=False, variant=None):
    cmd = [dsa_bin, "make-tiny", "--arch", arch, "--out", out_dir, "--seed", str(seed)]
    if bf16:
        cmd.append("--bf16")
    if variant:  # e.g. "transformers": the storage forms transformers writes (dsa make-tiny --help)
        cmd += ["--variant", variant]
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


def check_loading_info(info, allowed_unexpected=()):
    """Fails unless transformers reports no missing, unexpected or mismatched keys."""
    import re

    missing = list(info.get("missing_keys", []))
    unexpected = [k for k in info.get("unexpected_keys", []) if not any(re.match(p, k) for p in allowed_unexpected)]
    mismatched = list(info.get("mismatched_keys", []))
    errors = list(info.get("error_msgs", []))
    if missing or unexpected or mismatched or errors:
        raise SystemExit(
            "transformers loading_info is not clean:\n"
            f"  missing: {missing[:20]}\n  unexpected: {unexpected[:20]}\n"
            f"  mismatched: {mismatched[:20]}\n  errors: {errors[:5]}"
        )


def run_prompt(model, prompt_ids, decode_steps, keep_last):
    """Full forward over the prompt, then greedy incremental decode with the model's own cache."""
    import torch

    with torch.no_grad():
        ids = torch.tensor([prompt_ids], dtype=torch.long)
        out = model(input_ids=ids, use_cache=True)
        logits = out.logits[0].float()
        prefill_top1 = logits.argmax(-1)
        past = out.past_key_values
        decode_ids, decode_logits = [], []
        row = logits[-1]
        for _ in range(decode_steps):
            nxt = int(row.argmax())
            decode_ids.append(nxt)
            decode_logits.append(row.clone())
            out = model(input_ids=torch.tensor([[nxt]], dtype=torch.long), past_key_values=past, use_cache=True)
            past = out.past_key_values
            row = out.logits[0, -1].float()
        # Consistency of transformers itself: a full forward over prompt + generated tokens.
        full_ids = torch.tensor([list(prompt_ids) + decode_ids[:-1]], dtype=torch.long)
        full = model(input_ids=full_ids, use_cache=False).logits[0].float()
        full_rows = full[len(prompt_ids) - 1 :]
        inc = torch.stack(decode_logits)
        self_diff = float((full_rows - inc).abs().max())
        self_top1 = float((full_rows.argmax(-1) == inc.argmax(-1)).float().mean())
    return {
        "prompt_ids": np.asarray(prompt_ids, dtype=np.int64),
        "prefill_logits": logits[-keep_last:].numpy().astype(np.float32),
        "prefill_top1": prefill_top1.numpy().astype(np.int64),
        "decode_ids": np.asarray(decode_ids, dtype=np.int64),
        "decode_logits": inc.numpy().astype(np.float32),
        "decode_logits_full": full_rows.numpy().astype(np.float32),
    }, {"self_max_abs_diff_incremental_vs_full": self_diff, "self_top1_agreement": self_top1}


def save_golden(path, tensors, metadata):
    from safetensors.numpy import save_file

    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path, metadata={k: str(v) for k, v in metadata.items()})
    print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


def prompts(vocab, seed, lengths):
    rng = np.random.default_rng(seed)
    # Avoid ids 0/1 (bos/eos in the tiny configs).
    return [rng.integers(2, vocab, size=n).tolist() for n in lengths]
