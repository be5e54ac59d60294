#include "dsa/attention/layer_spec.h"

namespace dsa::attn {

std::string_view layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::Sliding: return "sliding";
    case LayerKind::Csa: return "csa";
    case LayerKind::Hca: return "hca";
    case LayerKind::MlaSparse: return "mla_sparse";
  }
  return "?";
}

std::string_view cache_role_name(CacheRole r) {
  switch (r) {
    case CacheRole::SlidingWindow: return "swa";
    case CacheRole::Compressed: return "compressed";
    case CacheRole::Latent: return "latent";
    case CacheRole::IndexerKeys: return "indexer";
  }
  return "?";
}

}  // namespace dsa::attn
