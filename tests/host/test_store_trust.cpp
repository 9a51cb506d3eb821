// The trusted artifact store (reliability audit 2026-12-01, D2, D3, D4): private directories and
// files, a store another user can write refused, bounded reads (FIFO, /dev/zero, sparse files,
// symlinks), artifacts authenticated by this machine's key, and the explicit trust step for a
// kernel pack built elsewhere.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include "gemmtune/error.hpp"
#include "host/problems.hpp"
#include "store/artifact_store.hpp"
#include "store/secure_fs.hpp"
#include "store/sha256.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using host_test::Exec;
using host_test::run_cli;
using host_test::TempDir;
using nlohmann::json;

unsigned mode_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

// A store and a machine key of its own in a temporary directory; warnings collected.
struct Fixture {
  TempDir dir{"gemmtune_trust_"};
  fs::path root = dir.root / "store", key = dir.root / "keys" / "store.key";
  std::vector<std::string> warnings;
  ArtifactStore store(const fs::path& key_path) {
    return ArtifactStore(root, [this](const std::string& m) { warnings.push_back(m); }, size_t(256) << 20, key_path);
  }
  ArtifactStore store() { return store(key); }
  bool warned(const std::string& part) const {
    for (const auto& w : warnings)
      if (w.find(part) != std::string::npos) return true;
    return false;
  }
};

// Replaces an entry's bytes and rewrites its .json consistently (size, SHA-256), as the audit's
// D2 reproduction does; the mac, if any, is kept as it was.
void replace_consistently(ArtifactStore& s, const std::string& key, const std::string& bytes) {
  write_text(s.bin_path(key), bytes);
  json meta = json::parse(text_of(s.json_path(key)));
  meta["sha256"] = sha256_hex(bytes);
  meta["size"] = bytes.size();
  write_text(s.json_path(key), meta.dump(2));
}

