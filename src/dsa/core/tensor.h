// Tensor: shape, strides (in elements), dtype, device, and storage that is either owned
// (allocated here, freed with the last reference) or borrowed (a pointer the caller keeps alive).
// Views (slice, select, reshape of contiguous data) share storage. No arithmetic lives here:
// ops take tensors and check them.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/dtype.h"
#include "dsa/core/error.h"

namespace dsa {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;
};

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);

// A block of memory on one device. Owning storage frees itself; borrowed storage does not, but
// may hold `keep_alive` (e.g. a memory-mapped file) so that the memory outlives every view.
class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device dev);
  static std::shared_ptr<Storage> borrow(void* ptr, size_t nbytes, Device dev,
                                         std::shared_ptr<const void> keep_alive = {});
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return ptr_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return dev_; }
  bool owning() const { return owning_; }

 private:
  Storage(void* p, size_t n, Device d, bool own) : ptr_(p), nbytes_(n), dev_(d), owning_(own) {}
  std::shared_ptr<const void> keep_alive_;
  void* ptr_;
  size_t nbytes_;
  Device dev_;
  bool owning_;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised owning tensor, contiguous row-major.
  static Tensor empty(Shape shape, DType dtype, Device dev = Device::cpu());
  static Tensor zeros(Shape shape, DType dtype, Device dev = Device::cpu());
  // Borrowed view over caller memory; the caller keeps `data` alive, or passes `keep_alive`, an
  // owner of that memory that every view of this tensor then holds (e.g. a file mapping).
  static Tensor from_blob(void* data, Shape shape, DType dtype, Device dev = Device::cpu(),
                          std::vector<int64_t> strides = {}, std::shared_ptr<const void> keep_alive = {});

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  template <typename T>
  T* data() const { return static_cast<T*>(raw()); }

  // Views.
  Tensor slice(int64_t d, int64_t start, int64_t end) const;  // [start, end) along d
  Tensor select(int64_t d, int64_t i) const;                  // drops dimension d
  Tensor reshape(Shape shape) const;                          // contiguous only; one -1 allowed
  Tensor view_as(DType dtype) const;                          // same bytes, other dtype (same size)

  // Copies. `to` returns a contiguous copy on dev (or *this when already there and contiguous).
  Tensor to(Device dev) const;
  Tensor contiguous() const;
  void copy_from(const Tensor& src);  // same shape and dtype, any devices; src may be strided on CPU
  void fill_bytes(uint8_t byte);      // every byte of the (contiguous) tensor

  // Throws unless this tensor has the given dtype and shape; `what` names it in the message.
  void check(std::string_view what, DType dtype, const Shape& shape) const;
  std::string str() const;  // "bf16[2, 3] cuda:0"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  std::vector<int64_t> strides_;
  DType dtype_ = DType::F32;
};

std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace dsa
