#!/usr/bin/env python3
"""Golden logits for DeepSeek-V4 from transformers 5.17 (DeepseekV4ForCausalLM, eager, CPU or GPU).

Reads a tiny official-format checkpoint (FP8 E4M3 + UE8M0 `.scale`, MXFP4 routed experts, as
`dsa make-tiny --arch deepseek_v4` writes it) and lets transformers itself interpret it:
its conversion mapping renames the official names, its FP8 quantizer with
`FineGrainedFP8Config(dequantize=True)` maps `.scale` -> `weight_scale_inv` and dequantizes FP8 and
MXFP4 (`expert_dtype: fp4`) to bf16. Loading must report no missing/unexpected keys (the MTP
layer is ignored by transformers by design). Then, per prompt: full forward, greedy decode.

Prompts: 24 tokens (CSA layers have 6 compressed entries > index_topk 4, so the indexer chooses;
HCA has none yet) and 300 tokens (HCA has 2 entries; the sliding window of 128 is exceeded).

With --variant transformers the checkpoint is `dsa make-tiny --variant transformers` (FP8 wo_a +
.scale, bf16/f16 small vectors, f32 norms, no MTP layer but compress_ratios' trailing entry: what
transformers writes) and the files are <prompt>_transformers[_<dtype>].safetensors.

Usage:
  python3 scripts/golden/make_golden_deepseek_v4.py --dsa build/apps/dsa/dsa            # makes the checkpoint
  python3 scripts/golden/make_golden_deepseek_v4.py --ckpt /tmp/tinyv4 [--out tests/data/golden/deepseek_v4]
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402


FP4_LUT = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def check_interpretation(model, ckpt, variant=None):
    """Spot checks that transformers read the official files as the format defines them, using
    an independent dequantization of the raw tensors (e4m3 x 2^(e-127) per 128x128 block; MXFP4
    low nibble first x 2^(e-127) per 32 along K)."""
    import numpy as np
    import torch
    from safetensors import safe_open
    import json

    wm = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))["weight_map"]

    def raw(name):
        with safe_open(os.path.join(ckpt, wm[name]), "pt") as f:
            return f.get_tensor(name)

    def e8m0(t):
        return torch.pow(2.0, t.view(torch.uint8).float() - 127.0)

    def fp8(name):
        w, s = raw(name + ".weight").float(), e8m0(raw(name + ".scale"))
        s = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[: w.shape[0], : w.shape[1]]
        return w * s

    def fp4(name):
        b = raw(name + ".weight").view(torch.uint8).long()
        lut = torch.tensor(FP4_LUT)
        v = torch.stack([lut[b & 15], lut[b >> 4]], -1).reshape(b.shape[0], -1)
        return v * e8m0(raw(name + ".scale")).repeat_interleave(32, 1)

    def close(a, b, what):
        a, b = a.detach().float().cpu(), b.detach().float().cpu()
        err = float((a - b).abs().max())
        tol = 1e-2 * float(b.abs().max()) + 1e-6  # bf16 rounding of the dequantized weight
        if a.shape != b.shape or err > tol:
            raise SystemExit(f"transformers read {what} differently: shape {tuple(a.shape)} vs {tuple(b.shape)}, max err {err}")

    m = model.model
    close(m.layers[0].self_attn.q_a_proj.weight, fp8("layers.0.attn.wq_a"), "layers.0.attn.wq_a")
    close(m.layers[1].self_attn.q_b_proj.weight, fp8("layers.1.attn.wq_b"), "layers.1.attn.wq_b")
    wo_a = fp8("layers.0.attn.wo_a") if variant else raw("layers.0.attn.wo_a.weight")  # the variant stores it FP8
    close(m.layers[0].self_attn.o_a_proj.weight, wo_a, "layers.0.attn.wo_a")
    e = 3
    gu = m.layers[2].mlp.experts.gate_up_proj[e]
    close(gu, torch.cat([fp4(f"layers.2.ffn.experts.{e}.w1"), fp4(f"layers.2.ffn.experts.{e}.w3")], 0), "expert w1|w3")
    close(m.layers[2].mlp.experts.down_proj[e], fp4(f"layers.2.ffn.experts.{e}.w2"), "expert w2")
    close(m.layers[1].self_attn.sinks, raw("layers.1.attn.attn_sink"), "attn_sink")
    close(m.layers[1].self_attn.compressor.indexer.position_bias, raw("layers.1.attn.indexer.compressor.ape"), "indexer ape")
    tid = m.layers[0].mlp.gate.tid2eid
    if not torch.equal(tid.long().cpu(), raw("layers.0.ffn.gate.tid2eid").long()):
        raise SystemExit("transformers read tid2eid differently")
    print("interpretation spot checks passed (FP8 blocks, MXFP4 experts, bf16, fp32, tid2eid)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", help="tiny checkpoint directory (else made with --dsa)")
    ap.add_argument("--dsa", help="dsa binary used to make the checkpoint when --ckpt is not given")
    ap.add_argument("--seed", type=int, default=1, help="make-tiny seed (default 1)")
    ap.add_argument("--variant", help="with --dsa: dsa make-tiny --variant (transformers); files get _<variant>")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/data/golden/deepseek_v4"))
    ap.add_argument("--decode-steps", type=int, default=8)
    ap.add_argument("--keep-last", type=int, default=16, help="prefill logit rows kept per prompt")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtypes", default="float32,bfloat16",
                    help="model dtypes to run; float32 files are <prompt>.safetensors, others <prompt>_<dtype>.safetensors")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import DeepseekV4ForCausalLM, FineGrainedFP8Config

    tmp = None
    ckpt = args.ckpt
    if not ckpt:
        if not args.dsa:
            ap.error("give --ckpt DIR or --dsa BIN")
        tmp = tempfile.TemporaryDirectory()
        ckpt = os.path.join(tmp.name, "tiny_deepseek_v4")
        gc.make_tiny(args.dsa, "deepseek_v4", ckpt, args.seed, variant=args.variant)

    whash = gc.weights_fnv1a64(ckpt)
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        torch.manual_seed(0)
        # Loaded in bf16 (transformers' FP8 dequantizer path), then widened for float32: exact,
        # since e4m3 x 2^k and e2m1 x 2^k values are bf16 values, and fp32-kept parameters stay fp32.
        model, info = DeepseekV4ForCausalLM.from_pretrained(
            ckpt,
            quantization_config=FineGrainedFP8Config(dequantize=True),
            dtype=torch.bfloat16,
            output_loading_info=True,
        )
        gc.check_loading_info(info)
        model = model.to(device=args.device, dtype=dtype).eval()
        cfg = model.config
        print(f"loaded {ckpt} as {dtype_name}: layer_types={cfg.layer_types} mlp_layer_types={cfg.mlp_layer_types} "
              f"compress_rates={cfg.compress_rates}", file=sys.stderr)
        check_interpretation(model, ckpt, args.variant)
        suffix = ("_" + args.variant if args.variant else "") + ("" if dtype_name == "float32" else "_" + dtype_name)
        for name, length, seed in (("short", 24, 11), ("long", 300, 12)):
            [prompt] = gc.prompts(cfg.vocab_size, seed, [length])
            tensors, selfcheck = gc.run_prompt(model, prompt, args.decode_steps, min(args.keep_last, length))
            meta = {
                "arch": "deepseek_v4",
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "weights_fnv1a64": whash,
                "make_tiny_seed": args.seed,
                "make_tiny_variant": args.variant or "",
                "model_dtype": dtype_name,
                "prompt": f"{name}: {length} random ids, numpy seed {seed}",
                "loading": f"FineGrainedFP8Config(dequantize=True), {dtype_name}, eager",
                **selfcheck,
            }
            print(f"{name} {dtype_name}: {selfcheck}", file=sys.stderr)
            gc.save_golden(os.path.join(args.out, f"{name}{suffix}.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
