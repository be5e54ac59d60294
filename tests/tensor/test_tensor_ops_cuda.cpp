// CUDA kernels of ops/tensor against the CPU reference (test_tensor_ops.cpp checks that one by
// hand) on fresh random inputs. Both sides start from the same poisoned (0xFF = NaN) buffers and
// run the op on the same views, so every byte outside the view must stay poison on both and every
// byte inside must be written. copy_cast, add_into and embed_rows are exact (bitwise equal);
// head_matmul sums in another rounding order (fused multiply-add), so it gets a tolerance, and
// NaN never passes (expect_close rejects non-finite values).
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "dsa/ops/tensor/tensor_ops.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

const Device kGpu = Device::cuda(0);

// The same view (shape, strides, byte offset) over another storage of the same size.
Tensor same_view(const Tensor& view, const Tensor& base_of_view, const Tensor& other_base) {
  const size_t off =
      static_cast<size_t>(static_cast<const char*>(view.raw()) - static_cast<const char*>(base_of_view.raw()));
  return Tensor::from_blob(static_cast<char*>(other_base.raw()) + off, view.shape(), view.dtype(), other_base.device(),
                           view.strides());
}

// Byte-identical contiguous tensors (same shape and dtype); reports the first differing element.
void expect_bitwise(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  Tensor g = gpu.to(Device::cpu());
  ASSERT_EQ(g.shape(), cpu.shape()) << what;
  const size_t es = dtype_size(cpu.dtype());
  for (int64_t i = 0; i < cpu.numel(); ++i)
    if (std::memcmp(static_cast<const char*>(g.raw()) + i * es, static_cast<const char*>(cpu.raw()) + i * es, es)) {
      ADD_FAILURE() << what << ": element " << i << " differs: cuda " << at(g, i) << " cpu " << at(cpu, i);
      return;
    }
}

size_t nan_count(const Tensor& t) {
  Tensor c = t.to(Device::cpu());
  size_t n = 0;
  for (int64_t i = 0; i < c.numel(); ++i) n += std::isnan(at(c, i));
  return n;
}

// copy_cast of `src_view` (a view of src_base) into `dst_view` (a view of a poisoned dst_base),
// on both devices; the whole dst buffers must match bit for bit, and exactly the elements outside
// the view stay NaN.
void copy_case(const Tensor& src_base, const Tensor& src_view, const Tensor& dst_base, const Tensor& dst_view,
               const std::string& what) {
  Tensor dcpu = dst_base;
  poison(dcpu);
  Tensor sg = src_base.to(kGpu), dg = Tensor::empty(dst_base.shape(), dst_base.dtype(), kGpu);
  poison(dg);
  copy_cast(dst_view, src_view);
  copy_cast(same_view(dst_view, dst_base, dg), same_view(src_view, src_base, sg));
  expect_bitwise(dg, dcpu, what);
  EXPECT_EQ(nan_count(dg), static_cast<size_t>(dst_base.numel() - dst_view.numel())) << what;
}

}  // namespace

TEST(ModelopsTensorOps, CudaCopyCastViews) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (DType sd : {DType::F32, DType::BF16})
    for (DType dd : {DType::F32, DType::BF16}) {
      const std::string dts = fmt::format("{}->{}", dtype_name(sd), dtype_name(dd));
      // contiguous 4-d, odd sizes
      {
        Tensor s = random_act({3, 5, 7, 9}, sd, rng), d = Tensor::empty({3, 5, 7, 9}, dd);
        copy_case(s, s, d, d, "contiguous 4-d " + dts);
      }
      // slice of the last dim into a slice of the middle dim (GLM's q_rope -> padded q)
      {
        Tensor s = random_act({5, 3, 256}, sd, rng), d = Tensor::empty({5, 8, 576}, dd);
        copy_case(s, s.slice(2, 192, 256), d, d.slice(1, 0, 3).slice(2, 512, 576), "q_rope into padded q " + dts);
      }
      // select (drops a dim) into a 2-d slice; T = 1 rows
      {
        Tensor s = random_act({1, 4, 33}, sd, rng), d = Tensor::empty({1, 40}, dd);
        copy_case(s, s.select(1, 2), d, d.slice(1, 3, 36), "select, T=1 " + dts);
      }
      // transposed source (strides from from_blob), 4-d with a size-1 dim, 1-d, empty
      {
        Tensor s = random_act({6, 11}, sd, rng), d = Tensor::empty({11, 6}, dd);
        Tensor st = Tensor::from_blob(s.raw(), {11, 6}, sd, Device::cpu(), {1, 11});
        copy_case(s, st, d, d, "transposed " + dts);
      }
      {
        Tensor s = random_act({2, 1, 3, 130}, sd, rng), d = Tensor::empty({2, 1, 3, 131}, dd);
        copy_case(s, s.slice(3, 0, 129), d, d.slice(3, 2, 131), "4-d size-1 dim " + dts);
      }
      {
        Tensor s = random_act({1001}, sd, rng), d = Tensor::empty({1001}, dd);
        copy_case(s, s, d, d, "1-d " + dts);
      }
      {
        Tensor s = random_act({4, 8}, sd, rng), d = Tensor::empty({4, 8}, dd);
        copy_case(s, s.slice(0, 2, 2), d, d.slice(0, 1, 1), "empty " + dts);
      }
    }
  // cast() of a strided CUDA view gives a contiguous tensor on the GPU
  Tensor s = random_f32({4, 9}, rng);
  Tensor c = cast(s.to(kGpu).slice(1, 2, 7), DType::BF16);
  EXPECT_TRUE(c.device().is_cuda() && c.is_contiguous());
  expect_bitwise(c, cast(s.slice(1, 2, 7), DType::BF16), "cast of a strided view");
  // devices must agree
  EXPECT_NE(error_of([&] { copy_cast(Tensor::empty({4, 9}, DType::F32, kGpu), s); }).find("different devices"),
            std::string::npos);
}

