#include "dsa/kv/kv_manager.h"

#include <algorithm>
#include <limits>

#include <cstring>

#include <fmt/format.h>

#include "dsa/core/cuda_memory.h"

namespace dsa::kv {

void KvManagerOptions::validate() const {
  DSA_CHECK(num_blocks >= 0, "KV manager: num_blocks = {} (must be >= 0)", num_blocks);
  DSA_CHECK((num_blocks > 0) != (budget_bytes > 0),
            "KV manager: give exactly one of num_blocks ({}) and budget_bytes ({})", num_blocks, budget_bytes);
  DSA_CHECK(max_requests >= 0, "KV manager: max_requests = {} (must be >= 0)", max_requests);
  DSA_CHECK(max_step_tokens >= 0, "KV manager: max_step_tokens = {} (must be >= 0)", max_step_tokens);
  DSA_CHECK(window_pages >= 0, "KV manager: window_pages = {} (must be >= 0)", window_pages);
  DSA_CHECK(max_position >= 0 && max_position <= std::numeric_limits<int32_t>::max(),
            "KV manager: max_position = {} (must be in [0, 2^31))", max_position);
}

bool KvDemand::fits() const {
  for (size_t g = 0; g < needed.size(); ++g)
    if (needed[g] > available[g]) return false;
  return true;
}

KvManager::KvManager(KvRequirements requirements, KvManagerOptions options)
    : req_(std::move(requirements)), opt_(std::move(options)) {
  opt_.validate();
  req_.validate();
    DSA_CHECK(req_.states.empty() || opt_.max_requests > 0,
            "KV manager: the model keeps per-request state ({} pools): max_requests must be > 0", req_.states.size());

  // Pages per group: windowed groups and state slots first (fixed by the limits), the rest from
  // the budget.
  std::vector<int64_t> pages(req_.groups.size(), 0);
  size_t window_bytes = 0, block_bytes = 0;
  const size_t state_copies = opt_.state_backups ? 2 : 1;  // save_state's backup slots
  for (const StatePoolSpec& s : req_.states)
    window_bytes += s.slot_bytes * static_cast<size_t>(opt_.max_requests) * state_copies;
  for (size_t g = 0; g < req_.groups.size(); ++g) {
    if (req_.groups[g].window > 0) {
      pages[g] = opt_.window_pages > 0 ? opt_.window_pages
                                       : window_group_pages(req_.groups[g], opt_.max_requests, opt_.max_step_tokens);
      window_bytes += static_cast<size_t>(pages[g]) * req_.groups[g].page_bytes();
    } else {
      block_bytes += req_.groups[g].page_bytes();
    }
  }
  int64_t blocks = opt_.num_blocks;
  if (blocks == 0 && block_bytes > 0) {
    DSA_CHECK(opt_.budget_bytes >= window_bytes + block_bytes,
              "KV manager: budget_bytes = {} is too small: the sliding-window caches and state slots take {} bytes "
              "(max_requests {}, max_step_tokens {}) and one block of the other caches {} bytes (--kv-cache-memory "
              "or --gpu-memory-utilization set the budget; --max-num-seqs and --max-num-batched-tokens the first part)",
              opt_.budget_bytes, window_bytes, opt_.max_requests, opt_.max_step_tokens, block_bytes);
    blocks = static_cast<int64_t>((opt_.budget_bytes - window_bytes) / block_bytes);
  } else if (blocks == 0) {
    DSA_CHECK(opt_.budget_bytes >= window_bytes,
              "KV manager: budget_bytes = {} is too small: the sliding-window caches and state slots take {} bytes "
              "(--kv-cache-memory or --gpu-memory-utilization set the budget)",
              opt_.budget_bytes, window_bytes);
  }
  for (size_t g = 0; g < req_.groups.size(); ++g) {
    if (req_.groups[g].window == 0) pages[g] = blocks;
    // Slots are int32 in the index lists (ops/sparse_index): every slot must fit.
    DSA_CHECK(pages[g] * req_.groups[g].page_size <= std::numeric_limits<int32_t>::max(),
              "KV manager: group '{}' would hold {} pages x {} entries: slots must stay below 2^31", req_.groups[g].name,
              pages[g], req_.groups[g].page_size);
    alloc_.emplace_back(pages[g]);
  }

  for (size_t g = 0; g < req_.groups.size(); ++g) {
    for (const KvPoolSpec& ps : req_.groups[g].pools) {
      DSA_CHECK(ps.layer >= 0, "KV manager: group '{}' has a pool of layer {}", req_.groups[g].name, ps.layer);
      DSA_CHECK(find_pool(ps.layer, ps.role) == nullptr, "KV manager: layer {} has two {} caches", ps.layer,
                attn::cache_role_name(ps.role));
      KvPool p;
      p.layer = ps.layer;
      p.role = ps.role;
      p.layout = ps.layout;
      p.group = static_cast<int>(g);
      p.page_size = req_.groups[g].page_size;
      p.page_bytes = ps.page_bytes;
      p.num_pages = pages[g];
      p.data = Tensor::empty({pages[g] * static_cast<int64_t>(ps.page_bytes)}, DType::U8, opt_.device);
      if (static_cast<size_t>(ps.layer) >= layer_pools_.size()) layer_pools_.resize(ps.layer + 1);
      layer_pools_[ps.layer].push_back(static_cast<int>(pools_.size()));
      pools_.push_back(std::move(p));
    }
  }
  for (const StatePoolSpec& s : req_.states)
    states_.push_back(StatePool{
        s, Tensor::empty({static_cast<int64_t>(s.slot_bytes * state_copies) * opt_.max_requests}, DType::U8,
                         opt_.device)});
  for (int i = opt_.max_requests; i-- > 0;) free_slots_.push_back(i);
}

const StatePool& KvManager::state_pool(int layer, const std::string& name) const {
  for (const StatePool& s : states_)
    if (s.spec.layer == layer && s.spec.name == name) return s;
  fail("KV manager: layer {} has no '{}' state", layer, name);
}

std::vector<KvUsage> KvManager::usage() const {
  std::vector<KvUsage> u;
  for (size_t g = 0; g < req_.groups.size(); ++g)
    u.push_back({req_.groups[g].name, alloc_[g].num_used(), alloc_[g].num_pages(), req_.groups[g].page_bytes()});
  return u;
}

// ---- capacity ----------------------------------------------------------------------------------

int64_t KvManager::pages_for(int g, int64_t len) const {
  const CacheGroupSpec& c = req_.groups.at(g);
  const int64_t all = blocks_for(g, len);
  if (c.window == 0) return all;
  return std::min<int64_t>(all, c.max_live_pages > 0 ? c.max_live_pages : all);
}

bool KvManager::fits_alone(int64_t len) const {
  if (opt_.max_position > 0 && len > opt_.max_position) return false;
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g)
    if (pages_for(g, len) > alloc_[g].num_pages()) return false;
  return true;
}

