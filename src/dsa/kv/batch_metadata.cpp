#include "dsa/kv/batch_metadata.h"

#include <algorithm>

#include <bit>

#include "dsa/core/error.h"

namespace dsa::kv {

int64_t index_len_bucket(int64_t n) {
  if (n <= 0) return 0;
  const int64_t step = std::max<int64_t>(256, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(n))) / 8);
  return (n + step - 1) / step * step;
}

int64_t decode_batch_bucket(int64_t n, int64_t max_bucket) {
  if (n <= 0) return 0;
  if (n > max_bucket) return n;
  return std::min<int64_t>(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(n))), max_bucket);
}

namespace {

// t grown to `n` entries along dim 0 (same trailing dims), the new entries set to `fill`.
template <typename T>
Tensor grown(const Tensor& t, int64_t n, T fill) {
  Shape s = t.shape();
  int64_t row = 1;
  for (size_t i = 1; i < s.size(); ++i) row *= s[i];
  const int64_t old = t.numel();
  s[0] = n;
  Tensor g = Tensor::empty(s, t.dtype());
  T* d = g.data<T>();
  std::copy_n(t.data<T>(), old, d);
  std::fill(d + old, d + n * row, fill);
  return g;
}

}  // namespace

void pad_metadata(BatchMetadata& m, int64_t rows) {
  DSA_CHECK(rows >= 0, "pad_metadata: {} rows", rows);
  if (rows == 0) return;
  const int64_t T = m.num_tokens(), R = m.num_requests();
  for (const Tensor* t : m.tensors())
    DSA_CHECK(!t->defined() || !t->device().is_cuda(), "pad_metadata: the metadata must be on the host");
  if (m.token_ids.defined()) m.token_ids = grown<int32_t>(m.token_ids, T + rows, 0);
  m.positions = grown<int32_t>(m.positions, T + rows, 0);
  m.cached_lens = grown<int32_t>(m.cached_lens, R + rows, 0);
  m.seq_lens = grown<int32_t>(m.seq_lens, R + rows, 0);
  m.state_slots = grown<int32_t>(m.state_slots, R + rows, -1);
  m.token_req = grown<int32_t>(m.token_req, T + rows, 0);
  m.query_start = grown<int32_t>(m.query_start, R + rows + 1, 0);
  for (int64_t i = 0; i < rows; ++i) {  // padding request R + i owns token T + i
    m.token_req.data<int32_t>()[T + i] = static_cast<int32_t>(R + i);
    m.query_start.data<int32_t>()[R + i + 1] = static_cast<int32_t>(T + i + 1);
    m.request_ids.push_back(kPaddingRequest);
  }
  for (GroupMetadata& g : m.groups) {
    g.block_table = grown<int32_t>(g.block_table, R + rows, -1);
    g.slots = grown<int64_t>(g.slots, T + rows, -1);
    g.entry_tokens = grown<int32_t>(g.entry_tokens, T + rows, -1);
    g.entry_slots = grown<int64_t>(g.entry_slots, T + rows, -1);
    g.entry_start = grown<int32_t>(g.entry_start, R + rows + 1, 0);
    for (int64_t i = 0; i <= rows; ++i) g.entry_start.data<int32_t>()[R + i] = static_cast<int32_t>(T + i);
  }
}

std::vector<Tensor*> BatchMetadata::tensors() {
  std::vector<Tensor*> v{&token_ids, &token_req, &positions, &query_start, &cached_lens, &seq_lens, &state_slots};
  for (GroupMetadata& g : groups)
    for (Tensor* t : {&g.block_table, &g.slots, &g.entry_tokens, &g.entry_slots, &g.entry_start}) v.push_back(t);
  return v;
}

}  // namespace dsa::kv