TEST(ModelopsTensorOps, CudaAddInto) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (DType xd : {DType::F32, DType::BF16})
    for (Shape shape : {Shape{1, 1}, Shape{37, 6144}, Shape{3, 100003}, Shape{0, 5}}) {
      Tensor acc = random_f32(shape, rng, 3.f), x = random_act(shape, xd, rng);
      Tensor ag = acc.to(kGpu), xg = x.to(kGpu);
      add_into(acc, x);
      add_into(ag, xg);
      const std::string what = fmt::format("add_into {} {}", dtype_name(xd), shape_str(shape));
      expect_bitwise(ag, acc, what);
      EXPECT_EQ(nan_count(ag), 0u) << what;
    }
  Tensor a = Tensor::zeros({4}, DType::F32, kGpu);
  EXPECT_NE(error_of([&] { add_into(a, Tensor::zeros({4}, DType::F32)); }).find("different devices"),
            std::string::npos);
  EXPECT_NE(error_of([&] { add_into(a, Tensor::zeros({5}, DType::F32, kGpu)); }).find("same shape"),
            std::string::npos);
}

namespace {

// embed_rows of a random [V][D] table for T ids (every 5th id, from t = 2, out of range when
// `with_bad`), R = 0: 2-d out [T][D], else [T][R][D]. The CUDA out starts `out_elem_offset`
// elements into a poisoned buffer (an offset of 1 breaks the 16-byte alignment: scalar path),
// and must equal the CPU reference bit for bit, with zero rows for the bad ids and every element
// written.
void embed_case(DType td, DType od, int64_t V, int64_t T, int64_t R, int64_t D, bool with_bad, Rng& rng,
                int64_t out_elem_offset = 0) {
  const std::string what = fmt::format("embed_rows table {} out {} T={} R={} D={} offset {}", dtype_name(td),
                                       dtype_name(od), T, R, D, out_elem_offset);
  Tensor table = random_act({V, D}, td, rng);
  Tensor ids = Tensor::empty({T}, DType::I32), good = Tensor::empty({T}, DType::I32);
  const int32_t bad[] = {-1, static_cast<int32_t>(V), INT_MAX, INT_MIN};
  std::vector<bool> is_bad(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    is_bad[t] = with_bad && t % 5 == 2;
    const int32_t id = static_cast<int32_t>(rng.randint(0, V - 1));
    ids.data<int32_t>()[t] = is_bad[t] ? bad[(t / 5) % 4] : id;
    good.data<int32_t>()[t] = is_bad[t] ? 0 : id;
  }
  const Shape oshape = R == 0 ? Shape{T, D} : Shape{T, R, D};
  const int64_t row = (R == 0 ? 1 : R) * D;
  Tensor ref = Tensor::empty(oshape, od);
  embed_rows(table, good, ref);  // the CPU refuses bad ids: reference rows for id 0, zeroed below
  for (int64_t t = 0; t < T; ++t)
    if (is_bad[t]) std::memset(static_cast<char*>(ref.raw()) + t * row * dtype_size(od), 0, row * dtype_size(od));
  Tensor buf = Tensor::empty({T * row + out_elem_offset + 8}, od, kGpu);
  poison(buf);
  Tensor out = Tensor::from_blob(static_cast<char*>(buf.raw()) + out_elem_offset * dtype_size(od), oshape, od, kGpu);
  embed_rows(table.to(kGpu), ids.to(kGpu), out);
  expect_bitwise(out, ref, what);
  EXPECT_EQ(nan_count(out), 0u) << what;
  EXPECT_EQ(nan_count(buf), static_cast<size_t>(out_elem_offset + 8)) << what << ": written outside out";
}

}  // namespace

