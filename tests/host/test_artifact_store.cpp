// The content-addressed artifact store: SHA-256, layout, round trip, corrupt or truncated
// artifacts treated as misses (and set aside), concurrent publishers (threads and forked
// processes) leaving one valid artifact, the default root.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "gemmtune/error.hpp"
#include "store/artifact_store.hpp"
#include "store/sha256.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class StoreDir {
 public:
  StoreDir() {
    char tmpl[] = "/tmp/gemmtune-artifacts-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~StoreDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;  // a million 'a', fed in uneven pieces
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left) {
    size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(ArtifactStore, RoundTripAndLayout) {
  StoreDir dir;
  std::string key = ArtifactStore::make_key("params of one kernel");
  ASSERT_EQ(key.size(), 64u);
  {
    ArtifactStore store(dir.path());
    EXPECT_FALSE(store.get(key));
    Artifact a = store.put(key, std::string("\x7f" "ELF cubin bytes\0with nul", 24), {{"function", "gemm_tiled"}});
    EXPECT_EQ(a.bytes->size(), 24u);
    EXPECT_EQ(a.meta["sha256"], sha256_hex(*a.bytes));
  }
  fs::path shard = dir.path() / key.substr(0, 2);
  EXPECT_EQ(names_in(shard), (std::vector<std::string>{".lock", key + ".bin", key + ".json"}));
  ArtifactStore fresh(dir.path());  // reads the files, not memory
  auto a = fresh.get(key);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->bytes, std::string("\x7f" "ELF cubin bytes\0with nul", 24));
  EXPECT_EQ(a->meta["function"], "gemm_tiled");
  EXPECT_EQ(a->meta["key"], key);
  EXPECT_EQ(a->meta["size"], 24);
  EXPECT_EQ(bytes_of(fresh.bin_path(key)), *a->bytes);
}

TEST(ArtifactStore, MemoryMapServesRepeatedGets) {
  StoreDir dir;
  std::string key = ArtifactStore::make_key("k");
  ArtifactStore store(dir.path());
  store.put(key, "bytes", {});
  fs::remove(store.bin_path(key));
  EXPECT_TRUE(store.get(key));                        // from memory
  EXPECT_FALSE(ArtifactStore(dir.path()).get(key));  // the files are incomplete
}

// Corrupt, truncated or unreadable entries are misses, set aside with a warning, never loaded;
// a later publish replaces them.
TEST(ArtifactStore, CorruptArtifactsAreMisses) {
  struct Damage {
    const char* what;
    void (*apply)(const fs::path& bin, const fs::path& json);
  };
  const Damage damages[] = {
      {"flipped byte",
       [](const fs::path& bin, const fs::path&) {
         std::string b = bytes_of(bin);
         b[5] ^= 0x20;
         std::ofstream(bin, std::ios::binary | std::ios::trunc) << b;
       }},
      {"truncated",
       [](const fs::path& bin, const fs::path&) { fs::resize_file(bin, 7); }},
      {"garbage metadata", [](const fs::path&, const fs::path& json) { std::ofstream(json) << "{not json"; }},
      {"missing bytes", [](const fs::path& bin, const fs::path&) { fs::remove(bin); }},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    StoreDir dir;
    std::string key = ArtifactStore::make_key(d.what);
    ArtifactStore(dir.path()).put(key, "a perfectly good cubin", {});
    ArtifactStore probe(dir.path());
    d.apply(probe.bin_path(key), probe.json_path(key));

    std::vector<std::string> warnings;
    ArtifactStore store(dir.path(), [&](const std::string& m) { warnings.push_back(m); });
    EXPECT_FALSE(store.get(key));
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("treated as a miss"), std::string::npos) << warnings[0];
    EXPECT_FALSE(fs::exists(store.json_path(key)));  // set aside
    bool aside = false;
    for (auto& n : names_in(store.bin_path(key).parent_path())) aside = aside || n.find(".bad-") != std::string::npos;
    EXPECT_TRUE(aside);

    store.put(key, "a perfectly good cubin", {});
    auto again = ArtifactStore(dir.path()).get(key);
    ASSERT_TRUE(again);
    EXPECT_EQ(*again->bytes, "a perfectly good cubin");
  }
}

