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

Two sets of files:
  short / long [_bfloat16]   the checkpoint as written (index_topk = 4): the indexer chooses, and a
                             tiny perturbation can flip its choice (loose agreement, judged against
                             transformers' own bf16-vs-f32 noise).
  short_dense / long_dense   the same weights with config index_topk = DENSE_TOPK (>= 300 + decode
                             steps) and num_experts_per_tok = n_routed_experts: the indexer keeps
                             every visible key and every token uses every expert, so no selection
                             (keys or experts) can flip and the forward is a smooth function of
                             its inputs: agreement is tight. float32 only; besides the usual
                             tensors they hold prefill_top1_margin (best minus second-best logit
                             at every prompt position), and prefill_logits_fp8kv,
                             prefill_top1_fp8kv, prefill_top1_margin_fp8kv and
                             decode_logits_fp8kv: the same rows (decode teacher-forced with
                             decode_ids) with every layer's latent passed through dsa's fp8_ds_mla
                             round trip (Fp8LatentCache), the tight reference for dsa. The metadata
                             gives how far that FP8 latent alone, and transformers' own bfloat16
                             run, move the float32 logits.
The float32 short file also holds what transformers' indexers chose on the prompt (full forward,
no cache), for every "full" layer L:
  indexer_topk_layerL    I32 [T, index_topk]  torch.topk of the masked index scores (descending)
  indexer_scores_layerL  F32 [T, T]           the index scores, -inf where the key is not visible
  indexer_x_layerL       F32 [T, hidden]      the indexer's input (the layer's normed hidden state)
  indexer_qres_layerL    F32 [T, q_lora_rank] its query input (q_a_layernorm(q_a_proj(x)))
(recomputed from the indexer's inputs by a forward hook and checked against its returned indices).

With --variant transformers the checkpoint is `dsa make-tiny --variant transformers` (bf16 router
bias e_score_correction_bias, as save_pretrained writes it for a bf16 model; FP8 checkpoints also
an FP8 indexer weights_proj) and the files are <prompt>_transformers[_<dtype>].safetensors.

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

import numpy as np

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


DENSE_TOPK = 512


def with_config(src, dst, overrides):
    """A copy of checkpoint directory src (weights linked, not copied) with config.json fields replaced."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f != "config.json":
            os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(dst, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(overrides)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)


def fp8_ds_mla_round_trip(latent):
    """The 512-d latent as dsa's fp8_ds_mla cache keeps it: per 128-value tile, scale =
    2^ceil(log2(max(amax, 1e-4) / 448)), value -> e4m3(value / scale) * scale (round to nearest even;
    |value / scale| <= 448 by construction). The input is rounded to bf16 first, as dsa's latent is."""
    import torch

    x = latent.to(torch.bfloat16).float()
    tiles = x.reshape(*x.shape[:-1], -1, 128)
    amax = tiles.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax / 448.0)))
    q = (tiles / scale).to(torch.float8_e4m3fn).float() * scale
    return q.reshape(x.shape).to(latent.dtype)


class Fp8LatentCache:
    """Context manager: while active, every attention layer's kv_a_layernorm output (the latent that
    becomes keys and values) goes through fp8_ds_mla_round_trip, i.e. transformers sees the latent
    cache that dsa stores. Used to measure how much of the logit difference FP8 alone explains."""

    def __init__(self, model):
        self.model = model
        self.hooks = []

    def __enter__(self):
        for layer in self.model.model.layers:
            norm = layer.self_attn.kv_a_layernorm
            self.hooks.append(norm.register_forward_hook(lambda m, a, out: fp8_ds_mla_round_trip(out)))
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()


def forced_rows(model, prompt_ids, decode_ids, keep_last):
    """Logits rows laid out as run_prompt's, from one full forward over prompt + decode_ids[:-1]
    (no cache; decode ids given, not chosen): prefill_logits, prefill_top1, decode_logits, and
    prefill_top1_margin (best minus second-best logit at every prompt position)."""
    import torch

    T = len(prompt_ids)
    with torch.no_grad():
        ids = torch.tensor([list(prompt_ids) + [int(i) for i in decode_ids[:-1]]], dtype=torch.long)
        full = model(input_ids=ids, use_cache=False).logits[0].float()
    top2 = full[:T].topk(2, dim=-1).values
    return {
        "prefill_logits": full[T - keep_last : T].numpy().astype(np.float32),
        "prefill_top1": full[:T].argmax(-1).numpy().astype(np.int64),
        "prefill_top1_margin": (top2[:, 0] - top2[:, 1]).numpy().astype(np.float32),
        "decode_logits": full[T - 1 :].numpy().astype(np.float32),
    }


