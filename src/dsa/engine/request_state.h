// RequestState: the per-request state a model forward keeps between steps that is not paged KV
// (DeepSeek-V4: the compressors' open window and overlap rows; GLM-5.1: nothing yet). The model
// code derives its own struct from it; the KV manager owns one per request (created by the model
// on first use, destroyed when the request is released) and hands it to the forward in the batch
// metadata, so per-request state is explicit and never a hidden global.
#pragma once

namespace dsa::engine {

struct RequestState {
  virtual ~RequestState() = default;
};

}  // namespace dsa::engine
