#include "dsa/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/core/regular_file.h"

namespace dsa {

namespace {

struct DtypeName {
  std::string_view name;
  DType dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F8_E4M3", DType::E4M3}, {"F8_E8M0", DType::E8M0}, {"I8", DType::I8},   {"U8", DType::U8},
    {"BF16", DType::BF16},    {"F16", DType::F16},      {"F32", DType::F32}, {"I64", DType::I64},
    {"I32", DType::I32},
};
constexpr std::string_view kDtypeList = "F8_E4M3, F8_E8M0, I8, U8, BF16, F16, F32, I64, I32";

// A short, printable rendering of a JSON value for error messages.
std::string show(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

bool safetensors_dtype_supported(std::string_view name) {
  for (const auto& d : kDtypes)
    if (d.name == name) return true;
  return false;
}

DType safetensors_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (d.name == name) return d.dtype;
  fail("unsupported safetensors dtype '{}' (supported: {})", name, kDtypeList);
}

std::string_view safetensors_dtype_name(DType t) {
  if (t == DType::FP4X2) return "I8";
  for (const auto& d : kDtypes)
    if (d.dtype == t) return d.name;
  fail("dtype {} cannot be stored in a checkpoint (supported: {})", dtype_name(t), kDtypeList);
}

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries.end() && it->name == name ? &*it : nullptr;
}

SafetensorsHeader parse_safetensors(std::string_view label, const uint8_t* bytes, size_t size) {
  DSA_CHECK(size >= 8, "{}: truncated safetensors file: {} bytes, the 8-byte header length alone needs 8", label,
            size);
  const uint64_t n = read_u64_le(bytes);
  DSA_CHECK(n <= kSafetensorsMaxHeader, "{}: header length {} exceeds the limit of {} bytes (corrupt file?)", label,
            n, kSafetensorsMaxHeader);
  DSA_CHECK(n <= size - 8, "{}: header length {} runs past the end of the file ({} bytes after the length field)",
            label, n, size - 8);
  DSA_CHECK(n >= 2, "{}: header length {} is too small for a JSON object", label, n);

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes + 8, bytes + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: header is not valid JSON: {}", label, e.what());
  }
  DSA_CHECK(j.is_object(), "{}: header must be a JSON object, got {}", label, j.type_name());

  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_size = size - h.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      DSA_CHECK(v.is_object(), "{}: __metadata__ must be an object of strings, got {}", label, show(v));
      for (auto m = v.begin(); m != v.end(); ++m) {
        DSA_CHECK(m.value().is_string(), "{}: __metadata__ field '{}' must be a string, got {}", label, m.key(),
                  show(m.value()));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    DSA_CHECK(v.is_object(), "{}: tensor '{}': entry must be an object, got {}", label, name, show(v));
    SafetensorsEntry e;
    e.name = name;

    auto dt = v.find("dtype");
    DSA_CHECK(dt != v.end(), "{}: tensor '{}': field 'dtype' is missing", label, name);
    DSA_CHECK(dt->is_string(), "{}: tensor '{}': field 'dtype' must be a string, got {}", label, name, show(*dt));
    e.dtype_name = dt->get<std::string>();
    DSA_CHECK(safetensors_dtype_supported(e.dtype_name),
              "{}: tensor '{}': field 'dtype' has unsupported value '{}' (supported: {})", label, name, e.dtype_name,
              kDtypeList);
    e.dtype = safetensors_dtype(e.dtype_name);

    auto sh = v.find("shape");
    DSA_CHECK(sh != v.end(), "{}: tensor '{}': field 'shape' is missing", label, name);
    DSA_CHECK(sh->is_array(), "{}: tensor '{}': field 'shape' must be an array, got {}", label, name, show(*sh));
    DSA_CHECK(sh->size() <= 8, "{}: tensor '{}': field 'shape' has {} dimensions (at most 8 supported)", label, name,
              sh->size());
    // numel with overflow checks: dims and the product stay below 2^62.
    constexpr uint64_t kLimit = uint64_t{1} << 62;
    uint64_t numel = 1;
    bool zero = false;
    for (const auto& d : *sh) {
      DSA_CHECK(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                "{}: tensor '{}': field 'shape' has invalid dimension {} in {}", label, name, show(d), show(*sh));
      const uint64_t x = d.get<uint64_t>();
      DSA_CHECK(x < kLimit, "{}: tensor '{}': field 'shape' dimension {} is too large", label, name, x);
      e.shape.push_back(static_cast<int64_t>(x));
      if (x == 0) zero = true;
      else if (!zero) {
        DSA_CHECK(numel <= kLimit / x, "{}: tensor '{}': field 'shape' {} overflows the element count", label, name,
                  show(*sh));
        numel *= x;
      }
    }
    if (zero) numel = 0;

    auto off = v.find("data_offsets");
    DSA_CHECK(off != v.end(), "{}: tensor '{}': field 'data_offsets' is missing", label, name);
    DSA_CHECK(off->is_array() && off->size() == 2,
              "{}: tensor '{}': field 'data_offsets' must be an array [begin, end], got {}", label, name, show(*off));
    for (const auto& o : *off)
      DSA_CHECK(o.is_number_unsigned() || (o.is_number_integer() && o.get<int64_t>() >= 0),
                "{}: tensor '{}': field 'data_offsets' has invalid value {}", label, name, show(*off));
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    DSA_CHECK(e.begin <= e.end, "{}: tensor '{}': field 'data_offsets' [{}, {}] has begin after end", label, name,
              e.begin, e.end);
    DSA_CHECK(e.end <= data_size,
              "{}: tensor '{}': field 'data_offsets' [{}, {}] lies outside the data section of {} bytes", label, name,
              e.begin, e.end, data_size);
    const uint64_t es = dtype_size(e.dtype);
    DSA_CHECK(numel <= std::numeric_limits<uint64_t>::max() / es && e.end - e.begin == numel * es,
              "{}: tensor '{}': field 'data_offsets' [{}, {}] spans {} bytes but {} {} needs {} bytes", label, name,
              e.begin, e.end, e.end - e.begin, e.dtype_name, show(*sh), numel * es);
    h.entries.push_back(std::move(e));
  }