def index_scores(indexer, hidden_states, q_resid, position_embeddings, mask):
    """GlmMoeDsaIndexer's masked index scores [B, S, T] (f32), recomputed from its inputs without a
    cache, step by step as transformers 5.17 computes them (the caller checks that torch.topk of the
    result reproduces the indexer's returned indices)."""
    import torch
    import torch.nn.functional as F
    from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import apply_rotary_pos_emb_interleave

    B, S, _ = hidden_states.shape
    cos, sin = position_embeddings
    q = indexer.wq_b(q_resid).view(B, S, indexer.n_heads, indexer.head_dim)
    r = indexer.qk_rope_head_dim
    q_rot, q_pass = torch.split(q, [r, indexer.head_dim - r], dim=-1)
    k = indexer.k_norm(indexer.wk(hidden_states)).unsqueeze(2)
    k_rot, k_pass = torch.split(k, [r, indexer.head_dim - r], dim=-1)
    q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
    q = torch.cat([q_rot, q_pass], dim=-1)
    k = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
    scores = F.relu(torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)) * indexer.softmax_scale)
    w = indexer.weights_proj(hidden_states.to(indexer.weights_proj.weight.dtype)).float() * (indexer.n_heads**-0.5)
    s = torch.matmul(w.unsqueeze(-2), scores).squeeze(-2)
    visible = (mask == 0) if mask.dtype != torch.bool else mask
    return s, s.masked_fill(~visible, float("-inf"))


