#include "dsa/ops/rope/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/rope/rope_cuda.h"
#endif

namespace dsa::ops {

RopeConfig RopeConfig::v4_main() { return RopeConfig{}; }

RopeConfig RopeConfig::v4_compress() {
  RopeConfig c;
  c.theta = 160000.0;
  c.yarn_factor = 16.0;
  c.original_max_position = 65536;
  c.beta_fast = 32.0;
  c.beta_slow = 1.0;
  c.attention_factor = 1.0;
  return c;
}

RopeConfig RopeConfig::glm(double theta) {
  RopeConfig c;
  c.theta = theta;
  return c;
}

void RopeConfig::validate() const {
  DSA_CHECK(rope_dim >= 2 && rope_dim <= 256 && rope_dim % 2 == 0, "RopeConfig.rope_dim must be even in [2, 256], got {}",
            rope_dim);
  DSA_CHECK(std::isfinite(theta) && theta > 1.0, "RopeConfig.theta must be > 1, got {}", theta);
  DSA_CHECK(std::isfinite(yarn_factor) && yarn_factor > 0.0, "RopeConfig.yarn_factor must be > 0, got {}", yarn_factor);
  DSA_CHECK(original_max_position >= 0, "RopeConfig.original_max_position must be >= 0, got {}", original_max_position);
  DSA_CHECK(std::isfinite(attention_factor), "RopeConfig.attention_factor must be finite, got {}", attention_factor);
  if (yarn()) {
    DSA_CHECK(beta_fast > 0 && beta_slow > 0 && beta_fast >= beta_slow,
              "RopeConfig: YaRN needs beta_fast >= beta_slow > 0, got beta_fast {} beta_slow {}", beta_fast, beta_slow);
  }
}

std::vector<float> rope_inv_freq(const RopeConfig& cfg) {
  cfg.validate();
  const int64_t dim = cfg.rope_dim, half = dim / 2;
  std::vector<float> out(static_cast<size_t>(half));
  // YaRN correction range (DeepSeek model.py precompute_freqs_cis; transformers
  // _compute_yarn_parameters): the dimension at which a frequency completes `rot` rotations over
  // the original context, floored/ceiled and clamped to [0, dim-1].
  double low = 0, high = 0;
  if (cfg.yarn()) {
    auto corr_dim = [&](double rot) {
      return dim * std::log(static_cast<double>(cfg.original_max_position) / (rot * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(cfg.theta));
    };
    low = std::max(std::floor(corr_dim(cfg.beta_fast)), 0.0);
    high = std::min(std::ceil(corr_dim(cfg.beta_slow)), static_cast<double>(dim - 1));
    if (low == high) high += 0.001;  // as the references: avoid a zero-width ramp
  }
  for (int64_t i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(cfg.theta, static_cast<double>(2 * i) / static_cast<double>(dim));
    if (cfg.yarn()) {
      // ramp 0 below `low` (keep the original frequency: extrapolation), 1 above `high`
      // (divide by the factor: interpolation), linear between.
      double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      double smooth = 1.0 - ramp;
      f = f / cfg.yarn_factor * (1.0 - smooth) + f * smooth;
    }
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

namespace {

struct RopeShape {
  int64_t tokens, heads, dim, token_stride, head_stride;
};

RopeShape check_rope(const Tensor& x, const Tensor& positions, const RopeConfig& cfg, const RopeParams& p) {
  cfg.validate();
  DSA_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3), "apply_rope: x must be [T][D] or [T][H][D], got {}",
            x.defined() ? x.str() : std::string("undefined"));
  check_activation_dtype("apply_rope: x", x.dtype());
  RopeShape s{};
  s.tokens = x.size(0);
  s.heads = x.dim() == 3 ? x.size(1) : 1;
  s.dim = x.size(x.dim() - 1);
  s.token_stride = x.stride(0);
  s.head_stride = x.dim() == 3 ? x.stride(1) : 0;
  DSA_CHECK(s.dim <= 1 || x.stride(x.dim() - 1) == 1, "apply_rope: last dimension of x must be contiguous, got {}",
            x.str());
  DSA_CHECK(p.offset >= 0 && p.offset + cfg.rope_dim <= s.dim,
            "apply_rope: RopeParams.offset {} + rope_dim {} exceeds the last dimension {}", p.offset, cfg.rope_dim, s.dim);
  DSA_CHECK(!(p.half_split && p.deinterleave_out), "apply_rope: RopeParams.half_split and deinterleave_out exclude each other");
  DSA_CHECK(positions.defined() && positions.dim() == 1 && positions.size(0) == s.tokens && positions.is_contiguous(),
            "apply_rope: positions must be a contiguous [{}] vector, got {}", s.tokens,
            positions.defined() ? positions.str() : std::string("undefined"));
  DSA_CHECK(positions.dtype() == DType::I32 || positions.dtype() == DType::I64,
            "apply_rope: positions must be i32 or i64, got {}", dtype_name(positions.dtype()));
  DSA_CHECK(positions.device() == x.device(), "apply_rope: positions on {} but x on {}", positions.device().str(),
            x.device().str());
  return s;
}

int64_t load_pos(const Tensor& positions, int64_t t) {
  return positions.dtype() == DType::I64 ? positions.data<int64_t>()[t] : positions.data<int32_t>()[t];
}

}  // namespace

void apply_rope_cpu(const Tensor& x, const Tensor& positions, const RopeConfig& cfg, const RopeParams& p) {
  RopeShape s = check_rope(x, positions, cfg, p);
  DSA_CHECK(!x.device().is_cuda(), "apply_rope_cpu: tensors must be on the CPU, got {}", x.device().str());
  const std::vector<float> inv_freq = rope_inv_freq(cfg);
  const int64_t half = cfg.rope_dim / 2;
  std::vector<float> rotated(static_cast<size_t>(cfg.rope_dim));
  for (int64_t t = 0; t < s.tokens; ++t) {
    const int64_t pos = load_pos(positions, t);
    DSA_CHECK(pos >= 0, "apply_rope: positions[{}] = {} is negative", t, pos);
    for (int64_t h = 0; h < s.heads; ++h) {
      void* row = static_cast<char*>(x.raw()) + (t * s.token_stride + h * s.head_stride + p.offset) * dtype_size(x.dtype());
      for (int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];  // fp32, as the references
        const double c = std::cos(static_cast<double>(angle)) * cfg.attention_factor;
        double sn = std::sin(static_cast<double>(angle)) * cfg.attention_factor;
        if (p.inverse) sn = -sn;
        const int64_t i0 = p.half_split ? i : 2 * i, i1 = p.half_split ? half + i : 2 * i + 1;
        const double x0 = load_f(row, x.dtype(), i0), x1 = load_f(row, x.dtype(), i1);
        const double y0 = x0 * c - x1 * sn, y1 = x1 * c + x0 * sn;
        const int64_t o0 = p.deinterleave_out ? i : i0, o1 = p.deinterleave_out ? half + i : i1;
        rotated[static_cast<size_t>(o0)] = static_cast<float>(y0);
        rotated[static_cast<size_t>(o1)] = static_cast<float>(y1);
      }
      for (int64_t i = 0; i < cfg.rope_dim; ++i) store_f(row, x.dtype(), i, rotated[static_cast<size_t>(i)]);
    }
  }
}

void apply_rope(const Tensor& x, const Tensor& positions, const RopeConfig& cfg, const RopeParams& p) {
  if (!x.device().is_cuda()) return apply_rope_cpu(x, positions, cfg, p);
  RopeShape s = check_rope(x, positions, cfg, p);
#ifdef DSA_WITH_CUDA
  cuda::RopeArgs a{};
  a.x = static_cast<char*>(x.raw()) + p.offset * static_cast<int64_t>(dtype_size(x.dtype()));
  a.positions = positions.raw();
  a.positions_i64 = positions.dtype() == DType::I64;
  a.dtype = x.dtype();
  a.tokens = s.tokens;
  a.heads = s.heads;
  a.token_stride = s.token_stride;
  a.head_stride = s.head_stride;
  a.offset = p.offset;
  a.pairs = static_cast<int>(cfg.rope_dim / 2);
  a.attention_factor = static_cast<float>(cfg.attention_factor);
  a.inverse = p.inverse;
  a.deinterleave_out = p.deinterleave_out;
  a.half_split = p.half_split;
  std::vector<float> f = rope_inv_freq(cfg);
  for (int i = 0; i < a.pairs; ++i) a.inv_freq[i] = f[static_cast<size_t>(i)];
  cuda_launch::set_device(x.device().index);
  cuda::rope(a);
#else
  (void)s;
  fail("apply_rope: tensors are on {} but this build has no CUDA", x.device().str());
#endif
}

}  // namespace dsa::ops