  // Byte ranges must not overlap (empty tensors occupy nothing).
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : h.entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* a = by_offset[i - 1];
    const auto* b = by_offset[i];
    DSA_CHECK(b->begin >= a->end,
              "{}: tensor '{}': field 'data_offsets' [{}, {}] overlaps tensor '{}' at [{}, {}]", label, b->name,
              b->begin, b->end, a->name, a->begin, a->end);
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return h;
}

// --- reader -------------------------------------------------------------------------------

namespace {
struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr) munmap(addr, len);
  }
};
}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const OpenedFile of = open_regular_file(path);  // refuses FIFOs and devices without blocking
  const int fd = of.fd;
  const size_t size = static_cast<size_t>(of.size);
  if (size < 8) {
    ::close(fd);
    fail("{}: truncated safetensors file: {} bytes, the 8-byte header length alone needs 8", path, size);
  }
  void* addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping stays valid after close
  DSA_CHECK(addr != MAP_FAILED, "{}: mmap of {} bytes failed: {}", path, size, std::strerror(err));
  auto m = std::make_shared<Mapping>();
  m->addr = addr;
  m->len = size;

  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->base_ = static_cast<const uint8_t*>(addr);
  f->size_ = size;
  f->mapping_ = m;
  f->header_ = parse_safetensors(path, f->base_, size);
  return f;
}

SafetensorsFile::~SafetensorsFile() = default;

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsEntry* e = header_.find(name);
  DSA_CHECK(e, "{}: tensor '{}' is not in this file", path_, name);
  return tensor(*e);
}

Tensor SafetensorsFile::tensor(const SafetensorsEntry& e) const {
  // The mapping is read-only: writing through the view faults. Views are handed out non-const
  // because Tensor has no const-data notion; callers treat checkpoint tensors as inputs.
  void* p = const_cast<uint8_t*>(base_ + header_.data_start + e.begin);
  return Tensor::from_blob(p, e.shape, e.dtype, Device::cpu(), {}, mapping_);
}

// --- writer -------------------------------------------------------------------------------

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  struct Item {
    const std::string* name;
    Tensor host;
  };
  std::vector<Item> items;
  items.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    DSA_CHECK(!name.empty() && name != "__metadata__", "{}: invalid tensor name '{}'", path, name);
    DSA_CHECK(t.defined(), "{}: tensor '{}' is undefined", path, name);
    (void)safetensors_dtype_name(t.dtype());  // throws for unstorable dtypes
    items.push_back({&name, t.to(Device::cpu())});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    size_t sa = dtype_size(a.host.dtype()), sb = dtype_size(b.host.dtype());
    return sa != sb ? sa > sb : *a.name < *b.name;
  });
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& it : items) {
    DSA_CHECK(!h.contains(*it.name), "{}: duplicate tensor name '{}'", path, *it.name);
    const uint64_t nb = it.host.nbytes();
    h[*it.name] = {{"dtype", safetensors_dtype_name(it.host.dtype())},
                   {"shape", it.host.shape()},
                   {"data_offsets", {off, off + nb}}};
    off += nb;
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs.push_back(' ');

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  DSA_CHECK(f, "{}: cannot create: {}", tmp, std::strerror(errno));
  bool ok = true;
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(hs.size()) >> (8 * i));
  ok = ok && std::fwrite(len, 1, 8, f) == 8;
  ok = ok && std::fwrite(hs.data(), 1, hs.size(), f) == hs.size();
  for (const auto& it : items)
    if (it.host.nbytes()) ok = ok && std::fwrite(it.host.raw(), 1, it.host.nbytes(), f) == it.host.nbytes();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("{}: write failed: {}", path, std::strerror(errno));
  }
  DSA_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "{}: rename from {} failed: {}", path, tmp,
            std::strerror(errno));
}

}  // namespace dsa
