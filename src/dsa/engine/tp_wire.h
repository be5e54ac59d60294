// What rank 0's process and the other processes of a distributed tensor-parallel group say to
// each other besides the forward's own collectives (tp_ranks.h, tp_follower.h): a command per
// step (Setup once, then Step per step, Stop at the end) as two broadcasts from rank 0 (a fixed
// header with the command and the payload's length, then the payload), the KV layout check and
// the all-gather of sampled ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/kv/kv_manager.h"
#include "dsa/parallel/communicator.h"

namespace dsa::engine {

enum class TpCommand : uint64_t { Setup = 1, Step = 2, Stop = 3 };

// Rank 0: the command, then `payload` (may be null: none).
void send_command(parallel::Communicator& c, TpCommand cmd, std::string* payload);
// Other ranks: waits for rank 0's next command without a bound (an idle server sends none for
// hours; a rank 0 that died still ends the wait at once), then for its payload within the
// group's usual bound.
TpCommand recv_command(parallel::Communicator& c, std::string& payload);

// What every rank needs to build KV pools of rank 0's layout (the device is each rank's own).
struct TpSetup {
  kv::KvManagerOptions ko;
  int64_t max_step_tokens = 0;
  int max_running = 0;
  std::string layout;  // kv_layout() of rank 0's pools
};
std::string encode_tp_setup(const TpSetup& s);
TpSetup decode_tp_setup(const std::string& bytes);

// One line per pool (layer, role, pages, page size, page bytes): equal on every rank or the
// ranks' block tables would not fit their pools.
std::string kv_layout(const kv::KvManager& kv);

// Every rank's status (0: ready), by rank.
std::vector<int32_t> gather_status(parallel::Communicator& c, int32_t mine);
// Every rank's sampled ids of the step, by rank.
std::vector<std::vector<int32_t>> gather_tokens(parallel::Communicator& c, const std::vector<int32_t>& mine);

}  // namespace dsa::engine
