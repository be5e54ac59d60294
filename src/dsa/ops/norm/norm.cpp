#include "dsa/ops/norm/norm.h"

#include <cmath>
#include <utility>

#include "dsa/ops/norm/elem.h"
#include "dsa/ops/norm/rows.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/norm/norm_cuda.h"
#endif

namespace dsa::ops {

void NormParams::validate() const {
  DSA_CHECK(std::isfinite(eps) && eps >= 0.f, "NormParams.eps must be finite and >= 0, got {}", eps);
}

namespace {

struct Checked {
  RowView x, out;
};

// Shared argument checks of both norms: shapes, dtypes, devices, parameter vectors.
Checked check_args(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                   const NormParams& p) {
  p.validate();
  Checked c{row_view(x, fmt::format("{}: x", op)), row_view(out, fmt::format("{}: out", op))};
  check_activation_dtype(fmt::format("{}: x", op), x.dtype());
  check_activation_dtype(fmt::format("{}: out", op), out.dtype());
  DSA_CHECK(x.shape() == out.shape(), "{}: out shape {} differs from x shape {}", op, shape_str(out.shape()),
            shape_str(x.shape()));
  DSA_CHECK(x.device() == out.device(), "{}: x on {} but out on {}", op, x.device().str(), out.device().str());
  for (auto [name, t] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}}) {
    if (!t->defined()) continue;
    check_activation_dtype(fmt::format("{}: {}", op, name), t->dtype());
    DSA_CHECK(t->dim() == 1 && t->size(0) == c.x.cols && t->is_contiguous(),
              "{}: {} must be a contiguous vector of {} elements, got {}", op, name, c.x.cols, t->str());
    DSA_CHECK(t->device() == x.device(), "{}: {} on {} but x on {}", op, name, t->device().str(), x.device().str());
  }
  return c;
}

// One row: RMSNorm or LayerNorm, statistics in double, result rounded once into out.
void norm_rows_cpu(const Checked& c, const Tensor& weight, const Tensor& bias, float eps, bool layer) {
  const void* w = weight.defined() ? weight.raw() : nullptr;
  const void* b = bias.defined() ? bias.raw() : nullptr;
  const int64_t n = c.x.cols;
  const size_t xs = dtype_size(c.x.dtype), os = dtype_size(c.out.dtype);
  for (int64_t r = 0; r < c.x.rows; ++r) {
    const char* xr = c.x.base + r * c.x.row_stride * xs;
    char* orow = c.out.base + r * c.out.row_stride * os;
    double mean = 0.0;
    if (layer) {
      for (int64_t i = 0; i < n; ++i) mean += load_f(xr, c.x.dtype, i);
      mean /= static_cast<double>(n > 0 ? n : 1);
    }
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      double v = load_f(xr, c.x.dtype, i) - mean;
      ss += v * v;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n > 0 ? n : 1) + eps);
    for (int64_t i = 0; i < n; ++i) {  // in place is safe: each element is read before it is written
      double v = (load_f(xr, c.x.dtype, i) - mean) * inv;
      if (w) v *= load_f(w, weight.dtype(), i);
      if (b) v += load_f(b, bias.dtype(), i);
      store_f(orow, c.out.dtype, i, static_cast<float>(v));
    }
  }
}

// add_rms_norm's extra checks: x the contiguous f32 residual stream, delta its shape, out apart.
void check_add(const Tensor& x, const Tensor& delta, const Tensor& out) {
  DSA_CHECK(x.dtype() == DType::F32 && x.is_contiguous(), "add_rms_norm: x must be contiguous f32, got {}", x.str());
  check_activation_dtype("add_rms_norm: delta", delta.dtype());
  DSA_CHECK(delta.is_contiguous() && delta.shape() == x.shape() && delta.device() == x.device(),
            "add_rms_norm: delta must be contiguous, of x's shape and device ({}), got {}", x.str(), delta.str());
  auto span = [](const Tensor& t) {
    const char* b = static_cast<const char*>(t.raw());
    return std::pair{b, b + t.numel() * static_cast<int64_t>(dtype_size(t.dtype()))};
  };
  const auto [xb, xe] = span(x);
  const auto [ob, oe] = span(out);
  const auto [db, de] = span(delta);
  DSA_CHECK((oe <= xb || xe <= ob) && (oe <= db || de <= ob),
            "add_rms_norm: out must not overlap x or delta (x {}, delta {}, out {})", x.str(), delta.str(), out.str());
}

