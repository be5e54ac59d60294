#include "dsa/model/glm5/sharding.h"

#include "dsa/core/error.h"
#include "dsa/model/common/shard_slices.h"

namespace dsa::model::glm5 {

Range tp_inter_range(int64_t I, const Shard& tp, const std::string& what) {
  const Range r = rank_range(I, tp.rank, tp.size, what + " intermediate size");
  DSA_CHECK(r.size() % 128 == 0,
            "tensor parallel size {}: {} intermediate size {} / {} = {} is not a multiple of 128 (the down "
            "projection's K and the FP8 scale blocks)", tp.size, what, I, tp.size, r.size());
  return r;
}

int64_t tp_local_heads(const schema::Glm5Dims& d, int size) {
  DSA_CHECK(size >= 1, "tensor parallel size {} must be at least 1", size);
  DSA_CHECK(d.heads % size == 0, "tensor parallel size {} does not divide num_attention_heads ({})", size, d.heads);
  return d.heads / size;
}

}  // namespace dsa::model::glm5
