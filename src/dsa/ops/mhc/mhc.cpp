#include "dsa/ops/mhc/mhc.h"

#include <cmath>
#include <vector>

#include "dsa/ops/mhc/mhc_math.h"
#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/mhc/mhc_cuda.h"
#include "dsa/core/cuda_launch.h"
#endif

namespace dsa::ops {

void MhcParams::validate() const {
  DSA_CHECK(hc_mult >= 1 && hc_mult <= kMhcMaxHc, "MhcParams.hc_mult must be in [1, {}], got {}", kMhcMaxHc, hc_mult);
  DSA_CHECK(sinkhorn_iters >= 1, "MhcParams.sinkhorn_iters must be >= 1, got {}", sinkhorn_iters);
  DSA_CHECK(std::isfinite(hc_eps) && hc_eps >= 0.f, "MhcParams.hc_eps must be finite and >= 0, got {}", hc_eps);
  DSA_CHECK(std::isfinite(norm_eps) && norm_eps >= 0.f, "MhcParams.norm_eps must be finite and >= 0, got {}", norm_eps);
}

namespace {

void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape, bool activation,
                  const Device& dev) {
  DSA_CHECK(t.defined(), "{}: {} is undefined", op, name);
  if (activation)
    check_activation_dtype(fmt::format("{}: {}", op, name), t.dtype());
  else
    DSA_CHECK(t.dtype() == DType::F32, "{}: {} must be f32, got {}", op, name, dtype_name(t.dtype()));
  DSA_CHECK(t.shape() == shape, "{}: {} must have shape {}, got {}", op, name, shape_str(shape), shape_str(t.shape()));
  DSA_CHECK(t.is_contiguous(), "{}: {} must be contiguous", op, name);
  DSA_CHECK(t.device() == dev, "{}: {} on {} but X on {}", op, name, t.device().str(), dev.str());
}

struct PreShape {
  int64_t T, d;
  int hc, n_mix;
};

PreShape check_pre(const char* op, const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale,
                   const MhcParams& p, const Tensor& mix, const Tensor& y, const Tensor* post, const Tensor* comb,
                   bool head, bool y_optional = false) {
  p.validate();
  DSA_CHECK(X.defined() && X.dim() == 3, "{}: X must be [T][hc][d], got {}", op, X.defined() ? X.str() : "undefined");
  PreShape s{X.size(0), X.size(2), p.hc_mult, head ? p.hc_mult : (2 + p.hc_mult) * p.hc_mult};
  DSA_CHECK(X.size(1) == p.hc_mult, "{}: X has {} streams but MhcParams.hc_mult is {}", op, X.size(1), p.hc_mult);
  DSA_CHECK(s.d >= 1, "{}: hidden size (X dimension 2) must be >= 1, got {}", op, s.d);
  const Device dev = X.device();
  check_tensor(op, "X", X, X.shape(), true, dev);
  check_tensor(op, "fn", fn, {s.n_mix, s.hc * s.d}, false, dev);
  check_tensor(op, "base", base, {s.n_mix}, false, dev);
  check_tensor(op, "scale", scale, {head ? 1 : 3}, false, dev);
  check_tensor(op, "mix", mix, {s.T, s.n_mix}, false, dev);
  if (!y_optional || y.defined()) check_tensor(op, "y", y, {s.T, s.d}, true, dev);
  if (post) check_tensor(op, "post", *post, {s.T, s.hc}, false, dev);
  if (comb) check_tensor(op, "comb", *comb, {s.T, s.hc, s.hc}, false, dev);
  return s;
}

// Mix logits of token t: (fn . x) * rsqrt(mean(x^2) + eps), dot products in double.
void mix_cpu(const Tensor& X, const Tensor& fn, int64_t t, const PreShape& s, float norm_eps, float* mix) {
  const int64_t n = s.hc * s.d;
  const void* xt = static_cast<const char*>(X.raw()) + t * n * dtype_size(X.dtype());
  std::vector<double> x(static_cast<size_t>(n));
  double ss = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    x[static_cast<size_t>(k)] = load_f(xt, X.dtype(), k);
    ss += x[static_cast<size_t>(k)] * x[static_cast<size_t>(k)];
  }
  const double rs = 1.0 / std::sqrt(ss / static_cast<double>(n) + norm_eps);
  const float* f = fn.data<float>();
  for (int r = 0; r < s.n_mix; ++r) {
    double acc = 0.0;
    for (int64_t k = 0; k < n; ++k) acc += static_cast<double>(f[r * n + k]) * x[static_cast<size_t>(k)];
    mix[r] = static_cast<float>(acc * rs);
  }
}

