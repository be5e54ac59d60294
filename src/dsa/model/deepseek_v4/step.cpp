#include "dsa/model/deepseek_v4/step.h"

#include "dsa/core/error.h"

namespace dsa::model::v4 {

Step::EntryRange Step::written_entries(int g, int r) const {
  const int64_t m = meta->groups.at(g).ratio;
  EntryRange e;
  for (int i = 0; i <= r; ++i) {
    const int64_t seq = seq_lens[i], cached = seq - (query_start[i + 1] - query_start[i]);
    const int64_t first = cached / m, count = seq / m - cached / m;
    if (i == r) {
      e.first_entry = first;
      e.count = count;
    } else {
      e.offset += count;
    }
  }
  return e;
}

Tensor Step::request_entry_slots(int g, int r) const {
  auto it = entry_slots_.find(g);
  if (it == entry_slots_.end()) {
    const engine::GroupMetadata& gm = meta->groups.at(g);
    const int64_t m = gm.ratio, P = gm.page_size, width = gm.block_table.size(1);
    const Tensor table = gm.block_table.to(Device::cpu());
    const int32_t* bt = table.data<int32_t>();
    std::vector<int64_t> offsets{0};
    for (int i = 0; i < requests(); ++i) offsets.push_back(offsets.back() + seq_lens[i] / m);
    Tensor slots = Tensor::empty({offsets.back()}, DType::I64);
    for (int i = 0; i < requests(); ++i)
      for (int64_t e = 0; e < seq_lens[i] / m; ++e) {
        DSA_CHECK(e / P < width, "deepseek_v4: entry {} of request row {} is past its block table ({} blocks)", e, i,
                  width);
        const int32_t page = bt[i * width + e / P];
        DSA_CHECK(page >= 0, "deepseek_v4: entry {} of request row {} has no page", e, i);
        slots.data<int64_t>()[offsets[i] + e] = static_cast<int64_t>(page) * P + e % P;
      }
    entry_offsets_[g] = std::move(offsets);
    it = entry_slots_.emplace(g, slots.to(device)).first;
  }
  const std::vector<int64_t>& off = entry_offsets_.at(g);
  return it->second.slice(0, off[r], off[r + 1]);
}

}  // namespace dsa::model::v4
