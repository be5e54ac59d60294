// The compressor over every request of one engine step at once (compressor.h gives the math and
// the per-request form, which this op must reproduce exactly on the CPU).
//
// Request r of the step owns rows [query_start[r], query_start[r + 1]) of kv / score: its tokens
// at positions cached_lens[r], cached_lens[r] + 1, ... Its compressor state lives in slot
// state_slots[r] of a state pool (kv::StatePool: u8 [slots * compressor_state_bytes(cfg)], each
// slot = f32 kv rows then f32 score rows, the layout of CompressorState); a request with
// cached_lens[r] == 0 starts from an empty state (the op initialises the slot, so the engine
// never clears state memory). A request row with state slot -1 (a padding row of a bucketed
// decode step, kv::pad_metadata) is skipped: no state read or written, no entry row written. The k-th entry request r emits goes to row entry_start[r] + k of
// entries_out (the KV manager's entry_start of the compressed cache group, one row per token,
// whose slots receive them); rows of the request past its entries are left unwritten. A request
// must have at least as many rows as it emits entries (checked on the CPU; the CUDA kernel never
// writes past a request's rows).
//
// CPU: a loop over the requests calling compressor_forward on views of their state slots (the
// reference). CUDA: one kernel, one CTA of head_dim threads per request, that runs the state
// recurrence, pools, RMS-normalises and rotates each closing window and writes the entry in
// entries_out's dtype; no host loop, no host read of the metadata.
#pragma once
#include <cstddef>

#include "dsa/core/tensor.h"
#include "dsa/ops/compressor/compressor.h"

namespace dsa::ops {

struct CompressorBatch {
  Tensor state;        // u8 [slots * compressor_state_bytes(cfg)], contiguous
  Tensor state_slots;  // i32 [R]
  Tensor query_start;  // i32 [R + 1]
  Tensor cached_lens;  // i32 [R]
  Tensor entry_start;  // i32 [R + 1]
};

// Bytes of one request's state: f32 [coff*m][coff*d] kv + the same for score.
size_t compressor_state_bytes(const CompressorConfig& cfg);

// kv, score: [T][coff*d] f32|bf16; ape: [m][coff*d] f32; norm_weight [d] f32|bf16;
// entries_out: [E][d] f32|bf16 contiguous (E = entry_start[R], may be 0). All on one device.
void compressor_forward_batch(const CompressorConfig& cfg, const CompressorBatch& b, const Tensor& kv,
                              const Tensor& score, const Tensor& ape, const Tensor& norm_weight,
                              const Tensor& entries_out);

}  // namespace dsa::ops
