#!/usr/bin/env python3
"""Golden logits for GLM-5 / GLM-5.1 (`glm_moe_dsa`) from transformers 5.17 (GlmMoeDsaForCausalLM,
eager, CPU or GPU).

Reads a tiny Hugging Face-format checkpoint (`dsa make-tiny --arch glm_moe_dsa [--bf16]`).
A BF16 checkpoint is loaded by transformers as is. An FP8 checkpoint (E4M3 + F32
`weight_scale_inv`, 128x128 blocks with ceil division: kv_a_proj_with_mqa has 576 rows = 5 row
blocks, which transformers' FP8 dequantizer rejects because it divides rows evenly by the scale
grid) is first dequantized here, block by block, into a temporary F32 copy (exact: e4m3 x fp32
scale), which transformers then loads in the requested dtype.
transformers ignores the MTP layer only when it is layer 78, so the tiny MTP layer
(`model.layers.{num_hidden_layers}.*`) is the one allowed set of unexpected keys.

Prompts: 24 tokens and 300 tokens, both longer than index_topk = 4, so the indexer chooses.

Usage:
  python3 scripts/golden/make_golden_glm5.py --dsa build/apps/dsa/dsa [--bf16]
  python3 scripts/golden/make_golden_glm5.py --ckpt /tmp/tinyglm [--out tests/data/golden/glm_moe_dsa]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402


def dequantize_fp8_copy(src, dst):
    """FP8 (E4M3 + F32 weight_scale_inv per 128x128 block, ceil division) -> copy of src with those
    weights dequantized to F32 (other tensors unchanged)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.pop("quantization_config", None)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    wm = json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]
    out, new_map = {}, {}
    for f in sorted(set(wm.values())):
        with safe_open(os.path.join(src, f), "pt") as h:
            names = list(h.keys())
            for n in names:
                if n.endswith(".weight_scale_inv"):
                    continue
                t = h.get_tensor(n)
                if t.dtype == torch.float8_e4m3fn:
                    s = h.get_tensor(n[: -len(".weight")] + ".weight_scale_inv").float()
                    s = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[: t.shape[0], : t.shape[1]]
                    t = t.float() * s
                out[n] = t
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    for n in out:
        new_map[n] = "model.safetensors"
    json.dump({"metadata": {}, "weight_map": new_map}, open(os.path.join(dst, "model.safetensors.index.json"), "w"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", help="tiny checkpoint directory (else made with --dsa)")
    ap.add_argument("--dsa", help="dsa binary used to make the checkpoint when --ckpt is not given")
    ap.add_argument("--bf16", action="store_true", help="with --dsa: make a BF16 checkpoint instead of FP8")
    ap.add_argument("--seed", type=int, default=1, help="make-tiny seed (default 1)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/data/golden/glm_moe_dsa"))
    ap.add_argument("--decode-steps", type=int, default=8)
    ap.add_argument("--keep-last", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtypes", default="float32,bfloat16",
                    help="model dtypes to run; float32 files are <prompt>.safetensors, others <prompt>_<dtype>.safetensors")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import GlmMoeDsaForCausalLM

    tmp = tempfile.TemporaryDirectory()
    ckpt = args.ckpt
    if not ckpt:
        if not args.dsa:
            ap.error("give --ckpt DIR or --dsa BIN")
        ckpt = os.path.join(tmp.name, "tiny_glm")
        gc.make_tiny(args.dsa, "glm_moe_dsa", ckpt, args.seed, bf16=args.bf16)
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    fp8 = cfg.get("quantization_config", {}).get("quant_method") == "fp8"
    load_dir = ckpt
    if fp8:
        load_dir = os.path.join(tmp.name, "dequantized")
        dequantize_fp8_copy(ckpt, load_dir)

    whash = gc.weights_fnv1a64(ckpt)
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        torch.manual_seed(0)
        model, info = GlmMoeDsaForCausalLM.from_pretrained(load_dir, dtype=dtype, output_loading_info=True)
        mtp = rf"^model\.layers\.{cfg['num_hidden_layers']}\."
        gc.check_loading_info(info, allowed_unexpected=[mtp])
        model = model.to(args.device).eval()
        print(f"loaded {ckpt} ({'fp8, dequantized here' if fp8 else 'bf16'}) as {dtype_name}: "
              f"indexer_types={model.config.indexer_types} mlp_layer_types={model.config.mlp_layer_types}",
              file=sys.stderr)
        suffix = "" if dtype_name == "float32" else "_" + dtype_name
        for name, length, seed in (("short", 24, 21), ("long", 300, 22)):
            [prompt] = gc.prompts(model.config.vocab_size, seed, [length])
            tensors, selfcheck = gc.run_prompt(model, prompt, args.decode_steps, min(args.keep_last, length))
            meta = {
                "arch": "glm_moe_dsa",
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "weights_fnv1a64": whash,
                "make_tiny_seed": args.seed,
                "model_dtype": dtype_name,
                "checkpoint": "fp8" if fp8 else "bf16",
                "prompt": f"{name}: {length} random ids, numpy seed {seed}",
                "loading": ("FP8 dequantized by this script (exact, fp32), " if fp8 else "") + f"{dtype_name}, eager",
                **selfcheck,
            }
            print(f"{name} {dtype_name}: {selfcheck}", file=sys.stderr)
            gc.save_golden(os.path.join(args.out, f"{name}{suffix}.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
