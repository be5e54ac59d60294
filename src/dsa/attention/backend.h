// AttentionBackend: the contract one attention implementation declares (docs/model-reference.md §7,
// modelled on the backend base that vLLM users know: supported dtypes, KV-cache dtypes, kernel
// page sizes, head sizes, MLA/sparse/sink support, a compute-capability predicate and a final
// `supports_combination` check). The base class turns the declarations into user-facing reasons;
// concrete backends (backends/*.h) stay small and only declare.
//
// A backend also owns the KV-cache geometry of the layouts it reads (kv_cache_shape, page_bytes)
// and is the factory of the attention implementation object (create_impl).
#pragma once
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/attention/kv_cache_dtype.h"
#include "dsa/attention/layer_spec.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::attn {

#ifdef DSA_WITH_CUDA
inline constexpr bool kBuildHasCuda = true;
#else
inline constexpr bool kBuildHasCuda = false;
#endif

// The combination a caller asks for: platform, dtypes and shapes of one attention layer type.
struct AttentionQuery {
  std::optional<Capability> capability;  // CUDA capability to select for; nullopt = CPU platform (no GPU)
  bool build_has_cuda = kBuildHasCuda;   // tests flip this to cover both kinds of build
  // CUDA targets the build carries kernel images for ("90a", "120a", "89", ...). nullopt: do not
  // check images (a hypothetical build); `dsa select` and the engine pass the real build's list.
  std::optional<std::vector<std::string>> build_cuda_archs;
  DType dtype = DType::BF16;             // activation dtype (q, o)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Fp8DsMla;  // concrete layout (aliases resolved)
  int head_size = 576;                   // d_qk
  int v_head_size = 512;                 // d_v
  int num_heads = 64;
  std::vector<int> page_sizes;           // kernel page size of every cache the kernel reads
  bool mla = true;
  bool sparse = true;
  bool sink = false;

  // "cuda sm_120" or "cpu".
  std::string platform() const;
  // "{dtype: bf16, kv_cache_dtype: fp8_model1, head_size: 512, ...}" (user-facing).
  std::string describe() const;
};

// Which kernel page sizes (tokens or entries per page) a backend accepts.
struct PageSizeRule {
  int min = 1;
  int max = INT_MAX;
  bool power_of_two = false;
  bool accepts(int page_size) const;
  std::string describe() const;  // "any >= 1", "powers of two 1..256"
};

// Geometry of one paged cache buffer in the layout a backend reads.
struct KvCacheShape {
  std::vector<int64_t> dims;  // e.g. {num_pages, page_size, 656} or {num_pages, page_bytes}
  DType dtype = DType::U8;
  size_t page_bytes = 0;
  size_t total_bytes() const;
};

class AttentionBackend;

// What the attention implementation is created for: the validated query plus the layer's
// selection shape.
struct AttentionImplConfig {
  AttentionQuery query;
  LayerKind kind = LayerKind::MlaSparse;
  int topk = 0;
  int window = 0;
  float softmax_scale = 0.f;
};

class AttentionImpl {
 public:
  AttentionImpl(const AttentionBackend& backend, AttentionImplConfig config)
      : backend_(&backend), config_(std::move(config)) {}
  virtual ~AttentionImpl() = default;
  const AttentionBackend& backend() const { return *backend_; }
  const AttentionImplConfig& config() const { return config_; }

  // Runs the sparse-MLA op (src/dsa/ops/sparse_mla) for one batch: checks that the tensors live
  // on this backend's platform and match the configuration (heads, d_qk, cache layout, sink),
  // then dispatches (CPU tensors: the reference; CUDA tensors: the portable kernel with `tactic`,
  // -1 = the installed tuning's choice for these dims, or the op's default without one:
  // ops/tactics/tactic_chooser.h).
  virtual void forward(const ops::SparseMlaParams& p, int tactic = -1) const;

 private:
  const AttentionBackend* backend_;
  AttentionImplConfig config_;
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // ---- declarations (each concrete backend answers these) ----
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual bool runs_on_gpu() const = 0;       // false: CPU platform only
  virtual bool requires_cuda_build() const { return runs_on_gpu(); }
  virtual std::vector<DType> supported_dtypes() const = 0;
  virtual std::vector<KvCacheDtype> supported_kv_cache_dtypes() const = 0;
  virtual PageSizeRule supported_page_sizes() const = 0;
  virtual std::vector<int> supported_head_sizes() const = 0;        // d_qk
  virtual std::vector<int> supported_v_head_sizes() const { return {512}; }
  virtual std::optional<std::vector<int>> supported_head_counts() const { return std::nullopt; }  // nullopt = any
  virtual bool is_mla() const = 0;
  virtual bool is_sparse() const = 0;
  virtual bool supports_sink() const = 0;
  // Capability predicate (asked only for GPU backends and a CUDA platform).
  virtual bool supports_capability(const Capability& cap) const = 0;
  virtual std::string capability_requirement() const = 0;  // e.g. "8.9, 9.x, 10.x or 12.x"
  // Last check over the whole combination; a reason when it does not fit, else nothing.
  virtual std::optional<std::string> supports_combination(const AttentionQuery& q) const;

  // ---- derived from the declarations ----
  // Every reason this backend cannot serve `q` (empty: it can). Order: platform, build,
  // capability, dtype, kv_cache_dtype, head_size, v_head_size, num_heads, page sizes, MLA,
  // sparse, sink, then supports_combination.
  std::vector<std::string> reasons(const AttentionQuery& q) const;
  bool valid_for(const AttentionQuery& q) const { return reasons(q).empty(); }

  // KV-cache buffer geometry for `num_pages` pages of `page_size` tokens/entries. Throws
  // dsa::Error when this backend does not read `kv` or the page size is not accepted.
  virtual KvCacheShape kv_cache_shape(int64_t num_pages, int page_size, KvCacheDtype kv, int head_size) const;
  size_t page_bytes(int page_size, KvCacheDtype kv, int head_size) const;

  // Factory: validates the configuration (throws dsa::Error with every reason) and returns the
  // implementation object for it.
  virtual std::unique_ptr<AttentionImpl> create_impl(const AttentionImplConfig& config) const;

 protected:
  // Shared combination rule: a concrete FP8 layout fixes d_qk (fp8_ds_mla 576, fp8_model1 512).
  static std::optional<std::string> layout_head_size_mismatch(const AttentionQuery& q);
};

}  // namespace dsa::attn
