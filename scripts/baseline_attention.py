#!/usr/bin/env python3
"""Plain PyTorch baseline for `dsa bench attention`: gather + dequantize + matmul + softmax.

Same shape names and sizes as apps/dsa/bench/bench_attention.cpp (GLM-5.1 h64/h32 top-2048,
V3.2 h128 top-2048 incl. 128 requests x 2 tokens, V4-Flash h64 SWA128 + top-512 + sink with
MODEL1 SWA pages of 256 and 64, V4-Pro h128 SWA128 + top-1024; T = 1, 8, 32, 128), random valid
cache bytes in the same layouts (kv_layout.h), timed with CUDA events (median after warm-up,
rotating over a few input sets). Writes DIR/baseline_attention.json and, when DIR holds
bench_attention.json from `dsa bench attention --json`, the dsa/baseline speed ratio per shape.

Usage: python3 scripts/baseline_attention.py --out DIR [--quick] [--dsa-json FILE]
"""
import argparse
import datetime
import json
import math
import os
import statistics

import torch

DS_MLA_TOKEN = 656
M1_DATA, M1_SCALE, M1_LOGICAL = 576, 8, 584


def shapes(quick):
    ts = [1, 32] if quick else [1, 8, 32, 128]
    v = []
    for T in ts:
        v.append(dict(name=f"glm5.1_h64_k2048_T{T}", kind="ds_mla", H=64, reqs=T, tpr=1, main_k=2048, main_page=64, main_ctx=4096))
    for T in ts:
        v.append(dict(name=f"glm5.1_h32_k2048_T{T}", kind="ds_mla", H=32, reqs=T, tpr=1, main_k=2048, main_page=64, main_ctx=4096))
    for T in ts:
        v.append(dict(name=f"v3.2_h128_k2048_T{T}", kind="ds_mla", H=128, reqs=T, tpr=1, main_k=2048, main_page=64, main_ctx=4096))
    v.append(dict(name="v3.2_h128_k2048_b128x2", kind="ds_mla", H=128, reqs=128, tpr=2, main_k=2048, main_page=64, main_ctx=4096))
    for page in (256, 64):
        for T in ts:
            v.append(dict(name=f"v4flash_h64_swa128_top512_p{page}_T{T}", kind="model1", H=64, reqs=T, tpr=1, main_k=128,
                          main_page=page, main_ctx=256, extra_k=512, extra_page=64, extra_ctx=2048, sink=True))
    for T in ts:
        v.append(dict(name=f"v4pro_h128_swa128_top1024_T{T}", kind="model1", H=128, reqs=T, tpr=1, main_k=128, main_page=256,
                      main_ctx=256, extra_k=1024, extra_page=64, extra_ctx=4096, sink=True))
    return v


def page_bytes(kind, page):
    if kind == "ds_mla":
        return page * DS_MLA_TOKEN
    raw = page * M1_LOGICAL
    return (raw + M1_DATA - 1) // M1_DATA * M1_DATA


def make_cache(kind, page, pages, dev):
    """Random valid cache bytes: e4m3 from normal values, power-of-two scales, bf16 rope."""
    slots = pages * page
    if kind == "ds_mla":
        nope = (torch.randn(slots, 512, device=dev) * 16).to(torch.float8_e4m3fn).view(torch.uint8)
        sc = torch.full((slots, 4), 1.0 / 16, device=dev).view(torch.uint8)
        rope = torch.randn(slots, 64, device=dev).to(torch.bfloat16).view(torch.uint8)
        return torch.cat([nope, sc, rope], 1).reshape(-1).contiguous()
    pb = page_bytes(kind, page)
    buf = torch.zeros(pages, pb, dtype=torch.uint8, device=dev)
    nope = (torch.randn(slots, 448, device=dev) * 16).to(torch.float8_e4m3fn).view(torch.uint8)
    rope = torch.randn(slots, 64, device=dev).to(torch.bfloat16).view(torch.uint8)
    buf[:, : page * M1_DATA] = torch.cat([nope, rope], 1).view(pages, page * M1_DATA)
    sc = torch.full((slots, 8), 123, dtype=torch.uint8, device=dev)
    buf[:, page * M1_DATA : page * (M1_DATA + M1_SCALE)] = sc.view(pages, page * M1_SCALE)
    return buf.reshape(-1)


