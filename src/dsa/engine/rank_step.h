// RankStep: what every tensor-parallel rank needs to run one step, decided by rank 0 (the one
// scheduler and KV bookkeeping, tp_ranks.h), and its byte form for ranks in other processes,
// which receive it through one broadcast per step (the TCP group, parallel/tcp_group.h).
//
// The byte form holds every field of the metadata (the host tensors with dtype and shape, the
// cache groups' parameters, the request ids and lengths) and the rows; both ends are the same
// build (the start-up fingerprint says so), so it is a plain little-endian layout with a magic
// and a version. decode_rank_step checks every length against the bytes it has and throws
// naming the field on anything malformed, never reading past the end.
#pragma once
#include <string>
#include <vector>

#include "dsa/engine/model_runner.h"
#include "dsa/kv/batch_metadata.h"

namespace dsa::engine {

struct RankStep {
  kv::BatchMetadata meta;        // host tensors, built by rank 0's KvManager::prepare
  std::vector<RowRequest> rows;  // the rows to compute and sample
};

std::string encode_rank_step(const RankStep& step);
RankStep decode_rank_step(const std::string& bytes);

}  // namespace dsa::engine
