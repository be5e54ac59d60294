// Compiled with DSA_WITH_NCCL=1 only when CMake found NCCL (src/CMakeLists.txt); else the stubs
// at the end say how to get it.
#include "dsa/parallel/nccl_communicator.h"

#include <cstring>

#include "dsa/core/error.h"

#if DSA_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#endif

namespace dsa::parallel {

#if DSA_WITH_NCCL

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes), "NCCL_UNIQUE_ID_BYTES changed");

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail("NCCL {}: {} ({})", what, ncclGetErrorString(r), ncclGetLastError(nullptr));
}

ncclDataType_t nccl_dtype(DType d, const char* op) {
  switch (d) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
    default: fail("NCCL {}: dtype {} is not supported", op, dtype_name(d));
  }
}

cudaStream_t stream() { return static_cast<cudaStream_t>(cuda_stream::current()); }

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, const NcclUniqueId& id, int device) : rank_(rank), size_(size), device_(device) {
    DSA_CHECK(size >= 1 && rank >= 0 && rank < size, "NCCL: rank {} of a group of {}", rank, size);
    cuda_launch::set_device(device);
    ncclUniqueId nid;
    std::memcpy(&nid, id.bytes.data(), sizeof nid);
    check_nccl(ncclCommInitRank(&comm_, size, nid, rank), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    // Abort rather than destroy: never blocks on a peer that is gone.
    if (comm_) ncclCommAbort(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "nccl"; }

  void all_reduce_sum(const Tensor& t) override {
    check_reducible(t, "all_reduce_sum");
    on_device(t, "all_reduce_sum");
    check_nccl(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_dtype(t.dtype(), "all_reduce_sum"),
                             ncclSum, comm_, stream()),
               "all_reduce_sum");
    count_bytes(t.nbytes());
  }

  void all_gather(const Tensor& in, const Tensor& out) override {
    DSA_CHECK(in.defined() && out.defined() && in.dim() >= 1 && in.is_contiguous() && out.is_contiguous(),
              "NCCL all_gather: in and out must be contiguous with a dim 0");
    Shape want = in.shape();
    want[0] *= size_;
    DSA_CHECK(out.dtype() == in.dtype() && out.shape() == want, "NCCL all_gather on rank {}: out is {}, expected {}",
              rank_, out.str(), shape_str(want));
    on_device(in, "all_gather");
    on_device(out, "all_gather");
    check_nccl(ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_dtype(in.dtype(), "all_gather"),
                             comm_, stream()),
               "all_gather");
    count_bytes(in.nbytes());
  }

  void broadcast(const Tensor& t, int root) override {
    DSA_CHECK(t.defined() && t.is_contiguous(), "NCCL broadcast: the tensor must be defined and contiguous");
    on_device(t, "broadcast");
    broadcast_bytes(t.raw(), t.nbytes(), root);
  }

  // `data` must be device memory of this rank's GPU (NCCL moves device buffers only).
  void broadcast_bytes(void* data, size_t bytes, int root) override {
    DSA_CHECK(root >= 0 && root < size_, "NCCL broadcast: root {} is not a rank of a group of {}", root, size_);
    check_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream()), "broadcast");
    count_bytes(bytes);
  }

  void barrier() override {
    // A one-element all-reduce, waited for: every rank has reached it when it completes.
    if (!flag_.defined()) flag_ = Tensor::zeros({1}, DType::F32, Device::cuda(device_));
    check_nccl(ncclAllReduce(flag_.raw(), flag_.raw(), 1, ncclFloat32, ncclSum, comm_, stream()), "barrier");
    cuda_stream::synchronize();
  }

 private:
  void on_device(const Tensor& t, const char* op) const {
    DSA_CHECK(t.device() == Device::cuda(device_), "NCCL {} on rank {}: {} must be on cuda:{}", op, rank_, t.str(),
              device_);
  }

  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
  Tensor flag_;
};

}  // namespace

bool nccl_available() { return true; }

NcclUniqueId nccl_unique_id() {
  ncclUniqueId nid;
  check_nccl(ncclGetUniqueId(&nid), "ncclGetUniqueId");
  NcclUniqueId id;
  std::memcpy(id.bytes.data(), &nid, sizeof nid);
  return id;
}

std::unique_ptr<Communicator> make_nccl_communicator(int rank, int size, const NcclUniqueId& id, int device) {
  return std::make_unique<NcclCommunicator>(rank, size, id, device);
}

#else

bool nccl_available() { return false; }

NcclUniqueId nccl_unique_id() {
  fail("NCCL: this dsa was built without NCCL (needs CUDA and nccl.h / libnccl; CMake -DDSA_NCCL=ON to require it)");
}

std::unique_ptr<Communicator> make_nccl_communicator(int, int, const NcclUniqueId&, int) {
  fail("NCCL: this dsa was built without NCCL (needs CUDA and nccl.h / libnccl; CMake -DDSA_NCCL=ON to require it)");
}

#endif

}  // namespace dsa::parallel