def make_indices(r0, reqs, tpr, k, page, ctx, window, perm, dev):
    blocks = (ctx + page - 1) // page
    T = reqs * tpr
    if window:
        pos = torch.arange(ctx - k, ctx, device=dev).expand(T, k)
    else:
        pos = torch.rand(T, ctx, device=dev).argsort(1)[:, :k]
    req = (r0 + torch.arange(reqs, device=dev)).repeat_interleave(tpr)[:, None]
    return (perm[req * blocks + pos // page] * page + pos % page).to(torch.int32)


def gather_dequant(kind, cache, page, idx):
    """Rows of the usable indices as bf16 [T][K][d_qk] plus the validity mask."""
    valid = idx >= 0
    ic = idx.clamp(min=0).long()
    if kind == "ds_mla":
        rows = cache.view(-1, DS_MLA_TOKEN)[ic]  # [T][K][656]
        nope = rows[..., :512].contiguous().view(torch.float8_e4m3fn).float()
        sc = rows[..., 512:528].contiguous().view(torch.float32)
        nope = (nope.unflatten(-1, (4, 128)) * sc[..., None]).flatten(-2)
        rope = rows[..., 528:].contiguous().view(torch.bfloat16).float()
    else:
        pb = page_bytes(kind, page)
        pages = cache.numel() // pb
        c = cache[: pages * pb].view(pages, pb)
        data = c[:, : page * M1_DATA].reshape(pages * page, M1_DATA)
        scb = c[:, page * M1_DATA : page * (M1_DATA + M1_SCALE)].reshape(pages * page, M1_SCALE)
        rows, sc8 = data[ic], scb[ic]
        nope = rows[..., :448].contiguous().view(torch.float8_e4m3fn).float()
        sc = torch.exp2(sc8[..., :7].float() - 127)
        nope = (nope.unflatten(-1, (7, 64)) * sc[..., None]).flatten(-2)
        rope = rows[..., 448:].contiguous().view(torch.bfloat16).float()
    return torch.cat([nope, rope], -1).to(torch.bfloat16), valid


def attention(s, inp):
    """o [T][H][512] bf16 and lse [T][H]: one softmax over both lists plus the sink."""
    k, valid = gather_dequant(s["kind"], inp["main_cache"], s["main_page"], inp["main_idx"])
    if "extra_idx" in inp:
        k2, v2 = gather_dequant(s["kind"], inp["extra_cache"], s["extra_page"], inp["extra_idx"])
        k, valid = torch.cat([k, k2], 1), torch.cat([valid, v2], 1)
    scores = torch.bmm(inp["q"], k.transpose(1, 2)).float() * inp["scale"]  # [T][H][K]
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(scores, -1)
    denom = lse
    if inp.get("sink") is not None:
        denom = torch.logaddexp(lse, inp["sink"][None, :])
    p = torch.exp(scores - denom[..., None]).to(torch.bfloat16)
    o = torch.bmm(p, k[..., :512])
    return o, lse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dsa-json", default=None, help="dsa bench attention JSON (default: OUT/bench_attention.json)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size or 60e6
    rows = []
    for s in shapes(args.quick):
        T = s["reqs"] * s["tpr"]
        d = 576 if s["kind"] == "ds_mla" else 512
        row_bytes = DS_MLA_TOKEN if s["kind"] == "ds_mla" else M1_LOGICAL
        keys = s["main_k"] + s.get("extra_k", 0)
        call_bytes = s["reqs"] * keys * row_bytes
        nsets = int(min(8, max(1, math.ceil(2 * l2 / call_bytes))))
        all_reqs = nsets * s["reqs"]

        def perm_for(ctx, page):
            blocks = (ctx + page - 1) // page
            return torch.randperm(all_reqs * blocks, device=dev)

        mperm = perm_for(s["main_ctx"], s["main_page"])
        main_cache = make_cache(s["kind"], s["main_page"], mperm.numel(), dev)
        if s.get("extra_k"):
            eperm = perm_for(s["extra_ctx"], s["extra_page"])
            extra_cache = make_cache(s["kind"], s["extra_page"], eperm.numel(), dev)
        sink = torch.randn(s["H"], device=dev) if s.get("sink") else None
        sets = []
        for i in range(nsets):
            inp = dict(q=torch.randn(T, s["H"], d, device=dev).to(torch.bfloat16), scale=d ** -0.5, sink=sink,
                       main_cache=main_cache,
                       main_idx=make_indices(i * s["reqs"], s["reqs"], s["tpr"], s["main_k"], s["main_page"], s["main_ctx"],
                                             bool(s.get("extra_k")), mperm, dev))
            if s.get("extra_k"):
                inp["extra_cache"] = extra_cache
                inp["extra_idx"] = make_indices(i * s["reqs"], s["reqs"], s["tpr"], s["extra_k"], s["extra_page"],
                                                s["extra_ctx"], False, eperm, dev)
            sets.append(inp)
        for inp in sets * 2:
            attention(s, inp)
        torch.cuda.synchronize()
        times = []
        reps = 6 if args.quick else 20
        for r in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            attention(s, sets[r % nsets])
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000.0)
        us = statistics.median(times)
        flops = 2.0 * s["H"] * keys * (d + 512) * T
        rows.append(dict(name=s["name"], us=us, tflops=flops / (us * 1e-6) / 1e12))
        print(f"  {s['name']:<40} {us:10.1f} us {rows[-1]['tflops']:7.2f} TFLOP/s", flush=True)
        del sets, main_cache
        torch.cuda.empty_cache()

    dsa_path = args.dsa_json or os.path.join(args.out, "bench_attention.json")
    dsa = {}
    if os.path.exists(dsa_path):
        with open(dsa_path) as f:
            dsa = {r["name"]: r for r in json.load(f)["rows"]}
    print(f"\nPyTorch baseline (gather + dequantize + matmul + softmax) vs dsa ({dsa_path if dsa else 'no dsa JSON'})")
    print(f"{'shape':<40} {'torch us':>10} {'dsa us':>10} {'speedup':>8} {'dsa best':>10}")
    for r in rows:
        if r["name"] in dsa:
            d = dsa[r["name"]]
            r["dsa_us"] = d["us"]
            r["speedup"] = r["us"] / d["us"]
            best = d.get("extra", {}).get("best_us", d["us"])
            r["speedup_best_tactic"] = r["us"] / best
            print(f"{r['name']:<40} {r['us']:10.1f} {d['us']:10.2f} {r['speedup']:8.1f} {best:10.2f}")
        else:
            print(f"{r['name']:<40} {r['us']:10.1f} {'-':>10} {'-':>8}")
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), device=torch.cuda.get_device_name(dev),
                torch=torch.__version__)
    with open(os.path.join(args.out, "baseline_attention.json"), "w") as f:
        json.dump(dict(bench="baseline_attention", meta=meta, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
