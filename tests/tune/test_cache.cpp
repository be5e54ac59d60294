// The tuning cache file: round trip, metadata mismatch (ignored, never overwritten), corrupt
// files (moved aside, tuning proceeds), signature changes (only that op's entries dropped) and
// two processes writing at once (nothing lost).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/testing.h"
#include "dsa/tune/tuning_cache.h"
#include "tune/tune_test_util.h"

using namespace dsa;
using namespace dsa::tune;
using namespace dsa::tune::test;
namespace fs = std::filesystem;

namespace {
TunedEntry entry(int tactic, double us = 10) {
  TunedEntry e;
  e.tactic = tactic;
  e.description = fmt::format("variant {}", tactic);
  e.us = us;
  e.default_us = 20;
  e.timings_us = {{"-1", 20.0}, {std::to_string(tactic), us}};
  e.tuned_at = "2026-11-30T12:00:00Z";
  return e;
}

std::vector<fs::path> files_with(const fs::path& dir, const std::string& part) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) out.push_back(e.path());
  return out;
}
}  // namespace

TEST(TuneCache, FileNameNamesTheDeviceKind) {
  TempDir d;
  TuningCache c(d.path, fake_metadata());
  EXPECT_EQ(c.primary_path().filename(), "tuning-nvidia-test-gpu-sm90.json");
  EXPECT_EQ(c.lock_path().filename(), "tuning-nvidia-test-gpu-sm90.json.lock");
  EXPECT_NE(c.fallback_path(), c.primary_path());
  CacheMetadata over = fake_metadata();
  over.route_capability = "12.0";  // DSA_DEVICE_CAPABILITY=12.0 on this GPU: other kernels
  EXPECT_EQ(TuningCache(d.path, over).primary_path().filename(), "tuning-nvidia-test-gpu-sm90-as-sm120.json");
  EXPECT_EQ(slugify("NVIDIA GeForce RTX 5090"), "nvidia-geforce-rtx-5090");
  EXPECT_EQ(slugify("  RTX PRO 6000 (Blackwell)  "), "rtx-pro-6000-blackwell");
}

TEST(TuneCache, DefaultDirFollowsTheEnvironment) {
  const char* saved[3];
  const char* names[3] = {"DSA_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  std::string keep[3];
  for (int i = 0; i < 3; ++i) {
    saved[i] = std::getenv(names[i]);
    if (saved[i]) keep[i] = saved[i];
  }
  ::setenv("DSA_CACHE_DIR", "/x/dsa-cache", 1);
  ::setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  ::setenv("HOME", "/x/home", 1);
  EXPECT_EQ(default_cache_dir(), fs::path("/x/dsa-cache"));
  ::unsetenv("DSA_CACHE_DIR");
  EXPECT_EQ(default_cache_dir(), fs::path("/x/xdg/dsa"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_dir(), fs::path("/x/home/.cache/dsa"));
  for (int i = 0; i < 3; ++i) {
    if (saved[i]) ::setenv(names[i], keep[i].c_str(), 1);
    else ::unsetenv(names[i]);
  }
}

TEST(TuneCache, SaveThenLoadRoundTrips) {
  TempDir d;
  TuningCache c(d.path, fake_metadata());
  TuningTable empty;
  auto missing = c.load(empty);
  EXPECT_EQ(missing.status, CacheLoadReport::Status::Missing);
  TuningTable t;
  t.set("sparse_mla_decode", "splits:v1", "h64|tokens=4", entry(3, 12.5));
  t.set("moe", "tiles:v1", "|tokens=1", entry(0));
  auto s = c.save(t);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.written, 2u);
  EXPECT_EQ(s.path, c.primary_path());
  TuningTable back;
  auto l = c.load(back);
  EXPECT_EQ(l.status, CacheLoadReport::Status::Loaded);
  EXPECT_EQ(l.entries, 2u);
  auto e = back.find("sparse_mla_decode", "splits:v1", "h64|tokens=4");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->tactic, 3);
  EXPECT_EQ(e->description, "variant 3");
  EXPECT_DOUBLE_EQ(e->us, 12.5);
  EXPECT_DOUBLE_EQ(e->default_us, 20);
  EXPECT_EQ(e->tuned_at, "2026-11-30T12:00:00Z");
  EXPECT_EQ(back.ours_count(), 0u);  // loaded entries are not re-written by this process
  auto j = nlohmann::json::parse(read_text(c.primary_path()));
  EXPECT_EQ(j["format"], "dsa-tuning-cache");
  EXPECT_EQ(j["metadata"]["device_name"], "NVIDIA Test GPU");
  EXPECT_EQ(j["metadata"]["sm_count"], 132);
  EXPECT_EQ(j["ops"]["sparse_mla_decode"]["signature"], "splits:v1");
  // No temp files left behind.
  EXPECT_TRUE(files_with(d.path, ".tmp-").empty());
}

