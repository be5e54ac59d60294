// The one request id of the stack: the engine hands it out, the KV manager keys a request's pages
// and state slots by it, the server maps it back to its stream.
#pragma once
#include <cstdint>

namespace dsa::kv {

using RequestId = int64_t;  // any value but kPaddingRequest (batch_metadata.h); the scheduler chooses

}  // namespace dsa::kv
