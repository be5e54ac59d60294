// Scripted tiny checkpoints: weights that make a random tiny model continue a given token with a
// given next token (a fixed "bigram" reply), so that chat, reasoning and tool-call handling can
// be tested end to end through the real forward, tokenizer and server.
//
// How: every sub-layer's output projection is zeroed (GLM-5: self_attn.o_proj, every
// down_proj; DeepSeek-V4: attn.wo_b, the experts' and shared experts' w2), so the residual
// stream of a token stays its embedding (V4's hyper-connection streams stay equal copies: comb
// is doubly stochastic, the head a positive mix); the final norm weight is set to 1; the LM head
// row of each next token becomes `margin` / sqrt(hidden) times the unit embedding of the tokens
// it follows, every other row small noise. The next token's logit is then `margin` and the
// others near 0: greedy decoding, and sampling at temperature 1, follow the script.
// Each token may have one successor only (a conflict is an error naming both).
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace dsa::model {

// Rewrites the safetensors shards of the tiny checkpoint in `dir` (arch from its config.json).
void apply_scripted_weights(const std::string& dir, const std::map<int32_t, int32_t>& next, double margin = 40.0,
                            uint64_t seed = 1);

// Makes the MTP layer of a scripted checkpoint predict the script too (speculative decoding
// tests and measurements, docs/speculative-decoding.md): its input projection passes the next
// token's normalised embedding through unchanged and drops the target's hidden state (V4 e_proj =
// identity, h_proj = 0; GLM eh_proj = [identity | 0]) and its norms are 1. Its block adds nothing
// (apply_scripted_weights zeroed its output projections too), so its head, the shared LM head,
// gives the successor of the token it reads: the token after next, which the target then
// produces. Call after apply_scripted_weights; a checkpoint without an MTP layer is an error.
void apply_predicting_mtp(const std::string& dir);

}  // namespace dsa::model