int64_t KvManager::capacity_tokens() const {
  int64_t cap = -1;
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g) {
    const CacheGroupSpec& c = req_.groups[g];
    if (c.window > 0) continue;
    const int64_t t = alloc_[g].num_pages() * c.page_size * c.ratio;
    cap = cap < 0 ? t : std::min(cap, t);
  }
  return cap < 0 ? 0 : cap;
}

bool KvManager::can_admit(int64_t len) const {
  if (opt_.max_requests > 0 && num_requests() >= opt_.max_requests) return false;
  if (!req_.states.empty() && free_slots_.empty()) return false;
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g)
    if (pages_for(g, len) > alloc_[g].num_free()) return false;
  return true;
}

const KvPool* KvManager::find_pool(int layer, attn::CacheRole role) const {
  if (layer < 0 || static_cast<size_t>(layer) >= layer_pools_.size()) return nullptr;
  for (int i : layer_pools_[layer])
    if (pools_[i].role == role) return &pools_[i];
  return nullptr;
}

const KvPool& KvManager::pool(int layer, attn::CacheRole role) const {
  const KvPool* p = find_pool(layer, role);
  DSA_CHECK(p != nullptr, "KV manager: layer {} has no {} cache", layer, attn::cache_role_name(role));
  return *p;
}

