#include "dsa/tune/moe_gemm_tunable.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/ops/moe/random_fill.h"

namespace dsa::tune {

void MoeGemmTuneConfig::validate() const {
  DSA_CHECK(experts >= 1, "moe tuning: experts = {}", experts);
  DSA_CHECK(topk >= 1 && topk <= experts, "moe tuning: topk = {} (experts {})", topk, experts);
  DSA_CHECK(k > 0 && k % 128 == 0, "moe tuning: k = {} (a positive multiple of 128)", k);
  DSA_CHECK(n > 0 && n % (fuse_swiglu ? 16 : 8) == 0, "moe tuning: n = {}", n);
  DSA_CHECK(alignment >= 16 && alignment % 16 == 0, "moe tuning: alignment = {}", alignment);
}

MoeGemmTunable::MoeGemmTunable(MoeGemmTuneConfig c) : cfg_(std::move(c)) {
  cfg_.validate();
  if (cfg_.l2_bytes == 0 && cfg_.device.is_cuda()) {
    const auto& devs = cuda_devices();
    if (cfg_.device.index < static_cast<int>(devs.size())) cfg_.l2_bytes = devs[cfg_.device.index].l2_bytes;
  }
}

std::string MoeGemmTunable::instance_key() const {
  return fmt::format("{}.e{}.top{}.n{}.k{}.a{}{}", ops::weight_format_name(cfg_.format),
                     cfg_.experts, cfg_.topk, cfg_.n, cfg_.k, cfg_.alignment, cfg_.fuse_swiglu ? ".swiglu" : "");
}

std::vector<Tactic> MoeGemmTunable::tactics(const Dims&) const {
  std::vector<Tactic> t{{kDefaultTactic, "default (heuristic)"}, {0, "tile16"}};
  if (cfg_.alignment % 64 == 0) t.push_back({1, "tile64"});
  t.push_back({2, "tile16_ksplit"});
  if (cfg_.format != ops::WeightFormat::BF16)  // the stream and GEMV kernels have no bf16 form
    for (int s = 3; s < ops::kExpertGemmTactics; ++s)
      t.push_back({s, s == 4 ? std::string("stream_ksplit") : s >= 9 ? fmt::format("gemv{}", s) : fmt::format("stream{}", s)});
  return t;
}

void MoeGemmTunable::prepare(const Dims& dims) {
  const int64_t T = dims.at(0);
  const Device dev = cfg_.device;
  if (!w_.weight.defined()) {
    w_.format = cfg_.format;
    if (cfg_.format == ops::WeightFormat::MXFP4) {
      w_.weight = Tensor::empty({cfg_.experts, cfg_.n, cfg_.k / 2}, DType::U8, dev);
      w_.scale = Tensor::empty({cfg_.experts, cfg_.n, cfg_.k / 32}, DType::U8, dev);
      ops::random_fill_bytes(w_.weight, 11);
      ops::random_fill_bytes(w_.scale, 12, 120, 124);  // UE8M0 2^-7 .. 2^-3
    } else if (cfg_.format == ops::WeightFormat::BF16) {
      w_.weight = Tensor::empty({cfg_.experts, cfg_.n, cfg_.k}, DType::BF16, dev);
      w_.scale = Tensor();
      ops::random_fill_bf16(w_.weight, 11, 0.05f);
    } else {
      w_.weight = Tensor::empty({cfg_.experts, cfg_.n, cfg_.k}, DType::E4M3, dev);
      w_.scale = Tensor::empty({cfg_.experts, (cfg_.n + 127) / 128, cfg_.k / 128}, DType::F32, dev);
      ops::random_fill_bytes(w_.weight, 11, 0, 255, /*e4m3_finite=*/true);
      ops::random_fill_f32(w_.scale, 12, 1e-3f, 1e-2f);
    }
  }
  a_ = Tensor::empty({T, cfg_.k}, DType::BF16, dev);
  ops::random_fill_bf16(a_, 13 + T, 1.f);
  // Routings: enough that one pass over them streams > 2x the L2 of expert weights (<= 16).
  const int64_t used = std::min<int64_t>(T * cfg_.topk, cfg_.experts);
  const double call_bytes = static_cast<double>(used) * w_.bytes_per_expert();
  const int nsets =
      cfg_.l2_bytes ? static_cast<int>(std::clamp(std::ceil(2.0 * cfg_.l2_bytes / call_bytes), 1.0, 16.0)) : 1;
  std::mt19937_64 gen(0x30e + T);
  std::vector<int32_t> experts(cfg_.experts);
  sets_.clear();
  for (int s = 0; s < nsets; ++s) {
    Tensor ids = Tensor::empty({T, cfg_.topk}, DType::I32);
    for (int64_t t = 0; t < T; ++t) {  // top-k distinct experts per token
      std::iota(experts.begin(), experts.end(), 0);
      for (int j = 0; j < cfg_.topk; ++j) {
        std::swap(experts[j], experts[j + gen() % (cfg_.experts - j)]);
        ids.data<int32_t>()[t * cfg_.topk + j] = experts[j];
      }
    }
    Set set;
    set.layout = ops::make_moe_layout(T, cfg_.topk, cfg_.experts, cfg_.alignment, dev);
    ops::build_moe_layout(ids.to(dev), set.layout);
    set.out = Tensor::empty({set.layout.rows_cap, cfg_.fuse_swiglu ? cfg_.n / 2 : cfg_.n}, DType::BF16, dev);
    sets_.push_back(std::move(set));
  }
  tokens_ = T;
  next_ = last_ = 0;
}

void MoeGemmTunable::run(int tactic, const Dims& dims) {
  DSA_CHECK(!sets_.empty() && tokens_ == dims.at(0), "moe tuning: run before prepare({})", dims.at(0));
  Set& s = sets_[next_];
  ops::ExpertGemmParams p;
  p.fuse_swiglu = cfg_.fuse_swiglu;
  p.tactic = tactic;
  p.m_alignment = cfg_.alignment;
  p.rows_per_expert_hint = static_cast<double>(tokens_) * cfg_.topk / cfg_.experts;
  last_ = next_;
  next_ = (next_ + 1) % sets_.size();
  ops::expert_gemm(a_, s.layout.src_token, s.layout.m_indices, w_, s.out, p);
}

// Frees the weights too: one layer's experts are GBs (V4-Pro gate/up: 8 GB), so only the op
// being tuned holds them; refilling them on the device per bucket takes milliseconds.
void MoeGemmTunable::release() {
  sets_.clear();
  a_ = Tensor();
  w_ = ops::ExpertWeights{};
}

std::vector<std::unique_ptr<TunableOp>> make_moe_gemm_tunables(const PlanModel& model, const EngineLimits&,
                                                               int device) {
  std::vector<std::unique_ptr<TunableOp>> out;
  if (model.n_routed_experts <= 0 || model.experts_per_token <= 0) return out;
  ops::WeightFormat format;
  if (model.expert_dtype == "fp4") format = ops::WeightFormat::MXFP4;
  else if (model.expert_dtype == "fp8") format = ops::WeightFormat::FP8Block;
  else if (model.expert_dtype == "bf16") format = ops::WeightFormat::BF16;
  else return out;
  for (bool gate_up : {true, false}) {
    MoeGemmTuneConfig c;
    c.format = format;
    c.experts = model.n_routed_experts;
    c.topk = model.experts_per_token;
    c.n = gate_up ? 2 * model.moe_intermediate_size : model.hidden_size;
    c.k = gate_up ? model.hidden_size : model.moe_intermediate_size;
    c.fuse_swiglu = gate_up;
    c.device = Device::cuda(device);
    out.push_back(std::make_unique<MoeGemmTunable>(c));
  }
  return out;
}

}  // namespace dsa::tune