void add_rows_cpu(const Tensor& x, const Tensor& delta) {
  float* a = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) a[i] += load_f(delta.raw(), delta.dtype(), i);
}

void dispatch(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
              const NormParams& p, bool layer, const Tensor& delta = Tensor()) {
  Checked c = check_args(op, x, weight, bias, out, p);
  if (delta.defined()) check_add(x, delta, out);
  if (!x.device().is_cuda()) {
    if (delta.defined()) add_rows_cpu(x, delta);
    return norm_rows_cpu(c, weight, bias, p.eps, layer);
  }
#ifdef DSA_WITH_CUDA
  cuda::RowNormArgs a{};
  a.x = c.x.base;
  a.delta = delta.defined() ? delta.raw() : nullptr;
  a.delta_dtype = delta.defined() ? delta.dtype() : DType::F32;
  a.out = c.out.base;
  a.weight = weight.defined() ? weight.raw() : nullptr;
  a.bias = bias.defined() ? bias.raw() : nullptr;
  a.rows = c.x.rows;
  a.cols = c.x.cols;
  a.x_row_stride = c.x.row_stride;
  a.out_row_stride = c.out.row_stride;
  a.x_dtype = c.x.dtype;
  a.out_dtype = c.out.dtype;
  a.weight_dtype = weight.defined() ? weight.dtype() : DType::F32;
  a.bias_dtype = bias.defined() ? bias.dtype() : DType::F32;
  a.eps = p.eps;
  a.layer_norm = layer;
  cuda_launch::set_device(x.device().index);
  cuda::row_norm(a);
#else
  fail("{}: tensors are on {} but this build has no CUDA", op, x.device().str());
#endif
}

}  // namespace

void rms_norm_cpu(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p) {
  Checked c = check_args("rms_norm", x, weight, Tensor(), out, p);
  DSA_CHECK(!x.device().is_cuda(), "rms_norm_cpu: tensors must be on the CPU, got {}", x.device().str());
  norm_rows_cpu(c, weight, Tensor(), p.eps, false);
}

void layer_norm_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                    const NormParams& p) {
  Checked c = check_args("layer_norm", x, weight, bias, out, p);
  DSA_CHECK(!x.device().is_cuda(), "layer_norm_cpu: tensors must be on the CPU, got {}", x.device().str());
  norm_rows_cpu(c, weight, bias, p.eps, true);
}

void add_rms_norm_cpu(const Tensor& x, const Tensor& delta, const Tensor& weight, const Tensor& out,
                      const NormParams& p) {
  Checked c = check_args("add_rms_norm", x, weight, Tensor(), out, p);
  check_add(x, delta, out);
  DSA_CHECK(!x.device().is_cuda(), "add_rms_norm_cpu: tensors must be on the CPU, got {}", x.device().str());
  add_rows_cpu(x, delta);
  norm_rows_cpu(c, weight, Tensor(), p.eps, false);
}

void add_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight, const Tensor& out, const NormParams& p) {
  dispatch("add_rms_norm", x, weight, Tensor(), out, p, false, delta);
}

void rms_norm(const Tensor& x, const Tensor& weight, const Tensor& out, const NormParams& p) {
  dispatch("rms_norm", x, weight, Tensor(), out, p, false);
}

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out, const NormParams& p) {
  dispatch("layer_norm", x, weight, bias, out, p, true);
}

}  // namespace dsa::ops
