#include "dsa/kv/batch_metadata.h"

namespace dsa::kv {

std::vector<Tensor*> BatchMetadata::tensors() {
  std::vector<Tensor*> v{&token_ids, &token_req, &positions, &query_start, &cached_lens, &seq_lens, &state_slots};
  for (GroupMetadata& g : groups)
    for (Tensor* t : {&g.block_table, &g.slots, &g.entry_tokens, &g.entry_slots, &g.entry_start}) v.push_back(t);
  return v;
}

}  // namespace dsa::kv
