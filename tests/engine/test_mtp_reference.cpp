// The MTP layer's forward (CausalLM::draft) on the CPU against a plain-loop reference, on scripted
// tiny checkpoints (model/scripted_weights.h) whose sub-layer output projections are zero, the MTP
// layer's included: every decoder block is then the identity on the residual (V4: the hc streams
// stay equal copies), so the target's hidden state at p is the embedding of token p and the MTP
// logits are, by the formulas of docs/speculative-decoding.md,
//   GLM: lm_head . (RMSNorm(eh_proj [enorm(embed(t[p+1])) | hnorm(h_p)]) * shared_head.norm)
//   V4:  head . (RMSNorm(e_proj enorm(embed(t[p+1])) + h_proj hnorm(h_p)) * mtp.norm)
// computed here from the checkpoint's tensors with float loops (FP8 weights dequantized). The
// comparison is relative (bf16 roundings, the FP8 GEMM's activation quantization); a swapped
// concatenation, a missing norm or the wrong hidden row moves it by O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "dsa/core/dtype_conv.h"
#include "dsa/engine/model_runner.h"
#include "dsa/kv/kv_manager.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/deepseek_v4/model.h"
#include "dsa/model/glm5/model.h"
#include "dsa/model/scripted_weights.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::engine::test {
namespace {

// [rows][cols] float copy of a bf16/f32 matrix, or of an e4m3 one with its f32 128x128 block scales.
std::vector<float> as_float(const Tensor& w, const Tensor& scale = Tensor()) {
  const int64_t n = w.numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (w.dtype() == DType::E4M3) {
    const int64_t cols = w.size(1), sc = scale.size(1);
    const uint8_t* p = w.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = e4m3_to_f32(p[i]) * scale.data<float>()[(i / cols / 128) * sc + (i % cols) / 128];
    return out;
  }
  const Tensor f = ops::cast(w, DType::F32);
  std::copy(f.data<float>(), f.data<float>() + n, out.begin());
  return out;
}

std::vector<float> rms(const std::vector<float>& x, const std::vector<float>& w, double eps, bool round_bf16) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = static_cast<float>(x[i] * r * w[i]);
    if (round_bf16) y[i] = round_to_bf16(y[i]);
  }
  return y;
}

// y = W x (W [out][in]).
std::vector<float> matvec(const std::vector<float>& W, const std::vector<float>& x, int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double s = 0;
    for (int64_t k = 0; k < in; ++k) s += static_cast<double>(W[o * in + k]) * x[k];
    y[o] = static_cast<float>(s);
  }
  return y;
}

std::vector<float> row(const std::vector<float>& M, int64_t r, int64_t width) {
  return {M.begin() + r * width, M.begin() + (r + 1) * width};
}