// y[t] = sum_i pre[i] * X[t][i]
void collapse_cpu(const Tensor& X, const Tensor& y, int64_t t, const PreShape& s, const float* pre) {
  const void* xt = static_cast<const char*>(X.raw()) + t * s.hc * s.d * dtype_size(X.dtype());
  void* yt = static_cast<char*>(y.raw()) + t * s.d * dtype_size(y.dtype());
  for (int64_t k = 0; k < s.d; ++k) {
    double acc = 0.0;
    for (int i = 0; i < s.hc; ++i) acc += static_cast<double>(pre[i]) * load_f(xt, X.dtype(), i * s.d + k);
    store_f(yt, y.dtype(), k, static_cast<float>(acc));
  }
}

// The extra arguments of the fused norm variants.
void check_norm(const char* op, const PreShape& s, const Tensor& X, const Tensor& w, const NormParams& np,
                const Tensor& yn) {
  np.validate();
  check_tensor(op, "yn", yn, {s.T, s.d}, true, X.device());
  if (w.defined()) check_tensor(op, "norm_weight", w, {s.d}, true, X.device());
}

void check_post(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& out) {
  const char* op = "mhc_post";
  DSA_CHECK(X.defined() && X.dim() == 3, "{}: X must be [T][hc][d], got {}", op, X.defined() ? X.str() : "undefined");
  const int64_t T = X.size(0), hc = X.size(1), d = X.size(2);
  DSA_CHECK(hc >= 1 && hc <= kMhcMaxHc, "{}: X has {} streams, supported 1..{}", op, hc, kMhcMaxHc);
  const Device dev = X.device();
  check_tensor(op, "X", X, X.shape(), true, dev);
  check_tensor(op, "f", f, {T, d}, true, dev);
  check_tensor(op, "post", post, {T, hc}, false, dev);
  check_tensor(op, "comb", comb, {T, hc, hc}, false, dev);
  check_tensor(op, "out", out, X.shape(), true, dev);
}

}  // namespace

void mhc_pre_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                 const Tensor& mix, const Tensor& y, const Tensor& post, const Tensor& comb) {
  PreShape s = check_pre("mhc_pre", X, fn, base, scale, p, mix, y, &post, &comb, false);
  DSA_CHECK(!X.device().is_cuda(), "mhc_pre_cpu: tensors must be on the CPU, got {}", X.device().str());
  for (int64_t t = 0; t < s.T; ++t) {
    float* m = mix.data<float>() + t * s.n_mix;
    mix_cpu(X, fn, t, s, p.norm_eps, m);
    float pre[kMhcMaxHc];
    mhc_split_sinkhorn(m, scale.data<float>(), base.data<float>(), s.hc, p.sinkhorn_iters, p.hc_eps, pre,
                       post.data<float>() + t * s.hc, comb.data<float>() + t * s.hc * s.hc);
    collapse_cpu(X, y, t, s, pre);
  }
}

void mhc_head_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                  const Tensor& mix, const Tensor& y) {
  PreShape s = check_pre("mhc_head", X, fn, base, scale, p, mix, y, nullptr, nullptr, true);
  DSA_CHECK(!X.device().is_cuda(), "mhc_head_cpu: tensors must be on the CPU, got {}", X.device().str());
  for (int64_t t = 0; t < s.T; ++t) {
    float* m = mix.data<float>() + t * s.n_mix;
    mix_cpu(X, fn, t, s, p.norm_eps, m);
    float pre[kMhcMaxHc];
    mhc_head_weights(m, scale.data<float>(), base.data<float>(), s.hc, p.hc_eps, pre);
    collapse_cpu(X, y, t, s, pre);
  }
}

void mhc_pre_norm_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                      const Tensor& norm_weight, const NormParams& np, const Tensor& mix, const Tensor& y,
                      const Tensor& yn, const Tensor& post, const Tensor& comb) {
  PreShape s = check_pre("mhc_pre_norm", X, fn, base, scale, p, mix, y, &post, &comb, false, true);
  check_norm("mhc_pre_norm", s, X, norm_weight, np, yn);
  Tensor yy = y.defined() ? y : Tensor::empty({s.T, s.d}, yn.dtype(), X.device());
  mhc_pre_cpu(X, fn, base, scale, p, mix, yy, post, comb);
  rms_norm_cpu(yy, norm_weight, yn, np);
}

void mhc_head_norm_cpu(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale,
                       const MhcParams& p, const Tensor& norm_weight, const NormParams& np, const Tensor& mix,
                       const Tensor& y, const Tensor& yn) {
  PreShape s = check_pre("mhc_head_norm", X, fn, base, scale, p, mix, y, nullptr, nullptr, true, true);
  check_norm("mhc_head_norm", s, X, norm_weight, np, yn);
  Tensor yy = y.defined() ? y : Tensor::empty({s.T, s.d}, yn.dtype(), X.device());
  mhc_head_cpu(X, fn, base, scale, p, mix, yy);
  rms_norm_cpu(yy, norm_weight, yn, np);
}