size_t KvManager::total_bytes() const {
  size_t b = 0;
  for (const KvPool& p : pools_) b += p.data.nbytes();
  return b;
}

BatchLimits KvManager::batch_limits() const {
  BatchLimits l;
  l.max_tokens = opt_.max_step_tokens;
  l.max_requests = opt_.max_requests;
  l.max_position = opt_.max_position;
  return l;
}

std::string KvManager::summary() const {
  std::string s;
  for (size_t g = 0; g < req_.groups.size(); ++g) {
    const CacheGroupSpec& c = req_.groups[g];
    s += fmt::format("{}: {} pools, ratio {}, {} entries/page{}, {} pages x {} B = {:.1f} MiB\n", c.name, c.pools.size(),
                     c.ratio, c.page_size, c.window > 0 ? fmt::format(", window {}", c.window) : std::string(),
                     num_pages(static_cast<int>(g)), c.page_bytes(),
                     static_cast<double>(num_pages(static_cast<int>(g))) * c.page_bytes() / (1 << 20));
  }
  return s;
}

// ---- requests ----------------------------------------------------------------------------------

KvManager::Request& KvManager::req(RequestId id) {
  auto it = requests_.find(id);
  DSA_CHECK(it != requests_.end(), "KV manager: unknown request {}", id);
  return it->second;
}

const KvManager::Request& KvManager::req(RequestId id) const {
  auto it = requests_.find(id);
  DSA_CHECK(it != requests_.end(), "KV manager: unknown request {}", id);
  return it->second;
}

void KvManager::add_request(RequestId id) {
  DSA_CHECK(!has_request(id), "KV manager: request {} is already registered", id);
  DSA_CHECK(opt_.max_requests == 0 || num_requests() < opt_.max_requests,
            "KV manager: cannot add request {}: max_requests = {} are registered", id, opt_.max_requests);
  Request r;
  r.blocks.resize(req_.groups.size());
  r.first_held.assign(req_.groups.size(), 0);
  if (!free_slots_.empty()) {
    r.slot = free_slots_.back();
    free_slots_.pop_back();
  }
  requests_.emplace(id, std::move(r));
}

void KvManager::release(RequestId id) {
  Request& r = req(id);
  for (size_t g = 0; g < req_.groups.size(); ++g)
    for (int32_t page : r.blocks[g])
      if (page >= 0) alloc_[g].free(page);
  if (r.slot >= 0) free_slots_.push_back(r.slot);
  requests_.erase(id);
}

int64_t KvManager::num_cached(RequestId id) const { return req(id).cached; }

int KvManager::state_slot(RequestId id) const { return req(id).slot; }

const std::vector<int32_t>& KvManager::block_table(RequestId id, int group) const {
  DSA_CHECK(group >= 0 && static_cast<size_t>(group) < req_.groups.size(), "KV manager: group {} outside [0, {})", group,
            req_.groups.size());
  return req(id).blocks[group];
}

int64_t KvManager::pages_held(RequestId id, int group) const {
  const auto& b = block_table(id, group);
  return std::count_if(b.begin(), b.end(), [](int32_t p) { return p >= 0; });
}

// ---- steps -------------------------------------------------------------------------------------

int64_t KvManager::blocks_for(int g, int64_t len) const {
  const int64_t entries = len / req_.groups[g].ratio;
  return (entries + req_.groups[g].page_size - 1) / req_.groups[g].page_size;
}

int64_t KvManager::first_live_block(int g, int64_t next) const {
  const CacheGroupSpec& c = req_.groups[g];
  if (c.window == 0) return 0;
  return std::max<int64_t>(next - c.window + 1, 0) / c.page_size;
}

int64_t KvManager::trim_end(int g, const Request& r) const {
  return std::min<int64_t>(first_live_block(g, r.cached), static_cast<int64_t>(r.blocks[g].size()));
}

