#include "dsa/engine/batch_metadata.h"

namespace dsa::engine {

namespace {
Tensor moved(const Tensor& t, Device dev) { return t.defined() ? t.to(dev) : Tensor(); }
}  // namespace

BatchMetadata BatchMetadata::to(Device dev) const {
  BatchMetadata m = *this;
  for (Tensor* t : {&m.token_ids, &m.token_req, &m.positions, &m.query_start, &m.cached_lens, &m.seq_lens})
    *t = moved(*t, dev);
  for (GroupMetadata& g : m.groups)
    for (Tensor* t : {&g.block_table, &g.slots, &g.entry_tokens, &g.entry_slots}) *t = moved(*t, dev);
  return m;
}

}  // namespace dsa::engine