void mhc_post_cpu(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& out) {
  check_post(f, X, post, comb, out);
  DSA_CHECK(!X.device().is_cuda(), "mhc_post_cpu: tensors must be on the CPU, got {}", X.device().str());
  const int64_t T = X.size(0), hc = X.size(1), d = X.size(2);
  for (int64_t t = 0; t < T; ++t) {
    const float* pt = post.data<float>() + t * hc;
    const float* ct = comb.data<float>() + t * hc * hc;
    const int64_t xo = t * hc * d;
    for (int64_t k = 0; k < d; ++k) {
      double xs[kMhcMaxHc];  // read every input stream before writing (out may be X)
      for (int64_t i = 0; i < hc; ++i) xs[i] = load_f(X.raw(), X.dtype(), xo + i * d + k);
      const double fv = load_f(f.raw(), f.dtype(), t * d + k);
      for (int64_t j = 0; j < hc; ++j) {
        double acc = static_cast<double>(pt[j]) * fv;
        for (int64_t i = 0; i < hc; ++i) acc += static_cast<double>(ct[i * hc + j]) * xs[i];
        store_f(out.raw(), out.dtype(), xo + j * d + k, static_cast<float>(acc));
      }
    }
  }
}

namespace {
#ifdef DSA_WITH_CUDA
// The kernel arguments of a pre variant, all but the split-K factor and its scratch.
cuda::MhcPreArgs pre_args(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale,
                          const MhcParams& p, const Tensor& mix, const Tensor& y, const Tensor* post, const Tensor* comb,
                          const PreShape& s, const Tensor& norm_weight, const NormParams* np, const Tensor& yn) {
  cuda::MhcPreArgs a{};
  a.X = X.raw();
  a.x_dtype = X.dtype();
  a.fn = fn.data<float>();
  a.base = base.data<float>();
  a.scale = scale.data<float>();
  a.mix = mix.data<float>();
  a.y = y.defined() ? y.raw() : nullptr;
  a.y_dtype = y.defined() ? y.dtype() : yn.dtype();
  a.post = post ? post->data<float>() : nullptr;
  a.comb = comb ? comb->data<float>() : nullptr;
  a.head = post == nullptr;
  a.tokens = s.T;
  a.d = s.d;
  a.hc = s.hc;
  a.n_mix = s.n_mix;
  a.iters = p.sinkhorn_iters;
  a.hc_eps = p.hc_eps;
  a.norm_eps = p.norm_eps;
  if (yn.defined()) {
    a.yn = yn.raw();
    a.yn_dtype = yn.dtype();
    a.norm_w = norm_weight.defined() ? norm_weight.raw() : nullptr;
    a.norm_w_dtype = norm_weight.defined() ? norm_weight.dtype() : DType::F32;
    a.rms_eps = np->eps;
  }
  return a;
}
#endif

// The CUDA path of all four pre variants: post/comb null for the head, yn undefined without the
// fused norm. The split-K partials live in a temporary (the caching allocator hands it back
// after the kernels are enqueued; stream order keeps the reuse safe).
void pre_cuda(const char* op, const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale,
              const MhcParams& p, const Tensor& mix, const Tensor& y, const Tensor* post, const Tensor* comb,
              const PreShape& s, const Tensor& norm_weight, const NormParams* np, const Tensor& yn) {
#ifdef DSA_WITH_CUDA
  cuda_launch::set_device(X.device().index);
  if (yn.defined() && s.d > cuda::kMhcNormMaxD) {  // too long for the fused row: the two ops
    Tensor yy = y.defined() ? y : Tensor::empty({s.T, s.d}, yn.dtype(), X.device());
    pre_cuda(op, X, fn, base, scale, p, mix, yy, post, comb, s, Tensor(), nullptr, Tensor());
    rms_norm(yy, norm_weight, yn, *np);
    return;
  }
  cuda::MhcPreArgs a = pre_args(X, fn, base, scale, p, mix, y, post, comb, s, norm_weight, np, yn);
  a.splits = cuda::mhc_mix_splits(s.T, s.n_mix, static_cast<int64_t>(s.hc) * s.d);
  Tensor part = Tensor::empty({s.T * (s.n_mix + 1) * a.splits}, DType::F32, X.device());
  a.part = part.data<float>();
  cuda::mhc_pre(a);
#else
  (void)X, (void)fn, (void)base, (void)scale, (void)p, (void)mix, (void)y, (void)post, (void)comb, (void)s;
  (void)norm_weight, (void)np, (void)yn;
  fail("{}: tensors are on {} but this build has no CUDA", op, X.device().str());
#endif
}

}  // namespace

