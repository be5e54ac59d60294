#!/usr/bin/env python3
"""Reference vectors for dsa's model ops (tests/modelops/test_golden.cpp), produced by the
executable model definitions of transformers 5.17 on the CPU in float32:
  DeepSeek-V4 (modeling_deepseek_v4.py): RoPE main/compress (YaRN) incl. the inverse rotation,
  mHC pre (DeepseekV4HyperConnection), post (the DeepseekV4DecoderLayer formula), the final
  hyper-head, the HCA and CSA compressors, the CSA indexer top-k;
  GLM-5.1 (modeling_glm_moe_dsa.py): the DSA indexer (LayerNorm k, partial interleaved RoPE,
  top-k) and its de-interleaved key layout.
Random tiny shapes, fixed seed. Run: python3 scripts/golden/modelops_golden.py [OUT_DIR]
(default tests/data/modelops). Needs torch and transformers==5.17.0 (CPU is enough).
"""
import json
import os
import sys

import torch
import transformers
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4
from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config
from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as glm
from transformers.models.glm_moe_dsa.configuration_glm_moe_dsa import GlmMoeDsaConfig

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "modelops")


def lst(t):
    # float32 values with 9 significant digits: enough to round-trip exactly, half the bytes of repr(double)
    return [float("%.9g" % v) for v in t.detach().to(torch.float32).reshape(-1).tolist()]


def save(name, obj):
    obj["generator"] = f"scripts/golden/modelops_golden.py, transformers {transformers.__version__}, torch {torch.__version__}"
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(obj, f, separators=(",", ":"))
    print("wrote", name)


def v4_config(**kw):
    base = dict(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, head_dim=128,
        qk_rope_head_dim=64, q_lora_rank=24, o_groups=1, o_lora_rank=16, index_n_heads=2,
        index_head_dim=128, index_topk=3, compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
                         "beta_fast": 32, "beta_slow": 1},
        max_position_embeddings=1 << 20, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=8,
        layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
    )
    base.update(kw)
    return DeepseekV4Config(**base)


def rope_case(cfg):
    rot = v4.DeepseekV4RotaryEmbedding(cfg)
    T, H, D = 4, 2, 128
    x = torch.randn(1, T, H, D)
    pos = torch.tensor([[0, 1, 1000, 70001]])
    out = {"T": T, "H": H, "D": D, "positions": pos[0].tolist(), "x": lst(x)}
    for kind in ("main", "compress"):
        cos, sin = rot(x, pos, layer_type=kind)
        out[kind + "_inv_freq"] = lst(getattr(rot, f"{kind}_inv_freq"))
        # apply_rotary_pos_emb expects [B, H, S, D] with unsqueeze_dim=1 broadcasting over heads
        y = v4.apply_rotary_pos_emb(x.transpose(1, 2), cos, sin).transpose(1, 2)
        yi = v4.apply_rotary_pos_emb(x.transpose(1, 2), cos, -sin).transpose(1, 2)
        out[kind + "_rotated"] = lst(y)
        out[kind + "_inverse"] = lst(yi)
    save("v4_rope.json", out)


def mhc_case(cfg):
    torch.manual_seed(1)
    hc, d, T = cfg.hc_mult, cfg.hidden_size, 3
    m = v4.DeepseekV4HyperConnection(cfg)
    with torch.no_grad():
        m.fn.normal_(0, 0.2)
        m.base.normal_(0, 0.5)
        m.scale.copy_(torch.tensor([0.7, 1.3, 2.0]))
    X = torch.randn(1, T, hc, d)
    post, comb, collapsed = m(X)
    f = torch.randn(1, T, d)
    new = post.unsqueeze(-1) * f.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), X)  # DecoderLayer formula
    head = v4.DeepseekV4HyperHead(cfg)
    with torch.no_grad():
        head.hc_fn.normal_(0, 0.2)
        head.hc_base.normal_(0, 0.5)
        head.hc_scale.fill_(0.9)
    y_head = head(X)
    save("v4_mhc.json", {
        "T": T, "hc": hc, "d": d, "iters": cfg.hc_sinkhorn_iters, "hc_eps": cfg.hc_eps, "norm_eps": cfg.rms_norm_eps,
        "X": lst(X), "fn": lst(m.fn), "base": lst(m.base), "scale": lst(m.scale),
        "post": lst(post), "comb": lst(comb), "y": lst(collapsed), "f": lst(f), "out": lst(new),
        "head_fn": lst(head.hc_fn), "head_base": lst(head.hc_base), "head_scale": lst(head.hc_scale), "head_y": lst(y_head),
    })


