// Speculative decoding with the model's MTP layer (docs/speculative-decoding.md): the verifier's
// acceptance rule, the rollback decision, the statistics, and the Drafter that runs the MTP layer
// after every target step (its cache catches up with the accepted tokens, then it proposes up to
// N tokens per request autoregressively).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/engine/model_runner.h"
#include "dsa/engine/sequence.h"
#include "dsa/kv/cache_spec.h"
#include "dsa/kv/kv_manager.h"
#include "dsa/model/causal_lm.h"

namespace dsa::engine {

// Counters over every verification (a request's step that carried drafts).
struct SpecStats {
  int64_t verify_steps = 0;  // request-steps that verified drafts
  int64_t drafted = 0;       // draft tokens verified
  int64_t accepted = 0;      // draft tokens accepted
  int64_t emitted = 0;       // tokens those steps produced (accepted + corrected / bonus, after stops)
  int64_t rollbacks = 0;     // state restores (a compressor window closed inside a rejected span)
  double acceptance_rate() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0; }
  // Tokens one verification yields on average (1 + accepted drafts): vLLM's mean acceptance length.
  double mean_accepted_length() const {
    return verify_steps > 0 ? 1.0 + static_cast<double>(accepted) / verify_steps : 0.0;
  }
};

// How a sampled request's drafts are verified (--speculative-acceptance; greedy requests accept
// by argmax match either way):
//   Rejection (default): drafts drawn from the MTP layer's processed distribution q, accepted by
//     the rejection rule (rejection_accept): the target's distribution, more accepted tokens;
//   Exact: greedy MTP drafts accepted when equal to the target's own seeded draw
//     (accepted_prefix): the same tokens as decoding without drafts.
enum class SpecAcceptance { Rejection, Exact };
// "rejection" / "exact"; anything else throws dsa::Error naming --speculative-acceptance and the value.
SpecAcceptance parse_spec_acceptance(std::string_view name);
const char* spec_acceptance_name(SpecAcceptance a);

// The verifier: target[j] is the token the target picked at draft position j (j = 0..D, from
// D + 1 verified rows; the request's own sampling rule and seeded draw for that position). Returns
// the accepted draft count a: drafts[0..a) == target[0..a) and drafts[a] != target[a] (or a = D).
// The step then emits target[0..a], a + 1 tokens: exactly what decoding without drafts would have
// emitted, one token per step (greedy: the argmax; sampled: the same seeded draw).
int accepted_prefix(std::span<const int32_t> drafts, std::span<const int32_t> target);

// The rejection rule over one verification of a sampled request (rejection_sampling.h). Draft j
// takes position len + j (len = s.tokens.size()); target_logits(j) is the target's raw f32 row
// for it on the host, processed here by the request's sampling rules into p; s.draft_q[j] is the q
// the draft was drawn from. picks gets the accepted drafts, then the correction drawn from
// norm(max(0, p - q)), or after all D drafts target[D] (the target's own seeded draw at len + D:
// a draw from p). Returns the accepted count; a target row that is not finite ends picks with -1.
int rejection_accept(const Sequence& s, std::span<const int32_t> drafts, std::span<const int32_t> target,
                     const std::function<const float*(int)>& target_logits, int64_t vocab, std::vector<int32_t>& picks);

// Whether forgetting the processed positions [keep, end) of a request requires restoring its
// state slots: a group of ratio m > 1 (V4's compressors) closed a window ((p + 1) % m == 0)
// inside them, which shifted the compressor's rows. Otherwise truncating the cached length is
// exact (docs/speculative-decoding.md).
bool rollback_needs_state(const std::vector<kv::CacheGroupSpec>& groups, int64_t keep, int64_t end);

// What the Drafter does for one request after a target step.
struct DraftJob {
  Sequence* seq = nullptr;
  int64_t first_row = 0;   // the batch row of the step's first token of this request (its hidden row)
  int64_t step_start = 0;  // position of that token
  int64_t valid_end = 0;   // positions [step_start, valid_end) carried committed tokens
  int drafts = 0;          // tokens to propose (0: only catch the MTP cache up)
};

class TpRanks;

class Drafter {
 public:
  // tp: the tensor-parallel ranks the steps run on (null: the one runner); each rank gets
  // hand-over buffers of its own on its device (the ranks' hidden states are identical, each
  // rank's forward writes and reads its own copy).
  Drafter(model::CausalLM& lm, ModelRunner& runner, kv::KvManager& kv, TpRanks* tp = nullptr);
  // A target step's extras, one per rank: hidden_out = the buffer it writes every token's hidden
  // state into (f32 [tokens][width] on the rank's device).
  std::vector<StepExtras> target_extras(int64_t tokens);
  // Runs the MTP layer over positions [max(mtp_done, step_start), valid_end) of every job (token
  // t + 1 as input, the target's hidden at t) and sets seq->mtp_done; then, for jobs with drafts
  // whose last committed position was in it, proposes seq->drafts (greedy over the MTP logits, or
  // for seq->rejection drawn from the processed ones, kept in seq->draft_q; fewer when the KV
  // cache has no pages ahead for the draft positions).
  void run(std::vector<DraftJob>& jobs);

 private:
  Tensor buffer(int rank, int i, int64_t tokens);
  // One MTP step on the runner or on every rank: xs[r] gets rank r's buffers src -> out.
  StepResult step(const kv::Batch& b, const std::vector<RowRequest>& rows, int src, int out, const Tensor& hidden_rows);
  // The draft taking position `pos` from row `row` of an MTP step: the device's greedy pick, or
  // for s.rejection a seeded draw from the row's processed distribution (appended to s.draft_q).
  // -1: the row is not finite.
  int32_t pick(Sequence& s, const StepResult& res, size_t row, int64_t pos);
  model::CausalLM& lm_;
  ModelRunner& runner_;
  kv::KvManager& kv_;
  TpRanks* tp_;
  std::vector<Device> devices_;          // per rank
  std::vector<std::array<Tensor, 3>> bufs_;  // per rank: target hidden, then the two draft buffers (ping-pong)
};

}  // namespace dsa::engine