TEST(TuneCache, MetadataMismatchIgnoresTheFileAndNeverOverwritesIt) {
  TempDir d;
  CacheMetadata old_meta = fake_metadata();
  old_meta.dsa_version = "0.0.9";
  old_meta.cuda_driver = 12080;
  TuningCache old_cache(d.path, old_meta);
  TuningTable old_table;
  old_table.set("sparse_mla_decode", "splits:v1", "h64|tokens=4", entry(5));
  ASSERT_TRUE(old_cache.save(old_table).ok);
  const std::string before = read_text(old_cache.primary_path());
  struct stat st_before {};
  ::stat(old_cache.primary_path().c_str(), &st_before);

  TuningCache c(d.path, fake_metadata());
  ASSERT_EQ(c.primary_path(), old_cache.primary_path());  // same device kind, same name
  TuningTable t;
  testing::internal::CaptureStderr();
  auto l = c.load(t);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(l.primary_mismatch);
  EXPECT_EQ(l.entries, 0u);
  EXPECT_FALSE(t.find("sparse_mla_decode", "splits:v1", "h64|tokens=4"));  // not used
  EXPECT_EQ(l.path, c.fallback_path());
  EXPECT_NE(err.find("dsa_version 0.0.9 vs 0.1.0"), std::string::npos) << err;
  EXPECT_NE(err.find("cuda_driver 12080 vs 13000"), std::string::npos) << err;
  EXPECT_NE(err.find("leaving it unchanged"), std::string::npos) << err;

  // Our tuning goes to the fallback file; the other stack's file is untouched.
  t.set("sparse_mla_decode", "splits:v1", "h64|tokens=4", entry(2));
  auto s = c.save(t);
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(s.path, c.fallback_path());
  EXPECT_EQ(read_text(old_cache.primary_path()), before);
  struct stat st_after {};
  ::stat(old_cache.primary_path().c_str(), &st_after);
  EXPECT_EQ(st_before.st_ino, st_after.st_ino);  // not replaced by a rename either

  // Each stack finds its own tuning again.
  TuningTable again;
  c.load(again);
  EXPECT_EQ(again.find("sparse_mla_decode", "splits:v1", "h64|tokens=4")->tactic, 2);
  TuningTable old_again;
  old_cache.load(old_again);
  EXPECT_EQ(old_again.find("sparse_mla_decode", "splits:v1", "h64|tokens=4")->tactic, 5);

  // A newer format version is also another stack's file: ignored, not overwritten.
  auto j = nlohmann::json::parse(before);
  j["format_version"] = 99;
  TempDir d2;
  TuningCache c2(d2.path, fake_metadata());
  write_text(c2.primary_path(), j.dump());
  TuningTable t2;
  EXPECT_TRUE(c2.load(t2).primary_mismatch);
  t2.set("x", "s", "k", entry(1));
  ASSERT_TRUE(c2.save(t2).ok);
  EXPECT_EQ(read_text(c2.primary_path()), j.dump());
}