std::vector<Batch::Segment> KvManager::check_batch(const Batch& batch) const {
  std::vector<Batch::Segment> segs = batch.segments(batch_limits());
  for (const Batch::Segment& s : segs) {
    auto it = requests_.find(s.id);
    DSA_CHECK(it != requests_.end(), "KV manager: batch token {} belongs to unknown request {} (add_request first)",
              s.first, s.id);
    DSA_CHECK(s.start == it->second.cached,
              "KV manager: request {} starts at position {} in the batch but its cache holds {} tokens "
              "(a step must continue where the cache ends)",
              s.id, s.start, it->second.cached);
  }
  return segs;
}

KvDemand KvManager::demand(const Batch& batch) const { return demand_of(check_batch(batch)); }

KvDemand KvManager::demand_of(const std::vector<Batch::Segment>& segs) const {
  KvDemand d;
  d.needed.assign(req_.groups.size(), 0);
  d.available.assign(req_.groups.size(), 0);
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g) {
    // Pages already held past the cached length (reserve, truncate) are not needed again.
    for (const Batch::Segment& s : segs)
      d.needed[g] += std::max<int64_t>(blocks_for(g, s.end()) - static_cast<int64_t>(req(s.id).blocks[g].size()), 0);
    d.available[g] = alloc_[g].num_free();
    if (req_.groups[g].window > 0)
      for (const auto& [id, r] : requests_) d.available[g] += std::max<int64_t>(trim_end(g, r) - r.first_held[g], 0);
  }
  return d;
}

BatchMetadata KvManager::prepare(const Batch& batch) {
  const std::vector<Batch::Segment> segs = check_batch(batch);
  const KvDemand d = demand_of(segs);
  if (!d.fits()) {
    std::string why;
    for (size_t g = 0; g < req_.groups.size(); ++g)
      if (d.needed[g] > d.available[g])
        why += fmt::format("{}group '{}' needs {} new pages but {} of {} are available", why.empty() ? "" : "; ",
                           req_.groups[g].name, d.needed[g], d.available[g], alloc_[g].num_pages());
    throw KvOutOfMemory(fmt::format("KV cache out of memory for a batch of {} tokens: {}", batch.num_tokens(), why));
  }

  // Free window pages that no query at or after each request's next position can read.
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g) {
    if (req_.groups[g].window == 0) continue;
    for (auto& [id, r] : requests_) {
      const int64_t end = trim_end(g, r);
      for (int64_t b = r.first_held[g]; b < end; ++b) {
        alloc_[g].free(r.blocks[g][b]);
        r.blocks[g][b] = -1;
      }
      r.first_held[g] = std::max(r.first_held[g], end);
    }
  }
  // Allocate the pages the new tokens write, request by request in batch order.
  for (const Batch::Segment& s : segs) {
    Request& r = req(s.id);
    for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g) {
      const int64_t need = blocks_for(g, s.end());
      while (static_cast<int64_t>(r.blocks[g].size()) < need) r.blocks[g].push_back(alloc_[g].allocate());
    }
    r.cached = s.end();
  }
  return build_metadata(batch, segs);
}

BatchMetadata KvManager::padding_metadata(int64_t rows, int64_t index_len) const {
  DSA_CHECK(index_len >= 0 && index_len_bucket(index_len) == index_len,
            "KV manager: padding_metadata: index_len {} is not a context bucket", index_len);
  BatchMetadata m = build_metadata(Batch{}, {});
  m.index_len = index_len;
  m.token_ids = Tensor::empty({0}, DType::I32);
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g)
    m.groups[g].block_table = Tensor::empty({0, std::max<int64_t>(1, blocks_for(g, index_len))}, DType::I32);
  pad_metadata(m, rows);
  return m;
}

// ---- speculative decoding -----------------------------------------------------------------------

