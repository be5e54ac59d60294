#include "dsa/ops/compressor/compressor_batch.h"

#include <vector>

#include "dsa/core/error.h"
#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/compressor/compressor_cuda.h"
#include "dsa/core/cuda_launch.h"
#endif

namespace dsa::ops {

size_t compressor_state_bytes(const CompressorConfig& cfg) {
  return 2 * static_cast<size_t>(cfg.coff() * cfg.ratio) * static_cast<size_t>(cfg.width()) * sizeof(float);
}

namespace {

void check_i32(const char* name, const Tensor& t, int64_t n, const Device& dev) {
  DSA_CHECK(t.defined() && t.dtype() == DType::I32 && t.dim() == 1 && t.size(0) == n && t.is_contiguous(),
            "compressor_forward_batch: {} must be contiguous i32 [{}], got {}", name, n,
            t.defined() ? t.str() : "undefined");
  DSA_CHECK(t.device() == dev, "compressor_forward_batch: {} is on {}, kv on {}", name, t.device().str(), dev.str());
}

}  // namespace

void compressor_forward_batch(const CompressorConfig& cfg, const CompressorBatch& b, const Tensor& kv,
                              const Tensor& score, const Tensor& ape, const Tensor& norm_weight,
                              const Tensor& entries_out) {
  cfg.validate();
  const int64_t m = cfg.ratio, d = cfg.head_dim, W = cfg.width();
  DSA_CHECK(kv.defined() && kv.dim() == 2 && kv.size(1) == W && kv.is_contiguous(),
            "compressor_forward_batch: kv must be contiguous [T][{}], got {}", W, kv.defined() ? kv.str() : "undefined");
  const int64_t T = kv.size(0);
  const Device dev = kv.device();
  DSA_CHECK(score.defined() && score.shape() == kv.shape() && score.is_contiguous() && score.device() == dev,
            "compressor_forward_batch: score must be contiguous {} on {}", shape_str(kv.shape()), dev.str());
  check_activation_dtype("compressor_forward_batch: kv", kv.dtype());
  check_activation_dtype("compressor_forward_batch: score", score.dtype());
  DSA_CHECK(ape.defined() && ape.dtype() == DType::F32 && ape.shape() == (Shape{m, W}) && ape.device() == dev,
            "compressor_forward_batch: ape must be f32 [{}][{}] on {}", m, W, dev.str());
  DSA_CHECK(norm_weight.defined() && norm_weight.shape() == (Shape{d}) && norm_weight.device() == dev,
            "compressor_forward_batch: norm_weight must be [{}] on {}", d, dev.str());
  check_activation_dtype("compressor_forward_batch: norm_weight", norm_weight.dtype());
  DSA_CHECK(b.state_slots.defined(), "compressor_forward_batch: state_slots is undefined");
  const int64_t R = b.state_slots.size(0);
  check_i32("state_slots", b.state_slots, R, dev);
  check_i32("query_start", b.query_start, R + 1, dev);
  check_i32("cached_lens", b.cached_lens, R, dev);
  check_i32("entry_start", b.entry_start, R + 1, dev);
  const size_t slot_bytes = compressor_state_bytes(cfg);
  DSA_CHECK(b.state.defined() && b.state.dtype() == DType::U8 && b.state.is_contiguous() && b.state.device() == dev &&
                b.state.nbytes() % slot_bytes == 0 && b.state.nbytes() > 0,
            "compressor_forward_batch: state must be a contiguous u8 pool of whole {}-byte slots on {}, got {}",
            slot_bytes, dev.str(), b.state.defined() ? b.state.str() : "undefined");
  const int64_t slots = static_cast<int64_t>(b.state.nbytes() / slot_bytes);
  DSA_CHECK(entries_out.defined() && entries_out.dim() == 2 && entries_out.size(1) == d && entries_out.is_contiguous() &&
                entries_out.device() == dev,
            "compressor_forward_batch: entries_out must be contiguous [E][{}] on {}, got {}", d, dev.str(),
            entries_out.defined() ? entries_out.str() : "undefined");
  check_activation_dtype("compressor_forward_batch: entries_out", entries_out.dtype());
  if (R == 0) return;

  if (dev.is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::CompressorBatchArgs a{};
    a.kv = kv.raw();
    a.score = score.raw();
    a.kv_dtype = kv.dtype();
    a.score_dtype = score.dtype();
    a.ape = ape.data<float>();
    a.norm_weight = norm_weight.raw();
    a.norm_dtype = norm_weight.dtype();
    a.state = static_cast<uint8_t*>(b.state.raw());
    a.slot_bytes = static_cast<int64_t>(slot_bytes);
    a.num_slots = slots;
    a.state_slots = b.state_slots.data<int32_t>();
    a.query_start = b.query_start.data<int32_t>();
    a.cached_lens = b.cached_lens.data<int32_t>();
    a.entry_start = b.entry_start.data<int32_t>();
    a.out = entries_out.raw();
    a.out_dtype = entries_out.dtype();
    a.out_rows = entries_out.size(0);
    a.requests = R;
    a.ratio = m;
    a.head_dim = d;
    a.overlap = cfg.overlap;
    a.eps = cfg.norm_eps;
    a.rope_dim = static_cast<int>(cfg.rope.rope_dim);
    a.attention_factor = static_cast<float>(cfg.rope.attention_factor);
    const std::vector<float> f = rope_inv_freq(cfg.rope);
    DSA_CHECK(f.size() <= sizeof(a.inv_freq) / sizeof(float), "compressor_forward_batch: rope_dim {} too large",
              cfg.rope.rope_dim);
    for (size_t i = 0; i < f.size(); ++i) a.inv_freq[i] = f[i];
    cuda_launch::set_device(dev.index);
    cuda::compressor_batch(a);
    return;
#else
    fail("compressor_forward_batch: tensors are on {} but this build has no CUDA", dev.str());
#endif
  }

  const int32_t* slot = b.state_slots.data<int32_t>();
  const int32_t* qs = b.query_start.data<int32_t>();
  const int32_t* cached = b.cached_lens.data<int32_t>();
  const int32_t* es = b.entry_start.data<int32_t>();
  DSA_CHECK(qs[0] == 0 && qs[R] == T, "compressor_forward_batch: query_start spans [{}, {}) of {} tokens", qs[0], qs[R],
            T);
  DSA_CHECK(es[0] == 0 && es[R] == entries_out.size(0), "compressor_forward_batch: entry_start spans [{}, {}) of {} rows",
            es[0], es[R], entries_out.size(0));
  const int64_t rows = cfg.coff() * m;
  uint8_t* base = static_cast<uint8_t*>(b.state.raw());
  for (int64_t r = 0; r < R; ++r) {
    // Slot -1: a padding row (kv::pad_metadata) with no state; like the CUDA kernel, nothing is
    // read or written for it (its entry rows stay unwritten; their slots are -1).
    if (slot[r] == -1) continue;
    DSA_CHECK(slot[r] >= 0 && slot[r] < slots, "compressor_forward_batch: request row {} has state slot {} (pool of {})",
              r, slot[r], slots);
    DSA_CHECK(qs[r] <= qs[r + 1] && es[r] <= es[r + 1] && cached[r] >= 0,
              "compressor_forward_batch: request row {} has bad ranges", r);
    uint8_t* s = base + static_cast<size_t>(slot[r]) * slot_bytes;
    CompressorState st;
    st.kv = Tensor::from_blob(s, {rows, W}, DType::F32);
    st.score = Tensor::from_blob(s + slot_bytes / 2, {rows, W}, DType::F32);
    if (cached[r] == 0) st.reset();
    st.next_pos = cached[r];
    const int64_t n = qs[r + 1] - qs[r];
    const int64_t want = compressor_entries_emitted(cfg, cached[r], n);
    DSA_CHECK(want <= es[r + 1] - es[r],
              "compressor_forward_batch: request row {} emits {} entries at positions [{}, {}) but entry_start gives "
              "it {} rows",
              r, want, cached[r], cached[r] + n, es[r + 1] - es[r]);
    if (n == 0) continue;
    compressor_forward(cfg, st, kv.slice(0, qs[r], qs[r + 1]), score.slice(0, qs[r], qs[r + 1]), ape, norm_weight,
                       entries_out.slice(0, es[r], es[r] + want));
  }
}

}  // namespace dsa::ops
