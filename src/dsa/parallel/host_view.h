// A tensor as the host sees it, for the communicators that stage collectives through host memory
// (the in-process group, the TCP group): the tensor itself on the CPU, else a host copy that
// finish() writes back to the device.
#pragma once
#include "dsa/core/tensor.h"

namespace dsa::parallel {

struct HostView {
  Tensor dev, host;
  explicit HostView(const Tensor& t) : dev(t), host(t.device().is_cuda() ? t.to(Device::cpu()) : t) {}
  void finish() {
    if (dev.device().is_cuda()) dev.copy_from(host);
  }
};

}  // namespace dsa::parallel