struct Scripted {
  std::filesystem::path dir;
  explicit Scripted(const std::string& arch) {
    dir = std::filesystem::temp_directory_path() / ("dsa_mtp_ref_" + arch + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    TinyOptions o;
    o.arch = arch;
    o.seed = 3;
    make_tiny_checkpoint(o, dir.string());
    model::apply_scripted_weights(dir.string(), {{2, 3}, {3, 4}});
  }
  ~Scripted() { std::filesystem::remove_all(dir); }
};

// Runs the target over `prompt` and the MTP layer over positions [0, n - 1); returns the MTP
// logits [n - 1][V] and the target's hidden states [n][W].
std::pair<Tensor, Tensor> run_mtp(model::CausalLM& lm, const std::vector<int32_t>& prompt) {
  kv::KvManagerOptions ko;
  ko.num_blocks = 8;
  ko.max_requests = 1;
  ko.max_step_tokens = 64;
  ko.max_position = 1024;
  kv::KvManager kv(lm.kv_requirements(), ko);
  ModelRunner runner(lm, kv);
  kv.add_request(0);
  const int64_t n = static_cast<int64_t>(prompt.size()), W = lm.hidden_width();
  kv::Batch b;
  b.add(0, 0, prompt);
  StepExtras x;
  x.hidden_out = Tensor::empty({n, W}, DType::F32);
  runner.run(b, {RowRequest{n - 1, {}, false}}, &x);
  kv::Batch d;
  d.add(0, 0, std::span<const int32_t>(prompt.data() + 1, prompt.size() - 1));
  StepExtras y;
  y.draft = true;
  y.hidden_src = x.hidden_out;
  y.hidden_rows = Tensor::empty({n - 1}, DType::I32);
  std::vector<RowRequest> rows;
  for (int64_t p = 0; p + 1 < n; ++p) {
    y.hidden_rows.data<int32_t>()[p] = static_cast<int32_t>(p);
    rows.push_back(RowRequest{p, {}, true});
  }
  const StepResult r = runner.run(d, rows, &y);
  return {r.logits, x.hidden_out};
}

double rel_diff(const float* got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

const std::vector<int32_t> kPrompt{2, 3, 7, 11, 5, 9, 2, 13, 40, 41};

TEST(MtpReference, Glm5DraftMatchesPlainLoops) {
  Scripted ck("glm_moe_dsa");
  model::glm5::Model lm(ck.dir.string(), Device::cpu(), {.load_mtp = true});
  ASSERT_EQ(lm.num_draft_layers(), 1);
  const auto [logits, hidden] = run_mtp(lm, kPrompt);
  const model::glm5::Weights& w = lm.weights();
  const int64_t H = lm.config().hidden_size, V = lm.config().vocab_size;
  const double eps = lm.config().rms_norm_eps;
  const std::vector<float> embed = as_float(w.embed), head = as_float(w.lm_head);
  const model::glm5::MtpWeights& M = w.mtp.at(0);
  const std::vector<float> enorm = as_float(M.enorm), hnorm = as_float(M.hnorm), norm = as_float(M.shared_norm);
  const std::vector<float> eh =
      M.eh_proj.fp8() ? as_float(M.eh_proj.weight, M.eh_proj.scale) : as_float(M.eh_proj.weight);
  double worst = 0;
  for (size_t p = 0; p + 1 < kPrompt.size(); ++p) {
    // The identity blocks leave the target's hidden state at the embedding.
    const std::vector<float> h = row(embed, kPrompt[p], H);
    for (int64_t i = 0; i < H; ++i) ASSERT_NEAR(hidden.data<float>()[p * H + i], h[i], 1e-6) << "p " << p;
    std::vector<float> cat = rms(row(embed, kPrompt[p + 1], H), enorm, eps, true);
    const std::vector<float> hn = rms(h, hnorm, eps, true);
    cat.insert(cat.end(), hn.begin(), hn.end());
    std::vector<float> x0 = matvec(eh, cat, H);
    for (float& v : x0) v = round_to_bf16(v);
    const std::vector<float> want = matvec(head, rms(x0, norm, eps, true), V);
    const double d = rel_diff(logits.data<float>() + p * V, want);
    worst = std::max(worst, d);
    EXPECT_LT(d, 1e-2) << "position " << p;
  }
  std::printf("glm5 MTP vs plain loops: worst relative L2 difference of the logits %.2e\n", worst);
}

TEST(MtpReference, DeepseekV4DraftMatchesPlainLoops) {
  Scripted ck("deepseek_v4");
  auto lm = model::v4::load_deepseek_v4_model(ck.dir.string(), Device::cpu(), {.load_mtp = true});
  ASSERT_EQ(lm->num_draft_layers(), 1);
  const auto [logits, hidden] = run_mtp(*lm, kPrompt);
  const model::v4::ModelWeights& w = lm->weights();
  const int64_t H = lm->config().hidden_size, V = lm->config().vocab_size, hc = lm->config().hc_mult;
  const double eps = lm->config().rms_norm_eps;
  const std::vector<float> embed = as_float(w.embed), head = as_float(w.head);
  const model::v4::MtpWeights& M = w.mtp.at(0);
  const std::vector<float> enorm = as_float(M.enorm), hnorm = as_float(M.hnorm), norm = as_float(M.norm);
  const std::vector<float> ep = as_float(M.e_proj.weight, M.e_proj.scale), hp = as_float(M.h_proj.weight, M.h_proj.scale);
  double worst = 0;
  for (size_t p = 0; p + 1 < kPrompt.size(); ++p) {
    const std::vector<float> h = row(embed, kPrompt[p], H);
    for (int64_t k = 0; k < hc; ++k)  // every stream a copy of the embedding (within the Sinkhorn's tolerance)
      for (int64_t i = 0; i < H; ++i)
        ASSERT_NEAR(hidden.data<float>()[(p * hc + k) * H + i], h[i], 1e-3 * (std::fabs(h[i]) + 1e-2)) << "p " << p;
    std::vector<float> e = matvec(ep, rms(row(embed, kPrompt[p + 1], H), enorm, eps, true), H);
    const std::vector<float> g = matvec(hp, rms(h, hnorm, eps, true), H);
    std::vector<float> x0(static_cast<size_t>(H));
    for (int64_t i = 0; i < H; ++i) x0[i] = round_to_bf16(e[i]) + round_to_bf16(g[i]);
    // The hyper-head mixes equal streams with positive weights: the norm removes the scale.
    const std::vector<float> want = matvec(head, rms(x0, norm, eps, true), V);
    const double d = rel_diff(logits.data<float>() + p * V, want);
    worst = std::max(worst, d);
    EXPECT_LT(d, 5e-2) << "position " << p;
  }
  std::printf("deepseek_v4 MTP vs plain loops: worst relative L2 difference of the logits %.2e\n", worst);
}

}  // namespace
}  // namespace dsa::engine::test
