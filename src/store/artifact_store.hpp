// Content-addressed store of compiled artifacts (cubins and their launch metadata).
//
// Layout: <root>/<key[0:2]>/<key>.bin (the bytes) and <key>.json (metadata: the caller's fields
// plus "key", "size", "sha256" of the bytes and "mac"). The key is SHA-256 of everything that
// determines the bytes (make_key), so an entry never needs invalidating: a new compiler or
// template gives a new key.
//
// Publishing is atomic and safe across threads and processes: under an flock on the shard's
// .lock file, the .bin and then the .json are written to temporaries in the same directory,
// fsynced and renamed into place; the first publisher of a key wins and later ones get its
// artifact back. Readers take no lock: an artifact is used only when its bytes match the size
// and SHA-256 in its .json. A corrupt or truncated one is a miss: it is set aside
// (<key>.bin.bad-<unix time>) with a warning, under the lock, and never loaded.
// An in-memory map (bounded in bytes, oldest out first) sits in front of the files.
//
// Trust (artifacts are native code that the engine loads): directories are created 0700 and
// files 0600; a root or shard that another user can write is refused (Error). Reads are bounded:
// regular files only, symlinks not followed, the size checked before a byte is read (a FIFO or
// /dev/zero is a corrupt entry, not a hang). Every artifact carries "mac": HMAC-SHA256, under
// this machine's key (a file outside the store, securefs::load_or_create_key), of its metadata
// (which holds the bytes' SHA-256). An entry whose mac does not verify (a kernel pack built on
// another machine, or a pair replaced consistently) is not loaded: it is a miss, left in place,
// until trust() (`gemmtune store trust`) authenticates the store's entries with this key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace gemmtune {

struct Artifact {
  std::string key;
  std::shared_ptr<const std::string> bytes;  // verified against meta["sha256"]
  nlohmann::json meta;                       // the published .json
};

class ArtifactStore {
 public:
  // root empty: default_root(). log receives warnings (may be empty).
  // key_path empty: store_key_path() (core/settings.hpp).
  explicit ArtifactStore(std::filesystem::path root = {}, std::function<void(const std::string&)> log = {},
                         size_t memory_bytes = size_t(256) << 20, std::filesystem::path key_path = {});

  // $GEMMTUNE_ARTIFACTS, else $XDG_CACHE_HOME/gemmtune/artifacts, else ~/.cache/gemmtune/artifacts.
  static std::filesystem::path default_root();
  // 64 hex digits: SHA-256 of `material` (everything that determines the artifact).
  static std::string make_key(std::string_view material);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path bin_path(const std::string& key) const;
  std::filesystem::path json_path(const std::string& key) const;

  // The verified artifact, or nullopt on a miss (absent; corrupt: then set aside; not
  // authenticated: then left in place, see untrusted()). Throws Error when the root or the
  // key's shard can be written by another user.
  std::optional<Artifact> get(const std::string& key);
  // Whether a get() of this key found a consistent entry that this machine's key does not
  // authenticate (for the caller's message).
  bool untrusted(const std::string& key);
  // Publishes bytes + meta under key and returns the stored artifact (an earlier publisher's
  // when the key was already there). When the files cannot be written, warns and returns the
  // artifact kept in memory only. Throws Error for a malformed key.
  Artifact put(const std::string& key, std::string bytes, nlohmann::json meta);

  // The explicit trust step for a kernel pack built elsewhere (`gemmtune store trust`): every
  // entry whose bytes match its .json gets this machine's mac; corrupt ones are set aside.
  // Throws Error when the root can be written by others or the key cannot be had.
  struct TrustCount {
    size_t trusted = 0;    // authenticated now
    size_t already = 0;    // already authenticated by this key
    size_t set_aside = 0;  // corrupt: set aside
  };
  TrustCount trust();

  // Largest artifact (.bin) and metadata (.json) read from the files.
  static constexpr uint64_t kMaxArtifactBytes = uint64_t(1) << 30;
  static constexpr uint64_t kMaxMetaBytes = uint64_t(1) << 20;

 private:
  // `untrusted` (may be null): set when the files agree but the mac does not verify; with
  // `require_mac` false the mac is not checked at all.
  std::optional<Artifact> read_verified(const std::string& key, std::string* problem, bool* untrusted,
                                        bool require_mac = true);
  void check_dirs(const std::string& key);       // throws Error when another user can write them
  const std::string* machine_key();              // nullptr when it cannot be had (warned once)
  std::string mac_of(nlohmann::json meta, const std::string& machine_key) const;
  std::optional<Artifact> check_under_lock(const std::string& key);
  void set_aside(const std::string& key, const std::string& why);
  void publish(const std::string& key, const std::string& bytes, const nlohmann::json& meta);
  void remember(const Artifact& a);
  std::optional<Artifact> recall(const std::string& key);
  void warn(const std::string& msg) const;

  std::filesystem::path root_;
  std::function<void(const std::string&)> log_;
  size_t memory_cap_;
  std::filesystem::path key_path_;
  std::mutex mu_;
  bool key_loaded_ = false;
  std::optional<std::string> key_;  // the machine key, once loaded
  std::set<std::string> private_dirs_;  // root and shards found private
  std::set<std::string> untrusted_;     // keys found consistent but not authenticated
  bool warned_untrusted_ = false;
  std::map<std::string, Artifact> memory_;
  std::list<std::string> order_;  // insertion order, for eviction
  size_t memory_used_ = 0;
};

}  // namespace gemmtune