TEST(TuneCache, CorruptOrTruncatedFileIsMovedAsideAndTuningProceeds) {
  // A valid file to truncate.
  TempDir src;
  TuningCache sc(src.path, fake_metadata());
  TuningTable full;
  for (int i = 0; i < 8; ++i) full.set("sparse_mla_decode", "splits:v1", fmt::format("|tokens={}", 1 << i), entry(i));
  ASSERT_TRUE(sc.save(full).ok);
  const std::string good = read_text(sc.primary_path());
  auto schema_broken = nlohmann::json::parse(good);
  schema_broken["ops"]["sparse_mla_decode"]["entries"]["|tokens=1"]["tactic"] = "three";
  auto no_meta = nlohmann::json::parse(good);
  no_meta.erase("metadata");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", good.substr(0, good.size() / 2)},
      {"empty", ""},
      {"garbage", std::string("\x7f" "ELF\x01\x02 not json at all")},
      {"wrong schema", schema_broken.dump()},
      {"no metadata", no_meta.dump()},
      {"not an object", "[1, 2, 3]"},
  };
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    TempDir d;
    TuningCache c(d.path, fake_metadata());
    write_text(c.primary_path(), text);
    TuningTable t;
    testing::internal::CaptureStderr();
    auto l = c.load(t);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(l.status, CacheLoadReport::Status::Corrupt);
    EXPECT_EQ(l.entries, 0u);
    EXPECT_NE(err.find("is corrupt"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(c.primary_path()));
    auto aside = files_with(d.path, ".corrupt-");
    ASSERT_EQ(aside.size(), 1u);
    EXPECT_EQ(aside[0], l.moved_aside);
    EXPECT_EQ(read_text(aside[0]), text);  // kept for inspection, byte for byte
    // Tuning proceeds: a save writes a fresh, valid file.
    t.set("sparse_mla_decode", "splits:v1", "|tokens=1", entry(1));
    ASSERT_TRUE(c.save(t).ok);
    TuningTable back;
    EXPECT_EQ(c.load(back).entries, 1u);
  }
}

TEST(TuneCache, CorruptFileFoundAtSaveTimeIsMovedAsideToo) {
  TempDir d;
  TuningCache c(d.path, fake_metadata());
  TuningTable t;
  c.load(t);  // nothing there yet
  write_text(c.primary_path(), "{\"format\": \"dsa-tuning-cache\", \"format_versi");  // appears meanwhile
  t.set("f", "s", "k", entry(1));
  testing::internal::CaptureStderr();
  auto s = c.save(t);
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok) << s.error;
  EXPECT_EQ(files_with(d.path, ".corrupt-").size(), 1u);
  EXPECT_NE(err.find("is corrupt"), std::string::npos);
  TuningTable back;
  EXPECT_EQ(c.load(back).entries, 1u);
}

TEST(TuneCache, SignatureChangeInvalidatesOnlyThatOp) {
  TempDir d;
  TuningCache c(d.path, fake_metadata());
  TuningTable t;
  t.set("sparse_mla_decode", "splits:1,2,4", "|tokens=1", entry(1));
  t.set("sparse_mla_decode", "splits:1,2,4", "|tokens=2", entry(2));
  t.set("moe_expert_gemm", "tiles:v1", "|tokens=1", entry(0));
  ASSERT_TRUE(c.save(t).ok);

  // This build's attention op has a new tactic set; the MoE op did not change.
  std::map<std::string, std::string> sigs = {{"sparse_mla_decode", "splits:1,2,4,8"},
                                             {"moe_expert_gemm", "tiles:v1"}};
  TuningTable now;
  auto l = c.load(now, sigs);
  EXPECT_EQ(l.entries, 1u);
  EXPECT_EQ(l.ignored_entries, 2u);
  EXPECT_FALSE(now.find("sparse_mla_decode", "splits:1,2,4", "|tokens=1"));
  EXPECT_EQ(now.find("moe_expert_gemm", "tiles:v1", "|tokens=1")->tactic, 0);

  // Without the signature list the stale entries are loaded but never match a lookup (see
  // test_table); re-tuning under the new signature replaces only that family on disk.
  now.set("sparse_mla_decode", "splits:1,2,4,8", "|tokens=1", entry(7));
  ASSERT_TRUE(c.save(now).ok);
  auto j = nlohmann::json::parse(read_text(c.primary_path()));
  EXPECT_EQ(j["ops"]["sparse_mla_decode"]["signature"], "splits:1,2,4,8");
  EXPECT_EQ(j["ops"]["sparse_mla_decode"]["entries"].size(), 1u);
  EXPECT_EQ(j["ops"]["moe_expert_gemm"]["entries"].size(), 1u);  // untouched
}

