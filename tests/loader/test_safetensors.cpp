#include <cstring>

#include "common/testing.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/model/safetensors.h"
#include "loader_test_util.h"

using namespace dsa;
using dsa::test::error_of;

namespace {

std::vector<std::pair<std::string, Tensor>> sample_tensors(test::Rng& rng) {
  std::vector<std::pair<std::string, Tensor>> v;
  v.emplace_back("a.weight", test::random_bf16({3, 5}, rng));
  v.emplace_back("a.scale", test::random_bytes({1, 1}, DType::E8M0, rng));
  v.emplace_back("b.f32", test::random_f32({7}, rng));
  v.emplace_back("c.fp8", test::random_bytes({4, 6}, DType::E4M3, rng));
  v.emplace_back("d.i64", test::random_bytes({2, 3}, DType::I64, rng));
  v.emplace_back("e.i32", test::random_bytes({5}, DType::I32, rng));
  v.emplace_back("f.i8", test::random_bytes({2, 2}, DType::I8, rng));
  v.emplace_back("g.u8", test::random_bytes({3}, DType::U8, rng));
  v.emplace_back("h.f16", test::random_bytes({1, 3}, DType::F16, rng));
  v.emplace_back("empty", Tensor::empty({0, 4}, DType::F32));
  v.emplace_back("scalar", test::random_f32({}, rng));
  return v;
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtype) {
  test::Rng rng;
  test::TempDir dir;
  auto tensors = sample_tensors(rng);
  // A strided source tensor is written contiguously.
  Tensor big = test::random_f32({4, 6}, rng);
  tensors.emplace_back("strided", big.slice(1, 1, 4));
  write_safetensors(dir.file("m.safetensors"), tensors, {{"format", "pt"}});
  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    Tensor r = f->tensor(name);
    EXPECT_EQ(r.dtype(), t.dtype()) << name;
    EXPECT_EQ(r.shape(), t.shape()) << name;
    Tensor c = t.contiguous();
    ASSERT_EQ(r.nbytes(), c.nbytes()) << name;
    if (c.nbytes()) {
      EXPECT_EQ(std::memcmp(r.raw(), c.raw(), c.nbytes()), 0) << name;
    }
    // Each tensor is aligned to its element size (writer packs larger elements first).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.raw()) % dtype_size(r.dtype()), 0u) << name;
  }
  // Header size is padded to a multiple of 8 so the data section is 8-aligned.
  EXPECT_EQ(f->header().data_start % 8, 0u);
}

TEST(Safetensors, ViewOutlivesFile) {
  test::Rng rng;
  test::TempDir dir;
  Tensor src = test::random_f32({16}, rng);
  write_safetensors(dir.file("m.safetensors"), {{"x", src}});
  Tensor view;
  {
    auto f = SafetensorsFile::open(dir.file("m.safetensors"));
    view = f->tensor("x");
  }  // the file object is gone; the mapping lives on in the view's storage
  for (int i = 0; i < 16; ++i) EXPECT_EQ(view.data<float>()[i], src.data<float>()[i]);
  Tensor sl = view.slice(0, 4, 8);
  view = Tensor();
  EXPECT_EQ(sl.data<float>()[0], src.data<float>()[4]);
}

TEST(Safetensors, WriterRejectsDuplicatesAndUnstorableDtypes) {
  test::TempDir dir;
  Tensor a = Tensor::zeros({2}, DType::F32);
  EXPECT_HAS(error_of([&] { write_safetensors(dir.file("d.safetensors"), {{"x", a}, {"x", a}}); }), "duplicate");
  EXPECT_HAS(error_of([&] { write_safetensors(dir.file("d.safetensors"), {{"x", Tensor::zeros({2}, DType::F64)}}); }),
             "f64");
}

TEST(Safetensors, MissingTensorNamesFileAndTensor) {
  test::TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"x", Tensor::zeros({2}, DType::F32)}});
  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  std::string e = error_of([&] { f->tensor("nope"); });
  EXPECT_HAS(e, "nope");
  EXPECT_HAS(e, "m.safetensors");
}

// --- malformed files: every case must give a clear dsa::Error, never a crash ----------------

struct Malformed {
  const char* what;
  std::string bytes;
  std::vector<std::string> expect;  // substrings of the error
};

