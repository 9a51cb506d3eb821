// gemmtune: a tuning cache shared by machines (a Redis server), in front of the local SQLite one.
//
// Read-through: on a local miss the engine asks the remote store for the key; an entry that
// belongs to this environment and problem is imported into the local cache (TuningCache's import
// checks every field) and served from there, so the next process on this machine needs no
// network. Write-through: after a tune, the key's local entry is stored remotely.
//
// The remote store is an accelerator, never a dependency: every operation is bounded by a timeout
// (connect, send, receive), and a store that is down, slow or holding garbage costs one warning,
// after which the engine works locally (a store that failed is left alone for a while, so a dead
// server costs one timeout per retry interval, not one per select).
//
// Remote keys: "gemmtune:tuning:v<kRemoteFormat>:<stable_hash(environment)>:<cache key>"; values: a
// tuning-cache export document (TuningCache::export_json) holding that one entry.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/log.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune {

// Bumped when the value stored under a remote key changes meaning.
inline constexpr int kRemoteFormat = 1;
// Values longer than this are garbage (a real entry holds a few hundred results: ~100 KB).
inline constexpr size_t kMaxRemoteEntryBytes = size_t(4) << 20;

struct RedisAddress {
  std::string host;  // a name, an IPv4 address or an IPv6 address (written [..] in URLs)
  int port = 6379;
  int db = 0;
  std::string url() const;  // "redis://host:port/db"
};

// "redis://host[:port][/db]" (port 1..65535, db >= 0). Throws Error(invalid) "<field>: ..." naming
// what is wrong. No user, password or TLS.
RedisAddress parse_redis_url(const std::string& url, const std::string& field);

// A key-value store over the network. Every call ends within the store's timeout. Failures throw
// Error: ErrorCode::runtime when the store cannot be reached or answered nothing usable (the
// connection is dropped and made again by the next call), ErrorCode::invalid when it answered,
// but the value under the key is not a value of ours (wrong type, too large).
class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // The value under key, nullopt when there is none. A value over max_bytes: Error(invalid).
  virtual std::optional<std::string> get(const std::string& key, size_t max_bytes) = 0;
  virtual void put(const std::string& key, const std::string& value) = 0;
  virtual std::string describe() const = 0;  // for messages: "redis://127.0.0.1:6379/0"
};

// A Redis client: hiredis formats the requests and parses the replies; the socket is ours
// (non-blocking, one deadline per operation including connect and SELECT, no SIGPIPE). Connects
// on first use. Host names are resolved by getaddrinfo, which the timeout does not bound: prefer
// addresses.
std::unique_ptr<RemoteStore> make_redis_store(const RedisAddress& address, std::chrono::milliseconds timeout);

// The remote layer the engine holds beside its TuningCache (thread-safe).
class RemoteTuningCache {
 public:
  // retry_after: how long a store that failed to answer is left alone.
  RemoteTuningCache(std::unique_ptr<RemoteStore> store, Log log,
                    std::chrono::milliseconds retry_after = std::chrono::seconds(30));

  // On a local miss: the remote entry for key, when it is valid for `environment` and `problem`
  // (the canonical text), imported into `local` and returned as local.lookup(key) returns it.
  // nullopt on a miss, and on any failure (warned once, never thrown).
  std::optional<CachedChoice> fetch(TuningCache& local, const std::string& key, const std::string& environment,
                                    const std::string& problem);
  // After a tune stored `key` locally: the local entry, stored remotely. Failures warned once.
  void publish(const TuningCache& local, const std::string& key, const std::string& environment);

  std::string describe() const { return store_->describe(); }
  static std::string remote_key(const std::string& environment, const std::string& key);

 private:
  bool usable();     // false while a store that failed is left alone
  void succeeded();  // after an answer: says so once when the store came back
  // Warns once per kind (unusable entry: Error(invalid); unreachable: anything else, which also
  // leaves the store alone for retry_after), later ones go to the debug log.
  void failed(const std::string& what, const Error& e);

  std::unique_ptr<RemoteStore> store_;
  Log log_;
  std::chrono::milliseconds retry_after_;
  std::chrono::steady_clock::time_point retry_at_{};
  bool down_ = false, came_back_ = false, warned_down_ = false, warned_garbage_ = false;
  std::mutex mutex_;
};

}  // namespace gemmtune