TEST(TuneCache, MergeKeepsDiskEntriesAndOursWinOnTheSameKey) {
  TempDir d;
  TuningCache c(d.path, fake_metadata());
  TuningTable a;
  a.set("f", "s", "k1", entry(1));
  a.set("f", "s", "k2", entry(2));
  ASSERT_TRUE(c.save(a).ok);
  TuningTable b;  // another process that did not load: tunes k2 again and k3
  b.set("f", "s", "k2", entry(5));
  b.set("f", "s", "k3", entry(3));
  auto s = c.save(b);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.written, 2u);
  EXPECT_EQ(s.total, 3u);
  TuningTable back;
  c.load(back);
  EXPECT_EQ(back.find("f", "s", "k1")->tactic, 1);
  EXPECT_EQ(back.find("f", "s", "k2")->tactic, 5);
  EXPECT_EQ(back.find("f", "s", "k3")->tactic, 3);
}

TEST(TuneCache, UnwritableDirectoryIsReportedNotThrown) {
  // A regular file where the cache directory should be: fails for every user, root included.
  TempDir d;
  write_text(d.path / "not-a-dir", "x");
  TuningCache c(d.path / "not-a-dir" / "cache", fake_metadata());
  TuningTable t;
  EXPECT_EQ(c.load(t).status, CacheLoadReport::Status::Missing);
  t.set("f", "s", "k", entry(1));
  testing::internal::CaptureStderr();
  auto s = c.save(t);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(s.ok);
  EXPECT_FALSE(s.error.empty());
  EXPECT_NE(err.find("not saved"), std::string::npos) << err;
  EXPECT_EQ(t.find("f", "s", "k")->tactic, 1);  // the in-memory choice stays usable
}

TEST(TuneCache, FallbackFileIsUsedWhenThePrimaryIsGone) {
  TempDir d;
  CacheMetadata other = fake_metadata();
  other.cuda_runtime = 12090;
  TuningTable ot;
  ot.set("f", "s", "k0", entry(4));
  ASSERT_TRUE(TuningCache(d.path, other).save(ot).ok);  // another stack owns the primary name
  TuningCache c(d.path, fake_metadata());
  TuningTable t;
  testing::internal::CaptureStderr();
  c.load(t);
  testing::internal::GetCapturedStderr();
  t.set("f", "s", "k1", entry(1));
  ASSERT_EQ(c.save(t).path, c.fallback_path());
  std::filesystem::remove(c.primary_path());  // the user removes the other stack's file
  TuningTable again;
  auto l = c.load(again);
  EXPECT_EQ(l.path, c.fallback_path());
  EXPECT_EQ(l.entries, 1u);
  EXPECT_EQ(again.find("f", "s", "k1")->tactic, 1);
}

// Two processes (fork) save disjoint entries at the same time, one entry per save, each from
// a fresh table so that nothing but the merge on disk can keep the other's entries. Without
// the lock, the re-read and the atomic rename, entries get lost.
TEST(TuneCache, TwoProcessesWritingAtOnceLoseNothing) {
  TempDir d;
  constexpr int kPerProcess = 40;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> kids;
  for (int who = 0; who < 2; ++who) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      char c;
      (void)!::read(go[0], &c, 1);  // both start when the parent closes the pipe
      int bad = 0;
      try {
        TuningCache cache(d.path, fake_metadata());
        for (int i = 0; i < kPerProcess; ++i) {
          TuningTable t;
          t.set(who ? "moe_expert_gemm" : "sparse_mla_decode", "v1", fmt::format("|tokens={}", i), entry(i % 5));
          t.set("shared_family", "v1", fmt::format("p{}|tokens={}", who, i), entry(who));
          if (!cache.save(t).ok) ++bad;
        }
      } catch (...) {
        bad = 100;
      }
      ::_exit(bad ? 1 : 0);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer process failed";
  }
  TuningCache c(d.path, fake_metadata());
  TuningTable all;
  auto l = c.load(all);
  EXPECT_EQ(l.entries, 4u * kPerProcess);
  for (int i = 0; i < kPerProcess; ++i) {
    EXPECT_TRUE(all.find("sparse_mla_decode", "v1", fmt::format("|tokens={}", i))) << i;
    EXPECT_TRUE(all.find("moe_expert_gemm", "v1", fmt::format("|tokens={}", i))) << i;
    EXPECT_TRUE(all.find("shared_family", "v1", fmt::format("p0|tokens={}", i))) << i;
    EXPECT_TRUE(all.find("shared_family", "v1", fmt::format("p1|tokens={}", i))) << i;
  }
  EXPECT_TRUE(files_with(d.path, ".tmp-").empty());
  EXPECT_TRUE(files_with(d.path, ".corrupt-").empty());
}