TEST(Safetensors, MalformedHeadersGiveClearErrors) {
  using test::safetensors_bytes;
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<Malformed> cases = {
      {"empty file", "", {"truncated", "0 bytes"}},
      {"short file", std::string(5, '\0'), {"truncated", "5 bytes"}},
      {"header length past EOF", safetensors_bytes("{" + ok_entry + "}", 8, 1000), {"header length 1000", "past the end"}},
      {"huge header length", safetensors_bytes("{}", 0, int64_t{1} << 40), {"exceeds the limit"}},
      {"bad JSON", safetensors_bytes(R"({"t":{"dtype":)", 8), {"not valid JSON"}},
      {"not an object", safetensors_bytes("[1,2,3]", 0), {"must be a JSON object"}},
      {"entry not an object", safetensors_bytes(R"({"t":5})", 0), {"'t'", "must be an object"}},
      {"missing dtype", safetensors_bytes(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8), {"'t'", "'dtype'", "missing"}},
      {"unknown dtype", safetensors_bytes(R"({"t":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[0,2]}})", 2),
       {"'t'", "'dtype'", "F8_E5M2", "unsupported"}},
      {"dtype not a string", safetensors_bytes(R"({"t":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8),
       {"'t'", "'dtype'", "7"}},
      {"negative dim", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       {"'t'", "'shape'", "-2"}},
      {"fractional dim", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
       {"'t'", "'shape'", "2.5"}},
      {"shape overflow",
       safetensors_bytes(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       {"'t'", "'shape'", "overflows"}},
      {"offsets missing", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2]}})", 8), {"'t'", "'data_offsets'", "missing"}},
      {"offsets wrong arity", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8),
       {"'t'", "'data_offsets'"}},
      {"offsets reversed", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       {"'t'", "'data_offsets'", "begin after end"}},
      {"offsets out of range", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8),
       {"'t'", "'data_offsets'", "[4, 12]", "outside the data section of 8 bytes"}},
      {"offsets negative", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
       {"'t'", "'data_offsets'", "-8"}},
      {"wrong size for dtype", safetensors_bytes(R"({"t":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", 8),
       {"'t'", "spans 8 bytes", "BF16", "needs 4 bytes"}},
      {"overlap",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         12),
       {"overlaps", "'a'", "'b'"}},
      {"metadata not strings", safetensors_bytes(R"({"__metadata__":{"k":1}})", 0), {"__metadata__", "'k'"}},
  };
  test::TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.file("bad.safetensors");
    test::write_file(path, c.bytes);
    std::string e = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_HAS(e, "bad.safetensors");  // the file is named
    for (const auto& s : c.expect) EXPECT_HAS(e, s);
    // The in-memory parser agrees (and never reads past the buffer).
    std::string e2 = error_of([&] {
      parse_safetensors("mem", reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size());
    });
    for (const auto& s : c.expect) EXPECT_HAS(e2, s);
  }
}

TEST(Safetensors, TruncatedDataSection) {
  // A valid file cut short: the header's offsets now run past the end of the data.
  test::Rng rng;
  test::TempDir dir;
  write_safetensors(dir.file("m.safetensors"), {{"x", test::random_f32({64}, rng)}});
  std::ifstream in(dir.file("m.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {bytes.size() - 1, bytes.size() - 200, size_t{20}, size_t{7}}) {
    SCOPED_TRACE(cut);
    test::write_file(dir.file("cut.safetensors"), bytes.substr(0, cut));
    std::string e = error_of([&] { SafetensorsFile::open(dir.file("cut.safetensors")); });
    EXPECT_HAS(e, "cut.safetensors");
  }
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  // Flip random bytes of the header of a valid file: every outcome is either a clean parse whose
  // entries all lie inside the file, or a dsa::Error.
  test::Rng rng;
  test::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> ts = {{"w", test::random_bf16({8, 8}, rng)},
                                                    {"s", test::random_bytes({2, 2}, DType::E8M0, rng)}};
  write_safetensors(dir.file("m.safetensors"), ts);
  std::ifstream in(dir.file("m.safetensors"), std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint64_t hlen = static_cast<uint8_t>(good[0]) | (static_cast<uint64_t>(static_cast<uint8_t>(good[1])) << 8);
  int errors = 0, parsed = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string b = good;
    int flips = static_cast<int>(rng.randint(1, 4));
    for (int k = 0; k < flips; ++k) {
      size_t pos = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(8 + hlen - 1)));
      b[pos] = static_cast<char>(rng.randint(0, 255));
    }
    try {
      auto h = parse_safetensors("fuzz", reinterpret_cast<const uint8_t*>(b.data()), b.size());
      for (const auto& e : h.entries) ASSERT_LE(h.data_start + e.end, b.size());
      ++parsed;
    } catch (const dsa::Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_EQ(errors + parsed, 2000);
}
