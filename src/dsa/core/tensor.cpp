#include "dsa/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "dsa/core/cuda_memory.h"

namespace dsa {

std::string Device::str() const { return is_cuda() ? fmt::format("cuda:{}", index) : "cpu"; }

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device dev) {
  void* p = nullptr;
  if (dev.is_cuda()) {
    p = cuda_memory::alloc(nbytes, dev.index);
  } else if (nbytes > 0) {
    // 64-byte alignment: vector loads in the CPU reference and mmap-like views never straddle.
    p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!p) fail("host allocation of {} bytes failed", nbytes);
  }
  return std::shared_ptr<Storage>(new Storage(p, nbytes, dev, true));
}

std::shared_ptr<Storage> Storage::borrow(void* ptr, size_t nbytes, Device dev, std::shared_ptr<const void> keep_alive) {
  auto s = std::shared_ptr<Storage>(new Storage(ptr, nbytes, dev, false));
  s->keep_alive_ = std::move(keep_alive);
  return s;
}

Storage::~Storage() {
  if (!owning_ || !ptr_) return;
  if (dev_.is_cuda())
    cuda_memory::free(ptr_, dev_.index);
  else
    std::free(ptr_);
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

static int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    DSA_CHECK(d >= 0, "negative dimension in shape {}", shape_str(s));
    n *= d;
  }
  return n;
}

Tensor Tensor::empty(Shape shape, DType dtype, Device dev) {
  Tensor t;
  int64_t n = shape_numel(shape);
  t.storage_ = Storage::allocate(static_cast<size_t>(n) * dtype_size(dtype), dev);
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device dev) {
  Tensor t = empty(std::move(shape), dtype, dev);
  t.fill_bytes(0);
  return t;
}

Tensor Tensor::from_blob(void* data, Shape shape, DType dtype, Device dev, std::vector<int64_t> strides,
                         std::shared_ptr<const void> keep_alive) {
  Tensor t;
  if (strides.empty()) strides = contiguous_strides(shape);
  DSA_CHECK(strides.size() == shape.size(), "from_blob: {} strides for shape {}", strides.size(), shape_str(shape));
  int64_t span = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    DSA_CHECK(strides[i] >= 0, "from_blob: negative stride {} in dimension {}", strides[i], i);
    if (shape[i] == 0) span = 0;
  }
  if (span != 0) {
    span = 1;
    for (size_t i = 0; i < shape.size(); ++i) span += (shape[i] - 1) * strides[i];
  }
  t.storage_ = Storage::borrow(data, static_cast<size_t>(span) * dtype_size(dtype), dev, std::move(keep_alive));
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.dtype_ = dtype;
  return t;
}

int64_t Tensor::size(int64_t d) const {
  if (d < 0) d += dim();
  DSA_CHECK(d >= 0 && d < dim(), "dimension {} out of range for tensor {}", d, str());
  return shape_[d];
}
int64_t Tensor::stride(int64_t d) const {
  if (d < 0) d += dim();
  DSA_CHECK(d >= 0 && d < dim(), "dimension {} out of range for tensor {}", d, str());
  return strides_[d];
}
int64_t Tensor::numel() const { return shape_numel(shape_); }

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != acc) return false;
    acc *= shape_[i];
  }
  return true;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end) const {
  if (d < 0) d += dim();
  DSA_CHECK(d >= 0 && d < dim(), "slice: dimension {} out of range for {}", d, str());
  DSA_CHECK(0 <= start && start <= end && end <= shape_[d], "slice [{}, {}) out of range for dimension {} of {}",
            start, end, d, str());
  Tensor t = *this;
  t.shape_[d] = end - start;
  t.offset_bytes_ += static_cast<size_t>(start * strides_[d]) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::select(int64_t d, int64_t i) const {
  if (d < 0) d += dim();
  DSA_CHECK(d >= 0 && d < dim(), "select: dimension {} out of range for {}", d, str());
  DSA_CHECK(0 <= i && i < shape_[d], "select: index {} out of range for dimension {} of {}", i, d, str());
  Tensor t = slice(d, i, i + 1);
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  DSA_CHECK(is_contiguous(), "reshape of non-contiguous tensor {}", str());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      DSA_CHECK(infer < 0, "reshape: more than one -1 in {}", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      DSA_CHECK(shape[i] >= 0, "reshape: bad dimension in {}", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    DSA_CHECK(known > 0 && numel() % known == 0, "reshape {} -> {}: sizes do not divide", str(), shape_str(shape));
    shape[infer] = numel() / known;
  }
  DSA_CHECK(shape_numel(shape) == numel(), "reshape {} -> {}: element counts differ", str(), shape_str(shape));
  Tensor t = *this;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view_as(DType dtype) const {
  DSA_CHECK(dtype_size(dtype) == dtype_size(dtype_), "view_as {} -> {}: element sizes differ", dtype_name(dtype_),
            dtype_name(dtype));
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

// Copies a strided CPU tensor element by element into contiguous memory.
static void gather_strided(const Tensor& src, char* dst) {
  const size_t es = dtype_size(src.dtype());
  const int64_t n = src.numel();
  std::vector<int64_t> idx(src.dim(), 0);
  const char* base = static_cast<const char*>(src.raw());
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (int64_t d = 0; d < src.dim(); ++d) off += idx[d] * src.strides()[d];
    std::memcpy(dst + k * es, base + off * es, es);
    for (int64_t d = src.dim(); d-- > 0;) {
      if (++idx[d] < src.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  DSA_CHECK(!device().is_cuda(), "contiguous(): strided CUDA tensors are not supported ({})", str());
  Tensor t = empty(shape_, dtype_, device());
  gather_strided(*this, t.data<char>());
  return t;
}

Tensor Tensor::to(Device dev) const {
  if (dev == device() && is_contiguous()) return *this;
  Tensor t = empty(shape_, dtype_, dev);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  DSA_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy_from: {} into {}", src.str(), str());
  DSA_CHECK(is_contiguous(), "copy_from: destination {} must be contiguous", str());
  Tensor s = src.device().is_cuda() ? src : src.contiguous();
  DSA_CHECK(s.is_contiguous(), "copy_from: strided CUDA source {} is not supported", src.str());
  const size_t n = nbytes();
  if (!device().is_cuda() && !s.device().is_cuda())
    std::memcpy(raw(), s.raw(), n);
  else if (device().is_cuda() && s.device().is_cuda())
    cuda_memory::copy(raw(), s.raw(), n, cuda_memory::Dir::D2D);
  else if (device().is_cuda())
    cuda_memory::copy(raw(), s.raw(), n, cuda_memory::Dir::H2D);
  else
    cuda_memory::copy(raw(), s.raw(), n, cuda_memory::Dir::D2H);
}

void Tensor::fill_bytes(uint8_t byte) {
  DSA_CHECK(is_contiguous(), "fill_bytes: tensor {} must be contiguous", str());
  if (device().is_cuda())
    cuda_memory::memset(raw(), byte, nbytes());
  else if (nbytes())
    std::memset(raw(), byte, nbytes());
}

void Tensor::check(std::string_view what, DType dtype, const Shape& shape) const {
  DSA_CHECK(defined(), "{}: tensor is missing", what);
  DSA_CHECK(dtype_ == dtype, "{}: expected dtype {}, got {}", what, dtype_name(dtype), dtype_name(dtype_));
  DSA_CHECK(shape_ == shape, "{}: expected shape {}, got {}", what, shape_str(shape), shape_str(shape_));
}

std::string Tensor::str() const {
  return fmt::format("{}{} {}", dtype_name(dtype_), shape_str(shape_), device().str());
}

}  // namespace dsa