TEST(ModelopsTensorOps, CudaEmbedRowsWithBadIds) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (DType td : {DType::F32, DType::BF16})
    for (DType od : {DType::F32, DType::BF16})
      for (int64_t T : {1, 37})
        for (int64_t R : {0, 1, 3}) embed_case(td, od, 1000, T, R, T == 1 ? 1 : 777, T > 1, rng);
  EXPECT_NE(error_of([&] {
              embed_rows(Tensor::zeros({4, 2}, DType::F32, kGpu), Tensor::zeros({1}, DType::I32),
                         Tensor::empty({1, 2}, DType::F32, kGpu));
            }).find("different devices"),
            std::string::npos);
}

// The vectorized path (16-byte aligned table and out, D % 8 == 0: 8 columns per thread) and the
// scalar one (odd D or a misaligned out), at decode sizes: V4's embedding (bf16 table -> f32
// [1][4][4096]) and its head-row gather (f32 X rows [hc * d] -> f32), one and a few tokens, plus
// a token count above the 65535 grid rows (the y-stride loop).
TEST(ModelopsTensorOps, CudaEmbedRowsDecodeSizes) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (auto [td, od] : {std::pair{DType::BF16, DType::F32}, {DType::F32, DType::F32}, {DType::BF16, DType::BF16},
                        {DType::F32, DType::BF16}})
    for (int64_t T : {1, 3})
      for (int64_t R : {0, 1, 4})
        for (int64_t D : {8, 4096, 4104, 16384, 4099, 1, 15}) {
          embed_case(td, od, 50, T, R, D, T > 2, rng);
          if (D % 8 == 0 && T == 1) embed_case(td, od, 50, T, R, D, false, rng, 1);  // misaligned out: scalar
        }
  embed_case(DType::F32, DType::F32, 300, 70000, 1, 8, true, rng);
  embed_case(DType::BF16, DType::F32, 300, 70000, 0, 9, true, rng);
}

namespace {

// head_matmul on views: x = x_base.slice(1, 0, Hx).slice(2, kx0, kx0 + K) of [T][Hxb][Kb],
// out = out_base.slice(1, 0, H).slice(2, n0, n0 + N) of poisoned [T][Hob][Nb]. `check_tokens`
// limits the CPU reference to the first and last few tokens (large T).
void head_case(int64_t T, int64_t H, int64_t N, int64_t K, int64_t Hxb, int64_t Kb, int64_t kx0, int64_t Hob,
               int64_t Nb, int64_t n0, DType xd, DType wd, DType od, Rng& rng, int64_t check_tokens = 0) {
  const std::string what = fmt::format("head_matmul T={} H={} N={} K={} x {} w {} out {}", T, H, N, K, dtype_name(xd),
                                       dtype_name(wd), dtype_name(od));
  Tensor xb = random_act({T, Hxb, Kb}, xd, rng), w = random_act({H, N, K}, wd, rng, 0.1f);
  Tensor xbg = xb.to(kGpu), wg = w.to(kGpu), obg = Tensor::empty({T, Hob, Nb}, od, kGpu);
  poison(obg);
  auto xv = [&](const Tensor& b) { return b.slice(2, kx0, kx0 + K); };
  auto ov = [&](const Tensor& b) { return b.slice(1, 0, H).slice(2, n0, n0 + N); };
  head_matmul(xv(xbg), wg, ov(obg));
  Tensor got = obg.to(Device::cpu());

  // Reference over the checked tokens (all when check_tokens == 0).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (check_tokens == 0 || 2 * check_tokens >= T)
    ranges.push_back({0, T});
  else
    ranges = {{0, check_tokens}, {T - check_tokens, T}};
  const double tol = od == DType::BF16 ? 8e-3 : 1e-5 * (1.0 + std::sqrt(static_cast<double>(K)));
  for (auto [a, b] : ranges) {
    Tensor ref = Tensor::empty({b - a, Hob, Nb}, od);
    poison(ref);
    head_matmul(xv(xb.slice(0, a, b)), w, ov(ref));
    Tensor g = got.slice(0, a, b).contiguous();
    std::vector<float> gin, rin;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const int64_t n = i % Nb, h = (i / Nb) % Hob;
      const bool inside = h < H && n >= n0 && n < n0 + N;
      if (inside) {
        gin.push_back(at(g, i));
        rin.push_back(at(ref, i));
      } else if (!std::isnan(at(g, i))) {
        ADD_FAILURE() << what << ": element " << i << " outside the view was written";
        return;
      }
    }
    expect_close(gin, rin, tol, tol, what);
  }
}