def compressor_case(cfg):
    torch.manual_seed(2)
    S = 16
    h = torch.randn(1, S, cfg.hidden_size)
    q_res = torch.randn(1, S, cfg.q_lora_rank)
    pos = torch.arange(S).unsqueeze(0)
    out = {"S": S, "positions": pos[0].tolist(), "norm_eps": cfg.rms_norm_eps}
    hca = v4.DeepseekV4HCACompressor(cfg)
    csa = v4.DeepseekV4CSACompressor(cfg)
    with torch.no_grad():
        for mod in (hca, csa, csa.indexer):
            mod.position_bias.normal_(0, 0.5)
            mod.kv_norm.weight.normal_(1, 0.2)
        for mod in (hca, csa, csa.indexer):
            out_name = {id(hca): "hca", id(csa): "csa", id(csa.indexer): "idx"}[id(mod)]
            out[out_name] = {
                "ratio": mod.compress_rate, "head_dim": mod.head_dim,
                "kv": lst(mod.kv_proj(h)), "score": lst(mod.gate_proj(h)),
                "ape": lst(mod.position_bias), "norm_weight": lst(mod.kv_norm.weight),
            }
        ckv, _ = hca(h, q_res, pos, None, 0)
        out["hca"]["entries"] = lst(ckv)
        ckv, _ = csa(h, q_res, pos, None, 0)
        out["csa"]["entries"] = lst(ckv)
        # indexer: its compressed keys, raw q (before RoPE), raw weights, and its top-k
        idx = csa.indexer
        captured = {}
        scorer_forward = idx.scorer.forward

        def capture(q, compressed_kv, hidden_states):  # record the scorer's inputs and output
            captured["keys"] = compressed_kv
            captured["scores"] = scorer_forward(q, compressed_kv, hidden_states)
            return captured["scores"]

        idx.scorer.forward = capture
        top = idx(h, q_res, pos, None, 0)
        # recompute the scores to make sure the golden top-k has no ties
        n = S // idx.compress_rate
        out["idx"].update({
            "n_heads": idx.num_heads, "topk": idx.index_topk, "q": lst(idx.q_b_proj(q_res)),
            "weights": lst(idx.scorer.weights_proj(h)), "top": top[0].tolist(), "entries_count": n,
            "entries": lst(captured["keys"]), "scores": lst(captured["scores"]),
        })
    save("v4_compressor.json", out)


def glm_case():
    torch.manual_seed(3)
    cfg = GlmMoeDsaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, q_lora_rank=16,
                          kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=64, v_head_dim=16, index_n_heads=4,
                          index_head_dim=128, index_topk=5, n_routed_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=8, intermediate_size=16, first_k_dense_replace=1)
    ix = glm.GlmMoeDsaIndexer(cfg, 0)
    with torch.no_grad():
        ix.k_norm.weight.normal_(1, 0.2)
        ix.k_norm.bias.normal_(0, 0.2)
    S = 12
    h = torch.randn(1, S, cfg.hidden_size)
    q_res = torch.randn(1, S, cfg.q_lora_rank)
    pos = torch.arange(S).unsqueeze(0)
    rot = glm.GlmMoeDsaRotaryEmbedding(cfg)
    cos, sin = rot(h, pos)
    mask = torch.full((S, S), float("-inf")).triu(1).unsqueeze(0)  # additive causal mask [B, S, T]
    with torch.no_grad():
        top = ix(h, q_res, (cos, sin), mask, pos)
        k = ix.k_norm(ix.wk(h))
        k_rot, k_pass = torch.split(k.unsqueeze(2), [64, 64], dim=-1)
        _, k_rot = glm.apply_rotary_pos_emb_interleave(k_rot, k_rot, cos, sin, unsqueeze_dim=2)
        k_final = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
        save("glm_indexer.json", {
            "S": S, "n_heads": cfg.index_n_heads, "head_dim": cfg.index_head_dim, "topk": cfg.index_topk,
            "rope_theta": cfg.rope_parameters["rope_theta"], "positions": pos[0].tolist(),
            "q": lst(ix.wq_b(q_res)), "k_raw": lst(ix.wk(h)), "k_norm_weight": lst(ix.k_norm.weight),
            "k_norm_bias": lst(ix.k_norm.bias), "weights": lst(ix.weights_proj(h)), "k_final_deinterleaved": lst(k_final),
            "top": top[0].tolist(),
        })


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    cfg = v4_config()
    assert cfg.rope_parameters["compress"]["rope_type"] == "yarn", cfg.rope_parameters
    with torch.no_grad():
        rope_case(cfg)
        mhc_case(cfg)
        compressor_case(cfg)
    glm_case()
