#include "dsa/model/deepseek_v4/sharding.h"

#include "dsa/core/error.h"
#include "dsa/model/common/vocab_parallel.h"

namespace dsa::model::v4 {

void check_tensor_parallel(const ModelConfig& c, int size, bool ep) {
  DSA_CHECK(size >= 1, "tensor parallel size (--tensor-parallel-size) must be >= 1, got {}", size);
  if (size == 1) return;
  if (ep) check_expert_parallel(c.n_routed_experts, size);
  DSA_CHECK(c.num_heads % size == 0,
            "tensor parallel size (--tensor-parallel-size) {} does not divide num_attention_heads ({})", size,
            c.num_heads);
  // A group's wo_a block reads all of its heads' outputs at once: a rank must own whole groups.
  DSA_CHECK(c.o_groups % size == 0, "tensor parallel size (--tensor-parallel-size) {} does not divide o_groups ({})",
            size, c.o_groups);
  const int64_t I = c.moe_intermediate_size;
  DSA_CHECK(I % size == 0, "tensor parallel size (--tensor-parallel-size) {} does not divide moe_intermediate_size ({})",
            size, I);
  DSA_CHECK((I / size) % 128 == 0,
            "tensor parallel size (--tensor-parallel-size) {}: moe_intermediate_size {} / {} = {} is not a multiple of "
            "128 (each rank's slice is the K of its experts' down projection)",
            size, I, size, I / size);
}

TpShard tp_shard(const ModelConfig& c, int rank, int size, bool ep) {
  check_tensor_parallel(c, size, ep);
  TpShard s;
  s.rank = rank;
  s.size = size;
  s.heads = rank_range(c.num_heads, rank, size, "num_attention_heads");
  s.groups = rank_range(c.o_groups, rank, size, "o_groups");
  s.inter = rank_range(c.moe_intermediate_size, rank, size, "moe_intermediate_size");
  s.ep = ep && size > 1;
  s.experts = s.ep ? rank_range(c.n_routed_experts, rank, size, "n_routed_experts") : Range{0, c.n_routed_experts};
  s.vocab = vocab_shard(c.vocab_size, rank, size);
  return s;
}

}  // namespace dsa::model::v4