bool KvManager::reserve(RequestId id, int64_t len) {
  Request& r = req(id);
  DSA_CHECK(len >= 0 && (opt_.max_position == 0 || len <= opt_.max_position),
            "KV manager: reserve({}, {}) is outside [0, max_position {}]", id, len, opt_.max_position);
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g)
    if (blocks_for(g, len) - static_cast<int64_t>(r.blocks[g].size()) > alloc_[g].num_free()) return false;
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g)
    while (static_cast<int64_t>(r.blocks[g].size()) < blocks_for(g, len)) r.blocks[g].push_back(alloc_[g].allocate());
  return true;
}

void KvManager::truncate(RequestId id, int64_t len) {
  Request& r = req(id);
  DSA_CHECK(len >= 0 && len <= r.cached, "KV manager: truncate request {} to {} tokens, it holds {}", id, len,
            r.cached);
  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g)
    DSA_CHECK(first_live_block(g, len) >= r.first_held[g],
              "KV manager: request {} cannot go back to {} tokens: group '{}' freed its pages behind the window", id,
              len, req_.groups[g].name);
  r.cached = len;
}

BatchMetadata KvManager::draft_metadata(const Batch& batch) const {
  const std::vector<Batch::Segment> segs = batch.segments(batch_limits());
  for (const Batch::Segment& s : segs) {
    auto it = requests_.find(s.id);
    DSA_CHECK(it != requests_.end(), "KV manager: draft batch token {} belongs to unknown request {}", s.first, s.id);
    for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g) {
      const std::vector<int32_t>& b = it->second.blocks[g];
      const int64_t first = s.start / req_.groups[g].ratio / req_.groups[g].page_size;
      DSA_CHECK(blocks_for(g, s.end()) <= static_cast<int64_t>(b.size()) &&
                    (first >= static_cast<int64_t>(b.size()) || b[first] >= 0),
                "KV manager: draft batch positions [{}, {}) of request {} lie outside the pages it holds in group '{}' "
                "({} blocks)",
                s.start, s.end(), s.id, req_.groups[g].name, b.size());
    }
  }
  return build_metadata(batch, segs);
}

namespace {

// Every state pool's slot `slot` to (or from) its backup slot `slot + max_requests`.
void copy_state_slots(std::vector<StatePool>& states, int slot, int max_requests, Device dev, bool to_backup) {
  for (StatePool& p : states) {
    const size_t n = p.spec.slot_bytes;
    uint8_t* live = static_cast<uint8_t*>(p.data.raw()) + static_cast<size_t>(slot) * n;
    uint8_t* backup = live + static_cast<size_t>(max_requests) * n;
    uint8_t* dst = to_backup ? backup : live;
    const uint8_t* src = to_backup ? live : backup;
    if (dev.is_cuda())
      cuda_memory::copy_async(dst, src, n, cuda_memory::Dir::D2D);
    else
      std::memcpy(dst, src, n);
  }
}

}  // namespace

void KvManager::save_state(RequestId id) { save_state_slot(req(id).slot); }
void KvManager::restore_state(RequestId id) { restore_state_slot(req(id).slot); }

void KvManager::save_state_slot(int slot) {
  DSA_CHECK(opt_.state_backups, "KV manager: save_state needs state_backups");
  DSA_CHECK(slot >= 0 && slot < opt_.max_requests, "KV manager: state slot {} outside 0..{}", slot,
            opt_.max_requests - 1);
  copy_state_slots(states_, slot, opt_.max_requests, opt_.device, /*to_backup=*/true);
}

void KvManager::restore_state_slot(int slot) {
  DSA_CHECK(opt_.state_backups, "KV manager: restore_state needs state_backups");
  DSA_CHECK(slot >= 0 && slot < opt_.max_requests, "KV manager: state slot {} outside 0..{}", slot,
            opt_.max_requests - 1);
  copy_state_slots(states_, slot, opt_.max_requests, opt_.device, /*to_backup=*/false);
}