TEST(ArtifactStore, MalformedKeysThrow) {
  StoreDir dir;
  ArtifactStore store(dir.path());
  for (std::string bad : {"", "abc", "../../etc/passwd", "ABCDEF0123456789", "0123456789abcdeg"}) {
    EXPECT_THROW(store.get(bad), Error) << bad;
    EXPECT_THROW(store.put(bad, "x", {}), Error) << bad;
  }
}

TEST(ArtifactStore, UnwritableRootKeepsTheArtifactInMemory) {
  StoreDir dir;
  std::ofstream(dir.path() / "a-file") << "x";
  std::vector<std::string> warnings;
  ArtifactStore store(dir.path() / "a-file" / "store", [&](const std::string& m) { warnings.push_back(m); });
  std::string key = ArtifactStore::make_key("x");
  Artifact a = store.put(key, "bytes", {});
  EXPECT_EQ(*a.bytes, "bytes");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("kept in memory only"), std::string::npos) << warnings[0];
  EXPECT_TRUE(store.get(key));
}

TEST(ArtifactStore, ConcurrentThreadsAgreeOnOneArtifact) {
  StoreDir dir;
  ArtifactStore store(dir.path());
  std::string key = ArtifactStore::make_key("threads");
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      ArtifactStore own(dir.path());  // separate stores: only the files and the lock are shared
      got[i] = *own.put(key, "payload " + std::to_string(i), {}).bytes;
    });
  for (auto& t : threads) t.join();
  for (auto& g : got) EXPECT_EQ(g, got[0]);
  auto a = store.get(key);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->bytes, got[0]);
}

TEST(ArtifactStore, ConcurrentProcessesLeaveOneValidArtifact) {
  StoreDir dir;
  std::string key = ArtifactStore::make_key("processes");
  std::vector<pid_t> pids;
  for (int i = 0; i < 6; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        ArtifactStore store(dir.path());
        for (int round = 0; round < 20; ++round)
          store.put(key, std::string(4096 + i, char('a' + i)), {{"writer", i}});
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ArtifactStore store(dir.path());
  auto a = store.get(key);
  ASSERT_TRUE(a);
  int writer = a->meta["writer"];
  EXPECT_EQ(*a->bytes, std::string(4096 + writer, char('a' + writer)));
  // No temporaries left behind: the lock, the bytes, the metadata.
  EXPECT_EQ(names_in(store.bin_path(key).parent_path()), (std::vector<std::string>{".lock", key + ".bin", key + ".json"}));
}

TEST(ArtifactStore, DefaultRootFollowsTheEnvironment) {
  auto saved = [](const char* name) { const char* v = std::getenv(name); return v ? std::optional<std::string>(v) : std::nullopt; };
  auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) setenv(name, v->c_str(), 1);
    else unsetenv(name);
  };
  auto home = saved("HOME"), xdg = saved("XDG_CACHE_HOME"), artifacts = saved("GEMMTUNE_ARTIFACTS");
  setenv("GEMMTUNE_ARTIFACTS", "/x/artifacts", 1);
  EXPECT_EQ(ArtifactStore::default_root(), fs::path("/x/artifacts"));
  unsetenv("GEMMTUNE_ARTIFACTS");
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(ArtifactStore::default_root(), fs::path("/x/cache/gemmtune/artifacts"));
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(ArtifactStore::default_root(), fs::path("/x/home/.cache/gemmtune/artifacts"));
  restore("HOME", home);
  restore("XDG_CACHE_HOME", xdg);
  restore("GEMMTUNE_ARTIFACTS", artifacts);
}

}  // namespace
}  // namespace gemmtune