// The CUDA routes: the SIMT kernel (DSA_HEAD_MATMUL=kernel), the default, where bf16 weights
// with <= 16 tokens and K % 8 == 0 go to the GEMV kernel and bf16 problems of >= 17 tokens with
// aligned strides to cuBLASLt, and the GEMV pinned (DSA_HEAD_MATMUL=gemv: a problem it refuses
// throws, so a case run under it proves that the GEMV kernel produced the result).
class ScopedRoute {
 public:
  explicit ScopedRoute(bool kernel_only) {
    if (kernel_only)
      setenv("DSA_HEAD_MATMUL", "kernel", 1);
    else
      unsetenv("DSA_HEAD_MATMUL");
  }
  explicit ScopedRoute(const char* force) { setenv("DSA_HEAD_MATMUL", force, 1); }
  ~ScopedRoute() { unsetenv("DSA_HEAD_MATMUL"); }
};

}  // namespace

TEST(ModelopsTensorOps, CudaHeadMatmulMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (bool kernel_only : {true, false}) {
    SCOPED_TRACE(kernel_only ? "route: SIMT kernel" : "route: default (cuBLASLt for large bf16)");
    const ScopedRoute route(kernel_only);
    for (DType xd : {DType::F32, DType::BF16})
      for (DType wd : {DType::F32, DType::BF16})
        for (DType od : {DType::F32, DType::BF16}) {
          head_case(3, 5, 70, 33, 5, 33, 0, 5, 70, 0, xd, wd, od, rng);       // odd everything, contiguous
          head_case(1, 2, 1, 1, 4, 3, 1, 3, 2, 1, xd, wd, od, rng);           // T = 1, N = K = 1, views
          head_case(0, 2, 8, 8, 2, 8, 0, 2, 8, 0, xd, wd, od, rng);           // no tokens
          head_case(17, 3, 64, 64, 3, 64, 0, 3, 64, 0, xd, wd, od, rng);      // T just above the GEMV route
          head_case(131, 4, 129, 97, 6, 100, 2, 5, 131, 1, xd, wd, od, rng);  // prefill tile, all tails
          head_case(40, 3, 64, 32, 4, 48, 8, 3, 80, 8, xd, wd, od, rng);      // aligned views (cuBLASLt if bf16)
          head_case(3, 3, 37, 64, 4, 72, 8, 3, 40, 2, xd, wd, od, rng);       // decode GEMV route if bf16 w: N tail
          head_case(8, 2, 33, 1024, 2, 1024, 0, 2, 33, 0, xd, wd, od, rng);   // GEMV, 8 tokens, largest K
        }
    // GLM shapes: W_UK q_nope [T][64 of 64][192 of 256] -> q [T][64 of 128][512 of 576], bf16 w
    // and f32 w; W_UV o [T][64 of 128][512] -> v [T][64][256].
    for (DType wd : {DType::F32, DType::BF16})
      for (int64_t T : {1, 4, 5, 300}) {
        head_case(T, 64, 512, 192, 64, 256, 0, 128, 576, 0, DType::BF16, wd, DType::BF16, rng);
        head_case(T, 64, 256, 512, 128, 512, 0, 64, 256, 0, DType::BF16, wd, DType::BF16, rng);
      }
    // Long prefills: checked on their first and last tokens.
    head_case(2048, 64, 512, 192, 64, 256, 0, 128, 576, 0, DType::BF16, DType::BF16, DType::BF16, rng, 3);
    head_case(2048, 64, 256, 512, 64, 512, 0, 64, 256, 0, DType::BF16, DType::BF16, DType::BF16, rng, 3);
  }
  // Both routes timed at GLM shapes (printed, not asserted).
  Tensor xall = random_bf16({2048, 64, 512}, rng).to(kGpu);
  for (bool kernel_only : {true, false})
    for (int64_t T : {1, 4, 64, 2048}) {
      const ScopedRoute route(kernel_only);
      for (auto [N, K] : {std::pair<int64_t, int64_t>{512, 192}, {256, 512}}) {
        Tensor x = xall.slice(0, 0, T).slice(2, 0, K), w = random_bf16({64, N, K}, rng).to(kGpu);
        Tensor o = Tensor::empty({T, 64, N}, DType::BF16, kGpu);
        head_matmul(x, w, o);
        (void)o.slice(0, 0, 1).to(Device::cpu());  // sync
        const int reps = 20;
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) head_matmul(x, w, o);
        (void)o.slice(0, 0, 1).to(Device::cpu());
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("[head_matmul cuda %s] T=%lld H=64 N=%lld K=%lld bf16: %.1f us, %.1f TFLOP/s\n",
                    kernel_only ? "kernel" : "default", static_cast<long long>(T), static_cast<long long>(N),
                    static_cast<long long>(K), us, 2.0 * T * 64 * N * K / us * 1e-6);
      }
    }
  EXPECT_NE(error_of([&] {
              head_matmul(Tensor::zeros({1, 2, 4}, DType::F32, kGpu), Tensor::zeros({2, 3, 4}, DType::F32),
                          Tensor::empty({1, 2, 3}, DType::F32, kGpu));
            }).find("different devices"),
            std::string::npos);
}

