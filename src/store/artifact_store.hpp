// Content-addressed store of compiled artifacts (cubins and their launch metadata).
//
// Layout: <root>/<key[0:2]>/<key>.bin (the bytes) and <key>.json (metadata: the caller's fields
// plus "key", "size" and "sha256" of the bytes). The key is SHA-256 of everything that
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
  explicit ArtifactStore(std::filesystem::path root = {}, std::function<void(const std::string&)> log = {},
                         size_t memory_bytes = size_t(256) << 20);

  // $GEMMTUNE_ARTIFACTS, else $XDG_CACHE_HOME/gemmtune/artifacts, else ~/.cache/gemmtune/artifacts.
  static std::filesystem::path default_root();
  // 64 hex digits: SHA-256 of `material` (everything that determines the artifact).
  static std::string make_key(std::string_view material);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path bin_path(const std::string& key) const;
  std::filesystem::path json_path(const std::string& key) const;

  // The verified artifact, or nullopt on a miss (absent, or corrupt: then set aside).
  std::optional<Artifact> get(const std::string& key);
  // Publishes bytes + meta under key and returns the stored artifact (an earlier publisher's
  // when the key was already there). When the files cannot be written, warns and returns the
  // artifact kept in memory only. Throws Error for a malformed key.
  Artifact put(const std::string& key, std::string bytes, nlohmann::json meta);

 private:
  std::optional<Artifact> read_verified(const std::string& key, std::string* problem) const;
  std::optional<Artifact> check_under_lock(const std::string& key);
  void set_aside(const std::string& key, const std::string& why);
  void publish(const std::string& key, const std::string& bytes, const nlohmann::json& meta);
  void remember(const Artifact& a);
  std::optional<Artifact> recall(const std::string& key);
  void warn(const std::string& msg) const;

  std::filesystem::path root_;
  std::function<void(const std::string&)> log_;
  size_t memory_cap_;
  std::mutex mu_;
  std::map<std::string, Artifact> memory_;
  std::list<std::string> order_;  // insertion order, for eviction
  size_t memory_used_ = 0;
};

}  // namespace gemmtune