void mhc_pre(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
             const Tensor& mix, const Tensor& y, const Tensor& post, const Tensor& comb) {
  if (!X.device().is_cuda()) return mhc_pre_cpu(X, fn, base, scale, p, mix, y, post, comb);
  PreShape s = check_pre("mhc_pre", X, fn, base, scale, p, mix, y, &post, &comb, false);
  pre_cuda("mhc_pre", X, fn, base, scale, p, mix, y, &post, &comb, s, Tensor(), nullptr, Tensor());
}

void mhc_head(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
              const Tensor& mix, const Tensor& y) {
  if (!X.device().is_cuda()) return mhc_head_cpu(X, fn, base, scale, p, mix, y);
  PreShape s = check_pre("mhc_head", X, fn, base, scale, p, mix, y, nullptr, nullptr, true);
  pre_cuda("mhc_head", X, fn, base, scale, p, mix, y, nullptr, nullptr, s, Tensor(), nullptr, Tensor());
}

void mhc_pre_norm(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                  const Tensor& norm_weight, const NormParams& np, const Tensor& mix, const Tensor& y, const Tensor& yn,
                  const Tensor& post, const Tensor& comb) {
  if (!X.device().is_cuda()) return mhc_pre_norm_cpu(X, fn, base, scale, p, norm_weight, np, mix, y, yn, post, comb);
  PreShape s = check_pre("mhc_pre_norm", X, fn, base, scale, p, mix, y, &post, &comb, false, true);
  check_norm("mhc_pre_norm", s, X, norm_weight, np, yn);
  pre_cuda("mhc_pre_norm", X, fn, base, scale, p, mix, y, &post, &comb, s, norm_weight, &np, yn);
}

void mhc_head_norm(const Tensor& X, const Tensor& fn, const Tensor& base, const Tensor& scale, const MhcParams& p,
                   const Tensor& norm_weight, const NormParams& np, const Tensor& mix, const Tensor& y,
                   const Tensor& yn) {
  if (!X.device().is_cuda()) return mhc_head_norm_cpu(X, fn, base, scale, p, norm_weight, np, mix, y, yn);
  PreShape s = check_pre("mhc_head_norm", X, fn, base, scale, p, mix, y, nullptr, nullptr, true, true);
  check_norm("mhc_head_norm", s, X, norm_weight, np, yn);
  pre_cuda("mhc_head_norm", X, fn, base, scale, p, mix, y, nullptr, nullptr, s, norm_weight, &np, yn);
}

void mhc_post(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& out) {
  if (!X.device().is_cuda()) return mhc_post_cpu(f, X, post, comb, out);
  check_post(f, X, post, comb, out);
#ifdef DSA_WITH_CUDA
  cuda::MhcPostArgs a{};
  a.f = f.raw();
  a.f_dtype = f.dtype();
  a.X = X.raw();
  a.x_dtype = X.dtype();
  a.post = post.data<float>();
  a.comb = comb.data<float>();
  a.out = out.raw();
  a.out_dtype = out.dtype();
  a.tokens = X.size(0);
  a.d = X.size(2);
  a.hc = static_cast<int>(X.size(1));
  cuda_launch::set_device(X.device().index);
  cuda::mhc_post(a);
#else
  fail("mhc_post: tensors are on {} but this build has no CUDA", X.device().str());
#endif
}

void mhc_post_pre_norm(const Tensor& f, const Tensor& X, const Tensor& post, const Tensor& comb, const Tensor& fn,
                       const Tensor& base, const Tensor& scale, const MhcParams& p, const Tensor& norm_weight,
                       const NormParams& np, const Tensor& mix, const Tensor& y, const Tensor& yn,
                       const Tensor& post_out, const Tensor& comb_out) {
  check_post(f, X, post, comb, X);
  PreShape s = check_pre("mhc_post_pre_norm", X, fn, base, scale, p, mix, y, &post_out, &comb_out, false, true);
  check_norm("mhc_post_pre_norm", s, X, norm_weight, np, yn);
#ifdef DSA_WITH_CUDA
  if (X.device().is_cuda() && s.hc == 4 && s.d <= cuda::kMhcNormMaxD) {
    cuda_launch::set_device(X.device().index);
    cuda::MhcPreArgs a = pre_args(X, fn, base, scale, p, mix, y, &post_out, &comb_out, s, norm_weight, &np, yn);
    a.splits = cuda::mhc_post_mix_splits(s.d);
    Tensor part = Tensor::empty({s.T * (s.n_mix + 1) * a.splits}, DType::F32, X.device());
    a.part = part.data<float>();
    const cuda::MhcPostIn in{f.raw(), f.dtype(), post.data<float>(), comb.data<float>(), X.raw()};
    cuda::mhc_post_pre(in, a);
    return;
  }
#endif
  mhc_post(f, X, post, comb, X);
  mhc_pre_norm(X, fn, base, scale, p, norm_weight, np, mix, y, yn, post_out, comb_out);
}

}  // namespace dsa::ops
