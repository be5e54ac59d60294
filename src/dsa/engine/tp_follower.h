// The loop of a tensor-parallel rank above 0 in its own process (`--nnodes`, tp_models.h's
// distributed form): it builds KV pools of rank 0's layout (rank 0's Setup command; it reports
// whether they came out the same), then runs every step rank 0 sends (tp_ranks.h) on its shard
// until rank 0 says stop. The scheduler, tokenizer and server are rank 0's alone. Returns when
// rank 0 stops the group; throws (naming the rank) when set-up fails, rank 0 dies or the ranks'
// forwards diverge.
#pragma once
#include "dsa/engine/tp_models.h"

namespace dsa::engine {

// Returns the number of steps run.
int64_t run_tp_follower(TensorParallelModels& models);

}  // namespace dsa::engine
