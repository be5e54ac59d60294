// CPU reference of the router and the dispatch to CUDA.
#include "dsa/ops/moe/routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/router_math.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/moe/cuda_ops.h"
#endif

namespace dsa::ops {

void validate_route(const Tensor& logits, const Tensor& bias, const Tensor& topk_ids, const Tensor& topk_weights,
                    const RouterParams& p) {
  DSA_CHECK(logits.defined() && logits.dim() == 2 && logits.dtype() == DType::F32,
            "route: logits must be f32 [T][E], got {}", logits.defined() ? logits.str() : "undefined");
  const int64_t T = logits.size(0), E = logits.size(1);
  DSA_CHECK(E >= 1 && E <= 1024, "route: expert count {} outside [1, 1024]", E);
  DSA_CHECK(p.topk >= 1 && p.topk <= 32 && p.topk <= E, "route: topk {} outside [1, min(32, E={})]", p.topk, E);
  DSA_CHECK(std::isfinite(p.routed_scaling), "route: routed_scaling {} is not finite", p.routed_scaling);
  if (bias.defined()) bias.check("route: bias", DType::F32, {E});
  topk_ids.check("route: topk_ids", DType::I32, {T, p.topk});
  topk_weights.check("route: topk_weights", DType::F32, {T, p.topk});
  DSA_CHECK(logits.is_contiguous() && topk_ids.is_contiguous() && topk_weights.is_contiguous(),
            "route: tensors must be contiguous");
  const Device d = logits.device();
  DSA_CHECK(topk_ids.device() == d && topk_weights.device() == d && (!bias.defined() || bias.device() == d),
            "route: all tensors must be on {}", d.str());
}

namespace {

// Chooses k experts of one token by key = s + bias (ties: lower index; NaN keys rank lowest).
void topk_one(const float* s, const float* bias, int64_t E, int k, int32_t* ids) {
  std::vector<int32_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t e) { return router_key(s[e], bias ? bias[e] : 0.f); };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  });
  for (int i = 0; i < k; ++i) ids[i] = order[i];
}

void weights_one(const float* s, const int32_t* ids, int k, float scaling, float* w) {
  float sum = 0.f;
  for (int i = 0; i < k; ++i) sum += ids[i] >= 0 ? s[ids[i]] : 0.f;
  for (int i = 0; i < k; ++i) w[i] = ids[i] >= 0 ? router_weight(s[ids[i]], sum, scaling) : 0.f;
}

void route_cpu(const Tensor& logits, const Tensor& bias, const Tensor* token_ids, const Tensor* tid2eid,
               Tensor& ids, Tensor& w, const RouterParams& p) {
  const int64_t T = logits.size(0), E = logits.size(1);
  const int k = p.topk;
  std::vector<float> s(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* lg = logits.data<float>() + t * E;
    for (int64_t e = 0; e < E; ++e) s[e] = router_score(lg[e], p.score);
    int32_t* id = ids.data<int32_t>() + t * k;
    if (tid2eid) {
      const int64_t V = tid2eid->size(0);
      const int32_t tok = token_ids->data<int32_t>()[t];
      for (int i = 0; i < k; ++i) {
        int32_t e = (tok >= 0 && tok < V) ? tid2eid->data<int32_t>()[tok * k + i] : -1;
        id[i] = (e >= 0 && e < E) ? e : -1;
      }
    } else {
      topk_one(s.data(), bias.defined() ? bias.data<float>() : nullptr, E, k, id);
    }
    weights_one(s.data(), id, k, p.routed_scaling, w.data<float>() + t * k);
  }
}

}  // namespace

void route(const Tensor& logits, const Tensor& bias, Tensor& topk_ids, Tensor& topk_weights, const RouterParams& p) {
  validate_route(logits, bias, topk_ids, topk_weights, p);
  if (logits.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::route(logits, bias, nullptr, nullptr, topk_ids, topk_weights, p);
    return;
#else
    fail("route: tensors are on {} but this build has no CUDA", logits.device().str());
#endif
  }
  route_cpu(logits, bias, nullptr, nullptr, topk_ids, topk_weights, p);
}

void validate_route_hash(const Tensor& logits, const Tensor& token_ids, const Tensor& tid2eid, const RouterParams& p) {
  const int64_t T = logits.size(0);
  token_ids.check("route_hash: token_ids", DType::I32, {T});
  DSA_CHECK(tid2eid.defined() && tid2eid.dim() == 2 && tid2eid.dtype() == DType::I32 && tid2eid.size(1) == p.topk &&
                tid2eid.is_contiguous(),
            "route_hash: tid2eid must be contiguous i32 [V][{}], got {}", p.topk,
            tid2eid.defined() ? tid2eid.str() : "undefined");
  DSA_CHECK(token_ids.device() == logits.device() && tid2eid.device() == logits.device(),
            "route_hash: token_ids and tid2eid must be on {}", logits.device().str());
  DSA_CHECK(token_ids.is_contiguous(), "route_hash: token_ids must be contiguous");
}

void route_hash(const Tensor& logits, const Tensor& token_ids, const Tensor& tid2eid, Tensor& topk_ids,
                Tensor& topk_weights, const RouterParams& p) {
  validate_route(logits, Tensor(), topk_ids, topk_weights, p);
  validate_route_hash(logits, token_ids, tid2eid, p);
  if (logits.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::route(logits, Tensor(), &token_ids, &tid2eid, topk_ids, topk_weights, p);
    return;
#else
    fail("route_hash: tensors are on {} but this build has no CUDA", logits.device().str());
#endif
  }
  route_cpu(logits, Tensor(), &token_ids, &tid2eid, topk_ids, topk_weights, p);
}

void router_logits(const Tensor& x, const Tensor& gate, Tensor& logits) {
  DSA_CHECK(x.defined() && x.dim() == 2 && x.dtype() == DType::BF16 && x.is_contiguous(),
            "router_logits: x must be contiguous bf16 [T][H], got {}", x.defined() ? x.str() : "undefined");
  const int64_t T = x.size(0), H = x.size(1);
  DSA_CHECK(gate.defined() && gate.dim() == 2 && gate.size(1) == H &&
                (gate.dtype() == DType::F32 || gate.dtype() == DType::BF16) && gate.is_contiguous(),
            "router_logits: gate must be contiguous f32/bf16 [E][{}], got {}", H,
            gate.defined() ? gate.str() : "undefined");
  const int64_t E = gate.size(0);
  logits.check("router_logits: logits", DType::F32, {T, E});
  DSA_CHECK(x.device() == gate.device() && x.device() == logits.device(), "router_logits: tensors on different devices");
  if (x.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::router_logits(x, gate, logits);
    return;
#else
    fail("router_logits: no CUDA in this build");
#endif
  }
  const uint16_t* xp = x.data<uint16_t>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) {
      double acc = 0;
      for (int64_t h = 0; h < H; ++h) {
        float g = gate.dtype() == DType::F32 ? gate.data<float>()[e * H + h]
                                             : bf16_bits_to_f32(gate.data<uint16_t>()[e * H + h]);
        acc += static_cast<double>(bf16_bits_to_f32(xp[t * H + h])) * g;
      }
      logits.data<float>()[t * E + e] = static_cast<float>(acc);
    }
}

}  // namespace dsa::ops
