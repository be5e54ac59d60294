#include "dsa/engine/tp_wire.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "dsa/attention/layer_spec.h"
#include "dsa/core/error.h"

namespace dsa::engine {

namespace {

struct CommandHeader {
  uint64_t magic = 0x646d437374736473;  // "dsaCmd"
  uint64_t command = 0;
  uint64_t bytes = 0;
};

// Fixed-width fields of TpSetup, in this order, then the layout text.
struct SetupFields {
  int64_t num_blocks, window_pages, max_position, max_step_tokens_kv, max_step_tokens;
  uint64_t budget_bytes;
  int64_t max_requests, max_running, state_backups;
};

}  // namespace

void send_command(parallel::Communicator& c, TpCommand cmd, std::string* payload) {
  CommandHeader h;
  h.command = static_cast<uint64_t>(cmd);
  h.bytes = payload ? payload->size() : 0;
  c.broadcast_bytes(&h, sizeof h, 0);
  if (h.bytes > 0) c.broadcast_bytes(payload->data(), payload->size(), 0);
}

TpCommand recv_command(parallel::Communicator& c, std::string& payload) {
  CommandHeader h;
  const auto usual = c.wait_timeout();
  if (usual.count() > 0) c.set_wait_timeout(std::chrono::hours(24 * 365 * 10));  // idle: no bound
  try {
    c.broadcast_bytes(&h, sizeof h, 0);
  } catch (...) {
    if (usual.count() > 0) c.set_wait_timeout(usual);
    throw;
  }
  if (usual.count() > 0) c.set_wait_timeout(usual);
  DSA_CHECK(h.magic == CommandHeader{}.magic && h.command >= 1 && h.command <= 3,
            "tensor parallel: rank {} got a malformed command from rank 0 (command {})", c.rank(), h.command);
  DSA_CHECK(h.bytes <= (uint64_t{1} << 34), "tensor parallel: rank {}: command payload of {} bytes", c.rank(), h.bytes);
  payload.assign(h.bytes, '\0');
  if (h.bytes > 0) c.broadcast_bytes(payload.data(), payload.size(), 0);
  return static_cast<TpCommand>(h.command);
}

std::string encode_tp_setup(const TpSetup& s) {
  const kv::KvManagerOptions& o = s.ko;
  const SetupFields f{o.num_blocks,      o.window_pages, o.max_position, o.max_step_tokens, s.max_step_tokens,
                      o.budget_bytes,    o.max_requests, s.max_running,  o.state_backups ? 1 : 0};
  std::string b(reinterpret_cast<const char*>(&f), sizeof f);
  b += s.layout;
  return b;
}

TpSetup decode_tp_setup(const std::string& bytes) {
  DSA_CHECK(bytes.size() >= sizeof(SetupFields), "tensor parallel: a set-up message of {} bytes is too short",
            bytes.size());
  SetupFields f;
  std::memcpy(&f, bytes.data(), sizeof f);
  TpSetup s;
  s.ko.num_blocks = f.num_blocks;
  s.ko.window_pages = f.window_pages;
  s.ko.max_position = f.max_position;
  s.ko.max_step_tokens = f.max_step_tokens_kv;
  s.ko.budget_bytes = f.budget_bytes;
  s.ko.max_requests = static_cast<int>(f.max_requests);
  s.ko.state_backups = f.state_backups != 0;
  s.max_step_tokens = f.max_step_tokens;
  s.max_running = static_cast<int>(f.max_running);
  s.layout = bytes.substr(sizeof f);
  return s;
}

std::string kv_layout(const kv::KvManager& kv) {
  std::string s;
  for (const kv::KvPool& p : kv.pools())
    s += fmt::format("layer {} {} ({}): group {}, {} pages of {} entries, {} bytes each\n", p.layer,
                     attn::cache_role_name(p.role), p.layout, p.group, p.num_pages, p.page_size, p.page_bytes);
  return s;
}

std::vector<int32_t> gather_status(parallel::Communicator& c, int32_t mine) {
  Tensor in = Tensor::empty({1}, DType::I32), out = Tensor::empty({c.size()}, DType::I32);
  in.data<int32_t>()[0] = mine;
  c.all_gather(in, out);
  return std::vector<int32_t>(out.data<int32_t>(), out.data<int32_t>() + c.size());
}

std::vector<std::vector<int32_t>> gather_tokens(parallel::Communicator& c, const std::vector<int32_t>& mine) {
  const int64_t n = static_cast<int64_t>(mine.size());
  Tensor in = Tensor::empty({std::max<int64_t>(n, 1)}, DType::I32);
  Tensor out = Tensor::empty({c.size() * std::max<int64_t>(n, 1)}, DType::I32);
  if (n > 0) std::memcpy(in.raw(), mine.data(), n * sizeof(int32_t));
  else in.data<int32_t>()[0] = 0;
  c.all_gather(in, out);
  std::vector<std::vector<int32_t>> all(static_cast<size_t>(c.size()));
  for (int r = 0; r < c.size(); ++r)
    all[static_cast<size_t>(r)].assign(out.data<int32_t>() + r * std::max<int64_t>(n, 1),
                                       out.data<int32_t>() + r * std::max<int64_t>(n, 1) + n);
  return all;
}

}  // namespace dsa::engine
