// Checks, CPU reference and CUDA dispatch of the fused norm + RoPE ops (norm_rope.h).
#include "dsa/ops/norm/norm_rope.h"

#include <cmath>
#include <vector>

#include "dsa/formats/kv_cache_ops.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/norm/norm_cuda.h"
#include "dsa/ops/norm/norm_rope_cuda.h"
#endif

namespace dsa::ops {

namespace {

// x / out as [T][H][D] with element strides (H = 1 for a 2-D tensor).
struct Heads {
  int64_t tokens = 0, heads = 0, dim = 0, token_stride = 0, head_stride = 0;
};

Heads heads_of(const char* op, const char* name, const Tensor& t) {
  DSA_CHECK(t.defined() && (t.dim() == 2 || t.dim() == 3), "{}: {} must be [T][D] or [T][H][D], got {}", op, name,
            t.defined() ? t.str() : std::string("undefined"));
  Heads h;
  h.tokens = t.size(0);
  h.heads = t.dim() == 3 ? t.size(1) : 1;
  h.dim = t.size(t.dim() - 1);
  h.token_stride = t.stride(0);
  h.head_stride = t.dim() == 3 ? t.stride(1) : 0;
  DSA_CHECK(h.dim <= 1 || t.stride(t.dim() - 1) == 1, "{}: the last dimension of {} must be contiguous, got {}", op,
            name, t.str());
  return h;
}

// Shared checks of both ops; returns x's shape.
Heads check_common(const char* op, const Tensor& x, const Tensor& weight, const Tensor& positions,
                   const NormRopeParams& p) {
  p.norm.validate();
  p.rope.validate();
  const Heads xs = heads_of(op, "x", x);
  check_activation_dtype(fmt::format("{}: x", op), x.dtype());
  DSA_CHECK(xs.dim >= 1, "{}: x has an empty last dimension", op);
  DSA_CHECK(p.rope_offset >= 0 && p.rope_offset % 2 == 0 && p.rope_offset + p.rope.rope_dim <= xs.dim,
            "{}: rope_offset {} must be even with offset + rope_dim {} <= D = {}", op, p.rope_offset, p.rope.rope_dim,
            xs.dim);
  if (weight.defined()) {
    check_activation_dtype(fmt::format("{}: weight", op), weight.dtype());
    DSA_CHECK(weight.dim() == 1 && weight.size(0) == xs.dim && weight.is_contiguous(),
              "{}: weight must be a contiguous vector of {} elements, got {}", op, xs.dim, weight.str());
    DSA_CHECK(weight.device() == x.device(), "{}: weight on {} but x on {}", op, weight.device().str(),
              x.device().str());
  }
  DSA_CHECK(positions.defined() && positions.dim() == 1 && positions.size(0) == xs.tokens && positions.is_contiguous(),
            "{}: positions must be a contiguous [{}] vector, got {}", op, xs.tokens,
            positions.defined() ? positions.str() : std::string("undefined"));
  DSA_CHECK(positions.dtype() == DType::I32 || positions.dtype() == DType::I64, "{}: positions must be i32 or i64, got {}",
            op, dtype_name(positions.dtype()));
  DSA_CHECK(positions.device() == x.device(), "{}: positions on {} but x on {}", op, positions.device().str(),
            x.device().str());
  return xs;
}

Heads check_out(const char* op, const Tensor& out, const Tensor& x, const Heads& xs) {
  const Heads os = heads_of(op, "out", out);
  DSA_CHECK(out.dtype() == DType::BF16, "{}: out must be bf16, got {}", op, dtype_name(out.dtype()));
  DSA_CHECK(os.tokens == xs.tokens && os.dim == xs.dim && os.heads >= xs.heads,
            "{}: out {} must be [{}][>= {}][{}] for x {}", op, out.str(), xs.tokens, xs.heads, xs.dim, x.str());
  DSA_CHECK(out.device() == x.device(), "{}: out on {} but x on {}", op, out.device().str(), x.device().str());
  return os;
}

void check_model1(const Tensor& x, const Heads& xs, const Tensor& cache, int page_size, const Tensor& slots,
                  const NormRopeParams& p) {
  namespace L = kv::model1;
  constexpr const char* op = "rms_norm_rope_model1";
  DSA_CHECK(xs.heads == 1 && xs.dim == L::kDim && x.dim() == 2, "{}: x must be [T][{}], got {}", op, L::kDim, x.str());
  DSA_CHECK(p.rope_offset == L::kRopeOffset && p.rope.rope_dim == L::kRope,
            "{}: MODEL1 rotates values [{}, {}), got offset {} rope_dim {}", op, L::kRopeOffset, L::kDim, p.rope_offset,
            p.rope.rope_dim);
  DSA_CHECK(page_size > 0 && page_size <= (1 << 20), "{}: page_size must be in [1, 2^20], got {}", op, page_size);
  DSA_CHECK(cache.defined() && (cache.dtype() == DType::U8 || cache.dtype() == DType::I8) && cache.is_contiguous(),
            "{}: cache must be a contiguous u8 byte buffer, got {}", op,
            cache.defined() ? cache.str() : std::string("undefined"));
  DSA_CHECK(cache.nbytes() % L::page_bytes(page_size) == 0,
            "{}: cache has {} bytes, not a whole number of pages of {} bytes (page_size {})", op, cache.nbytes(),
            L::page_bytes(page_size), page_size);
  DSA_CHECK(slots.defined() && slots.dtype() == DType::I64 && slots.dim() == 1 && slots.size(0) == xs.tokens &&
                slots.is_contiguous(),
            "{}: slots must be a contiguous i64 [{}] vector, got {}", op, xs.tokens,
            slots.defined() ? slots.str() : std::string("undefined"));
  DSA_CHECK(cache.device() == x.device() && slots.device() == x.device(), "{}: cache on {}, slots on {}, x on {}", op,
            cache.device().str(), slots.device().str(), x.device().str());
}

void check_model1_out(const Tensor& out, const Tensor& x, const Heads& xs) {
  if (!out.defined()) return;
  DSA_CHECK(out.dim() == 2, "rms_norm_rope_model1: out_bf16 must be [T][512], got {}", out.str());
  check_out("rms_norm_rope_model1", out, x, xs);
}

int64_t load_pos(const Tensor& positions, int64_t t) {
  return positions.dtype() == DType::I64 ? positions.data<int64_t>()[t] : positions.data<int32_t>()[t];
}

// The reference rows: rms_norm_cpu's arithmetic (double statistics, f32 result), then
// apply_rope_cpu's (double rotation of the f32 values, f32 result), then one bf16 rounding.
void reference_rows(const Tensor& x, const Heads& xs, const Tensor& weight, const Tensor& positions, const Tensor& out,
                    const Heads& os, const NormRopeParams& p) {
  const std::vector<float> inv_freq = rope_inv_freq(p.rope);
  const int64_t n = xs.dim, half = p.rope.rope_dim / 2;
  const void* w = weight.defined() ? weight.raw() : nullptr;
  const size_t xsz = dtype_size(x.dtype());
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t t = 0; t < xs.tokens; ++t) {
    const int64_t pos = load_pos(positions, t);
    DSA_CHECK(pos >= 0, "rms_norm_rope: positions[{}] = {} is negative", t, pos);
    for (int64_t h = 0; h < os.heads; ++h) {
      uint16_t* orow = out.data<uint16_t>() + t * os.token_stride + h * os.head_stride;
      if (h >= xs.heads) {
        for (int64_t i = 0; i < n; ++i) orow[i] = 0;
        continue;
      }
      const char* xr = static_cast<const char*>(x.raw()) + (t * xs.token_stride + h * xs.head_stride) * xsz;
      const double mean = 0.0;  // as norm.cpp's RMS rows
      double ss = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        double v = load_f(xr, x.dtype(), i) - mean;
        ss += v * v;
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + p.norm.eps);
      for (int64_t i = 0; i < n; ++i) {
        double v = (load_f(xr, x.dtype(), i) - mean) * inv;
        if (w) v *= load_f(w, weight.dtype(), i);
        y[static_cast<size_t>(i)] = static_cast<float>(v);
      }
      float* r = y.data() + p.rope_offset;
      for (int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];  // fp32, as rope.cpp
        const double c = std::cos(static_cast<double>(angle)) * p.rope.attention_factor;
        const double sn = std::sin(static_cast<double>(angle)) * p.rope.attention_factor;
        const double x0 = r[2 * i], x1 = r[2 * i + 1];
        const double y0 = x0 * c - x1 * sn, y1 = x1 * c + x0 * sn;
        r[2 * i] = static_cast<float>(y0);
        r[2 * i + 1] = static_cast<float>(y1);
      }
      for (int64_t i = 0; i < n; ++i) orow[i] = f32_to_bf16_bits(y[static_cast<size_t>(i)]);
    }
  }
}