TEST(SecureFs, HmacSha256KnownVectors) {
  // RFC 4231 test cases 1 and 2.
  EXPECT_EQ(securefs::hmac_sha256_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(securefs::hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block (131 bytes of 0xaa).
  EXPECT_EQ(securefs::hmac_sha256_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(SecureFs, MachineKeyIsPrivateAndStable) {
  TempDir dir("gemmtune_key_");
  const fs::path key = dir.root / "a" / "b" / "store.key";
  const std::string k = securefs::load_or_create_key(key);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(securefs::load_or_create_key(key), k);
  EXPECT_EQ(mode_of(key), 0600u);
  EXPECT_EQ(mode_of(key.parent_path()), 0700u);
  EXPECT_EQ(mode_of(key.parent_path().parent_path()), 0700u);
  // A key others can read is refused (as ssh refuses such a private key), naming the fix.
  chmod(key.c_str(), 0644);
  try {
    securefs::load_or_create_key(key);
    ADD_FAILURE() << "a 0644 key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("chmod 600"), std::string::npos) << e.message();
  }
  fs::remove(key);
  fs::create_symlink("/dev/zero", key);
  EXPECT_THROW(securefs::load_or_create_key(key), Error);
}

// D3: under umask 000 the store's directories are still 0700 and its files 0600.
TEST(StoreTrust, DirectoriesArePrivateUnderAnyUmask) {
  Fixture f;
  const mode_t old = umask(0);
  std::string key = ArtifactStore::make_key("umask");
  {
    ArtifactStore s(f.dir.root / "a" / "store", {}, size_t(1) << 20, f.key);
    s.put(key, "bytes", {});
    umask(old);
    EXPECT_EQ(mode_of(f.dir.root / "a"), 0700u);
    EXPECT_EQ(mode_of(f.dir.root / "a" / "store"), 0700u);
    EXPECT_EQ(mode_of(s.bin_path(key).parent_path()), 0700u);
    EXPECT_EQ(mode_of(s.bin_path(key)), 0600u);
    EXPECT_EQ(mode_of(s.json_path(key)), 0600u);
    EXPECT_EQ(mode_of(s.bin_path(key).parent_path() / ".lock"), 0600u);
  }
  umask(old);
}

// D3: a root or shard that another user can write is refused with a clear error, not used.
TEST(StoreTrust, StoreOthersCanWriteIsRefused) {
  Fixture f;
  std::string key = ArtifactStore::make_key("shared dir");
  f.store().put(key, "bytes", {});
  for (const fs::path& dir : {f.root, f.root / key.substr(0, 2)}) {
    SCOPED_TRACE(dir.string());
    for (unsigned mode : {0777u, 0770u, 01777u}) {
      ASSERT_EQ(chmod(dir.c_str(), mode), 0);
      ArtifactStore s = f.store();
      try {
        s.get(key);
        ADD_FAILURE() << "mode " << std::oct << mode << " accepted";
      } catch (const Error& e) {
        EXPECT_NE(e.message().find("another user could plant files"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find(dir.string()), std::string::npos) << e.message();
      }
      EXPECT_THROW(s.put(key, "planted", {}), Error);  // never written into such a store
      EXPECT_THROW(s.trust(), Error);
    }
    ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  }
  EXPECT_TRUE(f.store().get(key));
}

// D2: an artifact replaced consistently (bytes + .json agree) is not loaded: its mac does not
// verify. It stays where it is (a miss, not set aside), the warning names the trust step, and
// a compile's put() replaces it.
TEST(StoreTrust, ConsistentReplacementIsNotLoaded) {
  Fixture f;
  std::string key = ArtifactStore::make_key("kernel .so");
  f.store().put(key, "the real kernel", {{"config", "64x64"}});
  {
    ArtifactStore probe = f.store();
    replace_consistently(probe, key, "planted code");
  }
  ArtifactStore s = f.store();
  EXPECT_FALSE(s.get(key));
  EXPECT_TRUE(s.untrusted(key));
  EXPECT_TRUE(fs::exists(s.bin_path(key)));  // left in place
  EXPECT_TRUE(f.warned("gemmtune store trust")) << (f.warnings.empty() ? "" : f.warnings[0]);
  // The mac field removed, or copied from another entry: refused the same way.
  json meta = json::parse(text_of(s.json_path(key)));
  meta.erase("mac");
  write_text(s.json_path(key), meta.dump());
  EXPECT_FALSE(f.store().get(key));
  // A compile publishes the real bytes over it.
  Artifact a = s.put(key, "the real kernel", {{"config", "64x64"}});
  EXPECT_EQ(*a.bytes, "the real kernel");
  auto again = f.store().get(key);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again->bytes, "the real kernel");
  // The metadata the loader reads is covered too: a changed config with the bytes kept is refused.
  meta = json::parse(text_of(s.json_path(key)));
  meta["config"] = "128x128";
  write_text(s.json_path(key), meta.dump());
  EXPECT_FALSE(f.store().get(key));
}

// A kernel pack built on another machine (another key): not loaded until trust(); trust() then
// authenticates every intact entry and sets corrupt ones aside.
TEST(StoreTrust, PackFromAnotherMachineNeedsTheTrustStep) {
  Fixture f;
  const fs::path builder_key = f.dir.root / "builder" / "store.key";
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(ArtifactStore::make_key("pack entry " + std::to_string(i)));
    f.store(builder_key).put(keys.back(), "artifact " + std::to_string(i), {{"i", i}});
  }
  {  // one entry corrupt in transit
    ArtifactStore probe = f.store();
    write_text(probe.bin_path(keys[4]), "artifact 4 but damaged");
  }
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(f.store().get(keys[i])) << i;
  const ArtifactStore::TrustCount n = f.store().trust();
  EXPECT_EQ(n.trusted, 4u);
  EXPECT_EQ(n.already, 0u);
  EXPECT_EQ(n.set_aside, 1u);
  for (int i = 0; i < 4; ++i) {
    auto a = f.store().get(keys[i]);
    ASSERT_TRUE(a) << i;
    EXPECT_EQ(*a->bytes, "artifact " + std::to_string(i));
  }
  EXPECT_FALSE(f.store().get(keys[4]));
  EXPECT_FALSE(fs::exists(f.store().json_path(keys[4])));  // set aside
  const ArtifactStore::TrustCount again = f.store().trust();
  EXPECT_EQ(again.trusted, 0u);
  EXPECT_EQ(again.already, 4u);
  // The builder's key no longer authenticates them: the pack is this machine's now.
  EXPECT_FALSE(f.store(builder_key).get(keys[0]));
}

// D4: reads are bounded. A FIFO, a symlink to /dev/zero, a sparse file far larger than its
// .json says, a .json of many megabytes: each is a corrupt entry, found at once, set aside.
TEST(StoreTrust, ReadsAreBounded) {
  struct Case {
    const char* what;
    void (*apply)(const fs::path& bin, const fs::path& json);
  };
  const Case cases[] = {
      {"FIFO .bin", [](const fs::path& bin, const fs::path&) { fs::remove(bin), mkfifo(bin.c_str(), 0600); }},
      {"FIFO .json", [](const fs::path&, const fs::path& j) { fs::remove(j), mkfifo(j.c_str(), 0600); }},
      {"/dev/zero .bin", [](const fs::path& bin, const fs::path&) { fs::remove(bin), fs::create_symlink("/dev/zero", bin); }},
      {"symlink .json", [](const fs::path&, const fs::path& j) {
         fs::rename(j, j.string() + ".real");
         fs::create_symlink(j.string() + ".real", j);
       }},
      {"3 GB sparse .bin", [](const fs::path& bin, const fs::path&) { fs::resize_file(bin, uint64_t(3) << 30); }},
      {"huge claimed size", [](const fs::path&, const fs::path& j) {
         json meta = json::parse(text_of(j));
         meta["size"] = uint64_t(1) << 40;
         write_text(j, meta.dump());
       }},
      {"20 MB .json", [](const fs::path&, const fs::path& j) { write_text(j, std::string(20 << 20, ' ') + "{}"); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Fixture f;
    std::string key = ArtifactStore::make_key(c.what);
    f.store().put(key, "a perfectly good artifact", {});
    {
      ArtifactStore probe = f.store();
      c.apply(probe.bin_path(key), probe.json_path(key));
    }
    // On a thread, so that a hang fails the test instead of blocking it.
    auto got = std::async(std::launch::async, [&] {
      ArtifactStore s = f.store();
      return s.get(key).has_value();
    });
    ASSERT_EQ(got.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "hung";
    EXPECT_FALSE(got.get());
    EXPECT_TRUE(f.warned("treated as a miss")) << (f.warnings.empty() ? "(no warning)" : f.warnings[0]);
    // A publish afterwards works again.
    f.store().put(key, "a perfectly good artifact", {});
    EXPECT_TRUE(f.store().get(key));
  }
}

// `gemmtune store trust DIR`: the CLI's trust step, scriptable (exit 0, counts on stdout).
// run_cli points the machine key into its directory (host/problems.hpp).
TEST(StoreTrust, CliTrustStep) {
  TempDir dir("gemmtune_trust_cli_");
  const fs::path root = dir.root / "pack";
  std::string key = ArtifactStore::make_key("cli");
  ArtifactStore(root, {}, size_t(1) << 20, dir.root / "builder.key").put(key, "bytes", {});
  ArtifactStore here(root, {}, size_t(1) << 20, dir.root / "store.key");
  EXPECT_FALSE(here.get(key));
  Exec e = run_cli(dir.root, "store trust '" + root.string() + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("trusted 1 artifact of " + root.string() + " (0 already trusted, 0 corrupt set aside)"),
            std::string::npos)
      << e.out;
  e = run_cli(dir.root, "store trust '" + root.string() + "'");
  EXPECT_NE(e.out.find("trusted 0 artifacts of " + root.string() + " (1 already trusted"), std::string::npos) << e.out;
  EXPECT_TRUE(ArtifactStore(root, {}, size_t(1) << 20, dir.root / "store.key").get(key));
  // A store others can write: exit 1 and the reason.
  chmod(root.c_str(), 0777);
  e = run_cli(dir.root, "store trust '" + root.string() + "'");
  EXPECT_EQ(e.code, 1);
  EXPECT_NE(e.err.find("another user could plant files"), std::string::npos) << e.err;
}

}  // namespace
}  // namespace gemmtune