// The GEMV route pinned (DSA_HEAD_MATMUL=gemv), so each case below must be taken by it: any K %
// 8 == 0 (no shared-memory limit any more: 4096 and 4104 were refused before), T from 1 to 16,
// N tails, one and eight heads, x as aligned strided views (vector loads, bf16 and f32) and as
// misaligned ones (kx0 = 1: scalar loads), out strided into a poisoned buffer. Tolerance as for
// every head_matmul case: 8e-3 for bf16 out, 1e-5 (1 + sqrt K) for f32 out (the kernel's bound
// is 2 K 2^-24 sum |x w|, far below).
TEST(ModelopsTensorOps, CudaHeadMatmulGemvAnyK) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const ScopedRoute route("gemv");
  const DType B = DType::BF16, F = DType::F32;
  for (int64_t T : {1, 2, 3, 8, 16})
    for (int64_t K : {8, 200, 4096, 4104})
      for (int64_t H : {1, 8}) {
        const int64_t N = H == 1 ? 70 : 37;
        SCOPED_TRACE(fmt::format("T={} K={} H={}", T, K, H));
        for (DType xd : {B, F})
          for (DType od : {B, F})  // aligned strided x (row starts at multiples of 8 elements)
            head_case(T, H, N, K, H + 1, K + 8, 8, H + 1, N + 3, 1, xd, B, od, rng);
        head_case(T, H, N, K, H, K + 1, 1, H, N, 0, B, B, B, rng);  // misaligned x: scalar loads
        head_case(T, H, N, K, H, K + 1, 1, H, N, 0, F, B, F, rng);
      }
  // V4-Flash wo_a: x [T][8][4096] (a reshaped contiguous [T][8 * 4096]), w [8][1024][4096].
  for (int64_t T : {1, 5, 16}) head_case(T, 8, 1024, 4096, 8, 4096, 0, 8, 1024, 0, B, B, B, rng);
  // GLM W_UK and W_UV at decode sizes, strided as the model passes them.
  for (int64_t T : {1, 4, 9}) {
    head_case(T, 64, 512, 192, 64, 256, 0, 128, 576, 0, B, B, B, rng);
    head_case(T, 64, 256, 512, 128, 512, 0, 64, 256, 0, B, B, B, rng);
  }
  // N = 1 and N = 31..33 around one CTA's 32 rows; a single k-chunk.
  for (int64_t N : {1, 31, 32, 33}) head_case(2, 3, N, 8, 3, 8, 0, 3, N, 0, B, B, F, rng);
  // What the route refuses (then the other routes run it: see CudaHeadMatmulMatchesCpu).
  const auto refused = [&](const Shape& xs, const Shape& ws, DType wd) {
    Tensor x = Tensor::zeros(xs, B, kGpu), w = Tensor::zeros(ws, wd, kGpu);
    Tensor o = Tensor::empty({xs[0], ws[0], ws[1]}, B, kGpu);
    return error_of([&] { head_matmul(x, w, o); }).find("GEMV route does not take") != std::string::npos;
  };
  EXPECT_TRUE(refused({17, 2, 64}, {2, 8, 64}, B));   // > 16 tokens
  EXPECT_TRUE(refused({2, 2, 12}, {2, 8, 12}, B));    // K % 8 != 0
  EXPECT_TRUE(refused({2, 2, 64}, {2, 8, 64}, F));    // f32 weights
  {  // taken: no error with the route pinned
    Tensor x = Tensor::zeros({16, 2, 64}, B, kGpu), w = Tensor::zeros({2, 8, 64}, B, kGpu);
    Tensor o = Tensor::empty({16, 2, 8}, B, kGpu);
    EXPECT_NO_THROW(head_matmul(x, w, o));
  }
}