#ifdef DSA_WITH_CUDA
cuda::NormRopeArgs cuda_args(const Tensor& x, const Heads& xs, const Tensor& weight, const Tensor& positions,
                             const NormRopeParams& p) {
  cuda::NormRopeArgs a{};
  a.x = x.raw();
  a.x_dtype = x.dtype();
  a.x_token_stride = xs.token_stride;
  a.x_head_stride = xs.head_stride;
  a.weight = weight.defined() ? weight.raw() : nullptr;
  a.weight_dtype = weight.defined() ? weight.dtype() : DType::F32;
  a.positions = positions.raw();
  a.positions_i64 = positions.dtype() == DType::I64;
  a.tokens = xs.tokens;
  a.heads = xs.heads;
  a.heads_padded = xs.heads;
  a.dim = xs.dim;
  a.eps = p.norm.eps;
  a.rope_offset = p.rope_offset;
  a.pairs = static_cast<int>(p.rope.rope_dim / 2);
  a.attention_factor = static_cast<float>(p.rope.attention_factor);
  const std::vector<float> f = rope_inv_freq(p.rope);
  for (int i = 0; i < a.pairs; ++i) a.inv_freq[i] = f[static_cast<size_t>(i)];
  return a;
}
#endif

}  // namespace

void rms_norm_rope_cpu(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& out,
                       const NormRopeParams& p) {
  const Heads xs = check_common("rms_norm_rope", x, weight, positions, p);
  const Heads os = check_out("rms_norm_rope", out, x, xs);
  DSA_CHECK(!x.device().is_cuda(), "rms_norm_rope_cpu: tensors must be on the CPU, got {}", x.device().str());
  reference_rows(x, xs, weight, positions, out, os, p);
}