BatchMetadata KvManager::build_metadata(const Batch& batch, const std::vector<Batch::Segment>& segs) const {
  const int64_t T = batch.num_tokens();
  const int64_t R = static_cast<int64_t>(segs.size());
  BatchMetadata m;
  auto i32 = [](Shape s) { return Tensor::empty(std::move(s), DType::I32); };
  auto i64 = [](Shape s) { return Tensor::empty(std::move(s), DType::I64); };
  m.token_req = i32({T});
  m.positions = i32({T});
  m.query_start = i32({R + 1});
  m.cached_lens = i32({R});
  m.seq_lens = i32({R});
  m.state_slots = i32({R});
  if (!batch.token.empty()) {
    m.token_ids = i32({T});
    std::copy(batch.token.begin(), batch.token.end(), m.token_ids.data<int32_t>());
  }
  m.query_start.data<int32_t>()[0] = 0;
  for (int64_t r = 0; r < R; ++r) {
    const Batch::Segment& s = segs[r];
    m.request_ids.push_back(s.id);
    m.state_slots.data<int32_t>()[r] = req(s.id).slot;
    m.query_start.data<int32_t>()[r + 1] = static_cast<int32_t>(s.first + s.count);
    m.cached_lens.data<int32_t>()[r] = static_cast<int32_t>(s.start);
    m.seq_lens.data<int32_t>()[r] = static_cast<int32_t>(s.end());
    m.max_seq_len = std::max(m.max_seq_len, s.end());
    for (int64_t t = s.first; t < s.first + s.count; ++t) {
      m.token_req.data<int32_t>()[t] = static_cast<int32_t>(r);
      m.positions.data<int32_t>()[t] = static_cast<int32_t>(batch.position[t]);
    }
  }

  m.index_len = index_len_bucket(m.max_seq_len);

  for (int g = 0; g < static_cast<int>(req_.groups.size()); ++g) {
    const CacheGroupSpec& c = req_.groups[g];
    GroupMetadata gm;
    gm.ratio = c.ratio;
    gm.page_size = c.page_size;
    gm.window = c.window;
    gm.num_pages = alloc_[g].num_pages();
    const int64_t width = std::max<int64_t>(1, blocks_for(g, m.index_len));
    gm.block_table = i32({R, width});
    int32_t* bt = gm.block_table.data<int32_t>();
    std::fill(bt, bt + R * width, -1);
    gm.slots = i64({T});
    gm.entry_start = i32({R + 1});
    gm.entry_tokens = i32({T});
    gm.entry_slots = i64({T});
    int32_t* et = gm.entry_tokens.data<int32_t>();
    int64_t* es = gm.entry_slots.data<int64_t>();
    std::fill(et, et + T, -1);
    std::fill(es, es + T, -1);
    for (int64_t r = 0; r < R; ++r) {
      const Batch::Segment& s = segs[r];
      gm.entry_start.data<int32_t>()[r] = static_cast<int32_t>(s.first);
      const std::vector<int32_t>& blocks = req(s.id).blocks[g];
      // Pages held beyond the step's context bucket (reserve, truncate) are not addressed.
      std::copy_n(blocks.begin(), std::min<int64_t>(static_cast<int64_t>(blocks.size()), width), bt + r * width);
      int64_t row = s.first;  // the request's next entry row
      for (int64_t t = s.first; t < s.first + s.count; ++t) {
        const int64_t pos = batch.position[t];
        int64_t slot = -1;
        if ((pos + 1) % c.ratio == 0) {
          const int64_t e = (pos + 1) / c.ratio - 1;  // request-local entry index
          const int32_t page = blocks[e / c.page_size];
          DSA_CHECK(page >= 0, "KV manager: internal error: entry {} of request {} has no page", e, s.id);
          slot = static_cast<int64_t>(page) * c.page_size + e % c.page_size;
          et[row] = static_cast<int32_t>(t);
          es[row] = slot;
          ++row;
        }
        gm.slots.data<int64_t>()[t] = slot;
      }
    }
    gm.entry_start.data<int32_t>()[R] = static_cast<int32_t>(T);
    m.groups.push_back(std::move(gm));
  }
  return m;
}

}  // namespace dsa::kv
