#include "dsa/core/trace.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/log.h"

namespace dsa {

bool trace_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DSA_TRACE");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

namespace {
double element(const Tensor& c, int64_t i) {
  switch (c.dtype()) {
    case DType::F32: return c.data<float>()[i];
    case DType::BF16: return bf16_bits_to_f32(c.data<uint16_t>()[i]);
    case DType::I32: return c.data<int32_t>()[i];
    case DType::I64: return static_cast<double>(c.data<int64_t>()[i]);
    default: return std::nan("");
  }
}
}  // namespace

void trace_tensor(std::string_view name, const Tensor& t, int first) {
  if (!trace_enabled()) return;
  if (!t.defined()) {
    log_write(LogLevel::Info, fmt::format("trace {} undefined", name));
    return;
  }
  const Tensor c = t.to(Device::cpu()).contiguous();
  double sum = 0, abssum = 0, amax = 0;
  std::string head;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const double v = element(c, i);
    sum += v;
    abssum += std::fabs(v);
    amax = std::fmax(amax, std::fabs(v));
    if (i < first) head += fmt::format("{}{:.6g}", i ? " " : "", v);
  }
  log_write(LogLevel::Info, fmt::format("trace {} {} sum={:.9g} abssum={:.9g} max|x|={:.6g} first=[{}]", name,
                                        shape_str(c.shape()), sum, abssum, amax, head));
}

}  // namespace dsa