void rms_norm_rope(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& out,
                   const NormRopeParams& p) {
  if (!x.device().is_cuda()) return rms_norm_rope_cpu(x, weight, positions, out, p);
  const Heads xs = check_common("rms_norm_rope", x, weight, positions, p);
  const Heads os = check_out("rms_norm_rope", out, x, xs);
#ifdef DSA_WITH_CUDA
  DSA_CHECK(xs.dim <= cuda::kRegMaxCols, "rms_norm_rope: rows of {} columns (CUDA: at most {})", xs.dim,
            cuda::kRegMaxCols);
  cuda::NormRopeArgs a = cuda_args(x, xs, weight, positions, p);
  a.out = out.data<uint16_t>();
  a.out_token_stride = os.token_stride;
  a.out_head_stride = os.head_stride;
  a.heads_padded = os.heads;
  cuda_launch::set_device(x.device().index);
  cuda::norm_rope(a);
#else
  (void)os;
  fail("rms_norm_rope: tensors are on {} but this build has no CUDA", x.device().str());
#endif
}

void rms_norm_rope_model1_cpu(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& cache,
                              int page_size, const Tensor& slots, const Tensor& out_bf16, const NormRopeParams& p) {
  const Heads xs = check_common("rms_norm_rope_model1", x, weight, positions, p);
  check_model1(x, xs, cache, page_size, slots, p);
  check_model1_out(out_bf16, x, xs);
  DSA_CHECK(!x.device().is_cuda(), "rms_norm_rope_model1_cpu: tensors must be on the CPU, got {}", x.device().str());
  // The rows as bf16, then formats' MODEL1 insert of them (which checks every slot before it
  // writes); out_bf16 gets the rows only once the insert succeeded.
  Tensor rows = Tensor::empty({xs.tokens, xs.dim}, DType::BF16);
  reference_rows(x, xs, weight, positions, rows, heads_of("rms_norm_rope_model1", "rows", rows), p);
  formats::kv_insert_cpu(
      {.format = formats::KvFormat::Model1, .page_size = page_size, .cache = cache, .kv = rows, .slots = slots});
  if (!out_bf16.defined()) return;
  for (int64_t t = 0; t < xs.tokens; ++t)
    for (int64_t i = 0; i < xs.dim; ++i) out_bf16.data<uint16_t>()[t * out_bf16.stride(0) + i] = rows.data<uint16_t>()[t * xs.dim + i];
}

void rms_norm_rope_model1(const Tensor& x, const Tensor& weight, const Tensor& positions, const Tensor& cache,
                          int page_size, const Tensor& slots, const Tensor& out_bf16, const NormRopeParams& p) {
  if (!x.device().is_cuda()) return rms_norm_rope_model1_cpu(x, weight, positions, cache, page_size, slots, out_bf16, p);
  const Heads xs = check_common("rms_norm_rope_model1", x, weight, positions, p);
  check_model1(x, xs, cache, page_size, slots, p);
  check_model1_out(out_bf16, x, xs);
#ifdef DSA_WITH_CUDA
  cuda::NormRopeArgs a = cuda_args(x, xs, weight, positions, p);
  a.out = out_bf16.defined() ? out_bf16.data<uint16_t>() : nullptr;
  a.out_token_stride = out_bf16.defined() ? out_bf16.stride(0) : 0;
  a.out_head_stride = 0;
  a.cache = static_cast<uint8_t*>(cache.raw());
  a.page_size = page_size;
  a.num_slots = static_cast<int64_t>(cache.nbytes() / kv::model1::page_bytes(page_size)) * page_size;
  a.slots = slots.data<int64_t>();
  cuda_launch::set_device(x.device().index);
  cuda::norm_rope_model1(a);
#else
  fail("rms_norm_rope_model1: tensors are on {} but this build has no CUDA", x.device().str());
#endif
}

}  // namespace dsa::ops
