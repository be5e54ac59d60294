#include "dsa/kv/batch_metadata.h"

#include <algorithm>

#include <bit>

namespace dsa::kv {

int64_t index_len_bucket(int64_t n) {
  if (n <= 0) return 0;
  const int64_t step = std::max<int64_t>(256, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(n))) / 8);
  return (n + step - 1) / step * step;
}

std::vector<Tensor*> BatchMetadata::tensors() {
  std::vector<Tensor*> v{&token_ids, &token_req, &positions, &query_start, &cached_lens, &seq_lens, &state_slots};
  for (GroupMetadata& g : groups)
    for (Tensor* t : {&g.block_table, &g.slots, &g.entry_tokens, &g.entry_slots, &g.entry_start}) v.push_back(t);
  return v;
}

}  // namespace dsa::kv