def capture_indexers(model, prompt_ids):
    """Full forward over the prompt (no cache) with a hook on every indexer: returns
    {f"indexer_topk_layer{L}": ..., f"indexer_scores_layer{L}": ..., inputs...} for the full layers."""
    import torch

    out, hooks = {}, []

    def hook(module, args, kwargs, result):
        hidden_states, q_resid, position_embeddings, mask = args[:4]
        raw, masked = index_scores(module, hidden_states, q_resid, position_embeddings, mask)
        # transformers adds the float mask (finfo.min) to the scores; same top-k as -inf masking
        # unless fewer than index_topk keys are visible, where it fills up with masked keys.
        ref = (raw + mask) if mask.dtype != torch.bool else raw.masked_fill(~mask, float("-inf"))
        topk = min(module.index_topk, ref.shape[-1])
        again = ref.topk(topk, dim=-1).indices.to(torch.int32)
        if not torch.equal(again, result):
            raise SystemExit(f"layer {module.layer_idx}: recomputed index scores do not reproduce the indexer's top-k")
        L = module.layer_idx
        out[f"indexer_topk_layer{L}"] = result[0].numpy().astype("int32")
        out[f"indexer_scores_layer{L}"] = masked[0].numpy().astype("float32")
        out[f"indexer_x_layer{L}"] = hidden_states[0].float().numpy()
        out[f"indexer_qres_layer{L}"] = q_resid[0].float().numpy()

    for layer in model.model.layers:
        if layer.self_attn.indexer is not None:
            hooks.append(layer.self_attn.indexer.register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([prompt_ids], dtype=torch.long), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", help="tiny checkpoint directory (else made with --dsa)")
    ap.add_argument("--dsa", help="dsa binary used to make the checkpoint when --ckpt is not given")
    ap.add_argument("--bf16", action="store_true", help="with --dsa: make a BF16 checkpoint instead of FP8")
    ap.add_argument("--seed", type=int, default=1, help="make-tiny seed (default 1)")
    ap.add_argument("--variant", help="with --dsa: dsa make-tiny --variant (transformers); files get _<variant>")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/data/golden/glm_moe_dsa"))
    ap.add_argument("--decode-steps", type=int, default=8)
    ap.add_argument("--keep-last", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-dense", action="store_true", help="skip the *_dense files")
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
        gc.make_tiny(args.dsa, "glm_moe_dsa", ckpt, args.seed, bf16=args.bf16, variant=args.variant)
    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    fp8 = cfg.get("quantization_config", {}).get("quant_method") == "fp8"
    load_dir = ckpt
    if fp8:
        load_dir = os.path.join(tmp.name, "dequantized")
        dequantize_fp8_copy(ckpt, load_dir)

    whash = gc.weights_fnv1a64(ckpt)
    dense_dir = os.path.join(tmp.name, "dense")
    # Every key (index_topk) and every routed expert (num_experts_per_tok): no discrete choice left.
    dense_overrides = {"index_topk": DENSE_TOPK, "num_experts_per_tok": cfg["n_routed_experts"]}
    with_config(load_dir, dense_dir, dense_overrides)
    prompts = (("short", 24, 21), ("long", 300, 22))
    assert max(n for _, n, _ in prompts) + args.decode_steps <= DENSE_TOPK
    # (variant suffix, checkpoint dir, dtypes): the dense variant runs bf16 only for its metadata.
    variants = [("_" + args.variant if args.variant else "", load_dir, args.dtypes.split(","))]
    if not args.no_dense and not args.variant:
        variants.append(("_dense", dense_dir, ["float32", "bfloat16"]))
    for variant, model_dir, dtypes in variants:
        f32_rows = {}
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            torch.manual_seed(0)
            model, info = GlmMoeDsaForCausalLM.from_pretrained(model_dir, dtype=dtype, output_loading_info=True)
            mtp = rf"^model\.layers\.{cfg['num_hidden_layers']}\."
            gc.check_loading_info(info, allowed_unexpected=[mtp])
            model = model.to(args.device).eval()
            print(f"loaded {ckpt} ({'fp8, dequantized here' if fp8 else 'bf16'}) as {dtype_name}: "
                  f"index_topk={model.config.index_topk} indexer_types={model.config.indexer_types} "
                  f"mlp_layer_types={model.config.mlp_layer_types}", file=sys.stderr)
            suffix = variant + ("" if dtype_name == "float32" else "_" + dtype_name)
            for name, length, seed in prompts:
                [prompt] = gc.prompts(model.config.vocab_size, seed, [length])
                dense = variant == "_dense"
                if dense and dtype_name != "float32":
                    # Dense variant in bf16: only its distance to float32 is kept (metadata), on the
                    # same rows (decode teacher-forced with the float32 greedy ids).
                    ref, ref_meta = f32_rows[name]
                    mine = forced_rows(model, prompt, ref["decode_ids"], min(args.keep_last, length))
                    d = np.abs(np.concatenate([ref["prefill_logits"], ref["decode_logits"][1:]])
                               - np.concatenate([mine["prefill_logits"], mine["decode_logits"][1:]]))
                    ref_meta["bf16_vs_f32_max_abs_diff"] = float(d.max())
                    ref_meta["bf16_vs_f32_mean_abs_diff"] = float(d.mean())
                    ref_meta["bf16_vs_f32_prefill_top1_agreement"] = float(
                        (mine["prefill_top1"] == ref["prefill_top1"]).mean())
                    print(f"{name}{variant}: transformers bf16 vs f32 max {d.max():.4f} mean {d.mean():.5f}",
                          file=sys.stderr)
                    continue
                tensors, selfcheck = gc.run_prompt(model, prompt, args.decode_steps, min(args.keep_last, length))
                meta = {
                    "arch": "glm_moe_dsa",
                    "transformers": transformers.__version__,
                    "torch": torch.__version__,
                    "weights_fnv1a64": whash,
                    "make_tiny_seed": args.seed,
                    "model_dtype": dtype_name,
                    "checkpoint": "fp8" if fp8 else "bf16",
                    "index_topk": model.config.index_topk,
                    "num_experts_per_tok": model.config.num_experts_per_tok,
                    "prompt": f"{name}: {length} random ids, numpy seed {seed}",
                    "loading": ("FP8 dequantized by this script (exact, fp32), " if fp8 else "")
                    + f"{dtype_name}, eager" + (f", config {json.dumps(dense_overrides)}" if dense else ""),
                    "make_tiny_variant": args.variant or "",
                    **selfcheck,
                }
                print(f"{name}{variant} {dtype_name}: {selfcheck}", file=sys.stderr)
                if dtype_name == "float32" and name == "short" and not variant:
                    tensors.update(capture_indexers(model, prompt))
                if dense and dtype_name == "float32":
                    # The same rows with the latent stored as dsa stores it (fp8_ds_mla), teacher-forced
                    # with the float32 greedy ids: the tight reference for dsa.
                    with Fp8LatentCache(model):
                        fp8 = forced_rows(model, prompt, tensors["decode_ids"], min(args.keep_last, length))
                    tensors.update({k + "_fp8kv": v for k, v in fp8.items()})
                    plain = forced_rows(model, prompt, tensors["decode_ids"], min(args.keep_last, length))
                    tensors["prefill_top1_margin"] = plain["prefill_top1_margin"]
                    ref = np.concatenate([tensors["prefill_logits"], tensors["decode_logits"][1:]])
                    sim = np.concatenate([fp8["prefill_logits"], fp8["decode_logits"][1:]])
                    d = np.abs(ref - sim)
                    meta["fp8kv_vs_f32_max_abs_diff"] = float(d.max())
                    meta["fp8kv_vs_f32_mean_abs_diff"] = float(d.mean())
                    meta["fp8kv_vs_f32_prefill_top1_agreement"] = float(
                        (fp8["prefill_top1"] == tensors["prefill_top1"]).mean())
                    print(f"{name}{variant}: transformers with fp8_ds_mla latent vs plain f32: max {d.max():.4f} "
                          f"mean {d.mean():.5f} top-1 {meta['fp8kv_vs_f32_prefill_top1_agreement']}", file=sys.stderr)
                    f32_rows[name] = (tensors, meta)
                    continue  # saved once the bf16 numbers are in
                gc.save_golden(os.path.join(args.out, f"{name}{suffix}.safetensors"), tensors, meta)
        for name, (tensors, meta) in f32_rows.items():
            gc.save_golden(os.path.join(args.out, f"{name}{variant}.safetensors"), tensors, meta)


if __name__ == "__main__":
    main()
