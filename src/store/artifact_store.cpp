// Content-addressed artifact store: atomic publish, verified reads, corrupt entries set aside.
#include "store/artifact_store.hpp"

#include "core/settings.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gemmtune/error.hpp"
#include "store/secure_fs.hpp"
#include "store/sha256.hpp"

namespace gemmtune {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "gemmtune-artifact";
constexpr int kFormatVersion = 1;


void check_key(const std::string& key) {
  bool hex = key.size() >= 8 && key.find_first_not_of("0123456789abcdef") == std::string::npos;
  GT_CHECK(hex, "artifact store: malformed key '" + key + "' (lowercase hex, at least 8 digits)");
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Writes bytes to `path` (new file) and fsyncs it. Throws Error.
void write_synced(const fs::path& path, std::string_view bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  GT_CHECK(fd >= 0, errno_text("create " + path.string()));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = errno_text("write " + path.string());
      close(fd);
      GT_THROW(why);
    }
    done += size_t(n);
  }
  bool synced = fsync(fd) == 0;
  std::string why = synced ? "" : errno_text("fsync " + path.string());
  close(fd);
  GT_CHECK(synced, why);
}

void fsync_dir(const fs::path& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

// Temporary name in the same directory, unique across threads and processes.
fs::path temp_name(const fs::path& final_path) {
  static std::atomic<uint64_t> counter{0};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp-%ld-%llu", long(getpid()), static_cast<unsigned long long>(counter++));
  std::string name(".");
  name.append(final_path.filename().string()).append(suffix);
  return final_path.parent_path() / name;
}

void publish_file(const fs::path& final_path, std::string_view bytes) {
  fs::path tmp = temp_name(final_path);
  try {
    write_synced(tmp, bytes);
    GT_CHECK(rename(tmp.c_str(), final_path.c_str()) == 0, errno_text("rename to " + final_path.string()));
  } catch (...) {
    unlink(tmp.c_str());
    throw;
  }
}

// Exclusive flock on <shard>/.lock for the lifetime of the object.
class ShardLock {
 public:
  explicit ShardLock(const fs::path& dir) {
    fs::path path = dir / ".lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    GT_CHECK(fd_ >= 0, errno_text("open " + path.string()));
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      std::string why = errno_text("flock " + path.string());
      close(fd_);
      GT_THROW(why);
    }
  }
  ~ShardLock() { close(fd_); }  // releases the lock
  ShardLock(const ShardLock&) = delete;
  ShardLock& operator=(const ShardLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

// ---- paths ----------------------------------------------------------------------------------

ArtifactStore::ArtifactStore(fs::path root, std::function<void(const std::string&)> log, size_t memory_bytes,
                             fs::path key_path)
    : root_(root.empty() ? default_root() : std::move(root)),
      log_(std::move(log)),
      memory_cap_(memory_bytes),
      key_path_(std::move(key_path)) {}

fs::path ArtifactStore::default_root() { return user_cache_path("GEMMTUNE_ARTIFACTS", "artifacts"); }

std::string ArtifactStore::make_key(std::string_view material) { return sha256_hex(material); }

fs::path ArtifactStore::bin_path(const std::string& key) const { return root_ / key.substr(0, 2) / (key + ".bin"); }
fs::path ArtifactStore::json_path(const std::string& key) const { return root_ / key.substr(0, 2) / (key + ".json"); }

void ArtifactStore::warn(const std::string& msg) const {
  if (log_) log_("warning: artifact store: " + msg);
}

// ---- trust ----------------------------------------------------------------------------------

const std::string* ArtifactStore::machine_key() {
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (key_loaded_) return key_ ? &*key_ : nullptr;
    key_loaded_ = true;
    try {
      if (key_path_.empty()) key_path_ = store_key_path();
      key_ = securefs::load_or_create_key(key_path_);
      return &*key_;
    } catch (const Error& e) {
      why = e.message();
    }
  }
  warn(why + ": artifacts cannot be authenticated, so none is loaded from " + root_.string() +
       " (those built now are used in this process only)");
  return nullptr;
}

std::string ArtifactStore::mac_of(json meta, const std::string& machine_key) const {
  meta.erase("mac");
  return securefs::hmac_sha256_hex(machine_key, "gemmtune-artifact-mac 1\n" + meta.dump());
}

void ArtifactStore::check_dirs(const std::string& key) {
  const fs::path shard = bin_path(key).parent_path();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (private_dirs_.count(shard.string())) return;
  }
  securefs::require_private_dir(root_, "artifact store");
  securefs::require_private_dir(shard, "artifact store shard");
  std::error_code ec;
  if (fs::is_directory(shard, ec)) {  // a missing shard is checked again once it exists
    std::lock_guard<std::mutex> lock(mu_);
    private_dirs_.insert(shard.string());
  }
}

bool ArtifactStore::untrusted(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return untrusted_.count(key) > 0;
}

ArtifactStore::TrustCount ArtifactStore::trust() {
  securefs::require_private_dir(root_, "artifact store");
  std::error_code ec;
  GT_CHECK_INVALID(fs::is_directory(root_, ec), "artifact store " + root_.string() + " is not a directory");
  const std::string* mkey = machine_key();
  GT_CHECK(mkey, "store trust: no machine key (" + key_path_.string() + "), so nothing can be authenticated");
  TrustCount count;
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(root_)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 2 && name.find_first_not_of("0123456789abcdef") == std::string::npos &&
        e.is_directory() && !e.is_symlink())
      shards.push_back(e.path());
  }
  std::sort(shards.begin(), shards.end());
  for (const fs::path& shard : shards) {
    securefs::require_private_dir(shard, "artifact store shard");
    std::vector<std::string> keys;
    for (const auto& e : fs::directory_iterator(shard)) {
      const std::string name = e.path().filename().string();
      if (name.size() <= 5 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
      std::string key = name.substr(0, name.size() - 5);
      if (key.size() >= 8 && key.rfind(shard.filename().string(), 0) == 0 &&
          key.find_first_not_of("0123456789abcdef") == std::string::npos)
        keys.push_back(std::move(key));
    }
    if (keys.empty()) continue;
    std::sort(keys.begin(), keys.end());
    ShardLock lock(shard);
    for (const std::string& key : keys) {
      std::string problem;
      auto a = read_verified(key, &problem, nullptr, false);
      if (!a) {
        if (!problem.empty()) set_aside(key, problem), ++count.set_aside;
        continue;
      }
      const std::string mac = mac_of(a->meta, *mkey);
      if (a->meta.value("mac", "") == mac) {
        ++count.already;
        continue;
      }
      a->meta["mac"] = mac;
      publish_file(json_path(key), a->meta.dump(2) + "\n");
      ++count.trusted;
    }
    fsync_dir(shard);
  }
  std::lock_guard<std::mutex> lock(mu_);
  untrusted_.clear();
  return count;
}

// ---- reads ----------------------------------------------------------------------------------

// The artifact when both files are present and agree (and, with require_mac, the mac verifies);
// else nullopt, with `problem` set when the files exist but are corrupt (left empty for a plain
// miss and for an entry that is only not authenticated: then *untrusted is set).
std::optional<Artifact> ArtifactStore::read_verified(const std::string& key, std::string* problem, bool* untrusted,
                                                     bool require_mac) {
  problem->clear();
  if (untrusted) *untrusted = false;
  securefs::Read meta_file = securefs::read_regular(json_path(key), kMaxMetaBytes);
  if (meta_file.absent) return std::nullopt;
  if (!meta_file.bytes) {
    *problem = "unreadable metadata: " + meta_file.problem;
    return std::nullopt;
  }
  json meta = json::parse(*meta_file.bytes, nullptr, false);
  if (!meta.is_object() || meta.value("format", "") != kFormat || meta.value("key", "") != key ||
      !meta.contains("size") || !meta["size"].is_number_unsigned() || !meta.contains("sha256") ||
      !meta["sha256"].is_string() || (meta.contains("mac") && !meta["mac"].is_string())) {
    *problem = "unreadable metadata " + json_path(key).string();
    return std::nullopt;
  }
  const uint64_t size = meta["size"].get<uint64_t>();
  if (size > kMaxArtifactBytes) {
    *problem = json_path(key).string() + " claims " + std::to_string(size) + " bytes, more than the " +
               std::to_string(kMaxArtifactBytes) + " allowed";
    return std::nullopt;
  }
  securefs::Read bytes = securefs::read_regular(bin_path(key), kMaxArtifactBytes, size);
  if (!bytes.bytes) {
    *problem = bytes.absent ? "missing " + bin_path(key).string() : bytes.problem;
    return std::nullopt;
  }
  if (sha256_hex(*bytes.bytes) != meta["sha256"].get<std::string>()) {
    *problem = bin_path(key).string() + " does not match its SHA-256";
    return std::nullopt;
  }
  if (require_mac) {
    const std::string* mkey = machine_key();
    if (!mkey || meta.value("mac", "") != mac_of(meta, *mkey)) {
      if (untrusted) *untrusted = true;
      std::lock_guard<std::mutex> lock(mu_);
      untrusted_.insert(key);
      return std::nullopt;
    }
  }
  return Artifact{key, std::make_shared<const std::string>(std::move(*bytes.bytes)), std::move(meta)};
}

std::optional<Artifact> ArtifactStore::get(const std::string& key) {
  check_key(key);
  if (auto a = recall(key)) return a;
  check_dirs(key);
  std::string problem;
  bool untrusted = false;
  auto a = read_verified(key, &problem, &untrusted);
  if (!a && !problem.empty()) {
    try {
      a = check_under_lock(key);  // a publisher may have been between its two renames
    } catch (const Error& e) {
      warn("cannot check " + key + ": " + e.message());
    }
  } else if (untrusted) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = !warned_untrusted_;
      warned_untrusted_ = true;
    }
    if (first && machine_key())
      warn(json_path(key).string() + " (and maybe others) is not authenticated by this machine's key " +
           key_path_.string() + ", so it is not loaded (a kernel pack built elsewhere? if you trust where it " +
           "came from, run `gemmtune store trust " + root_.string() + "`)");
  }
  if (a) remember(*a);
  return a;
}

// Re-reads under the shard lock (no publisher in flight) and sets a corrupt entry aside.
std::optional<Artifact> ArtifactStore::check_under_lock(const std::string& key) {
  fs::path dir = bin_path(key).parent_path();
  ShardLock lock(dir);
  std::string problem;
  auto a = read_verified(key, &problem, nullptr);
  if (!a && !problem.empty()) set_aside(key, problem);
  return a;
}

void ArtifactStore::set_aside(const std::string& key, const std::string& why) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  std::string suffix = ".bad-" + std::to_string(now.count());
  std::string where;
  for (const fs::path& p : {bin_path(key), json_path(key)}) {
    fs::path aside = p.string() + suffix;
    if (rename(p.c_str(), aside.c_str()) == 0) where += (where.empty() ? "" : ", ") + aside.filename().string();
  }
  warn(why + ": treated as a miss" + (where.empty() ? std::string() : "; set aside as " + where));
}

// ---- writes ---------------------------------------------------------------------------------

Artifact ArtifactStore::put(const std::string& key, std::string bytes, json meta) {
  check_key(key);
  if (!meta.is_object()) meta = json::object();
  meta.erase("mac");
  meta["format"] = kFormat;
  meta["format_version"] = kFormatVersion;
  meta["key"] = key;
  meta["size"] = uint64_t(bytes.size());
  meta["sha256"] = sha256_hex(bytes);
  if (const std::string* mkey = machine_key()) meta["mac"] = mac_of(meta, *mkey);
  Artifact mine{key, std::make_shared<const std::string>(std::move(bytes)), std::move(meta)};
  fs::path dir = bin_path(key).parent_path();
  try {
    securefs::make_private_dirs(dir);
  } catch (const Error& e) {
    warn("could not publish " + key + " (kept in memory only): " + e.message());
    remember(mine);
    return mine;
  }
  check_dirs(key);  // an Error: never write into a store another user can change
  try {
    ShardLock lock(dir);
    std::string problem;
    bool untrusted = false;
    if (auto theirs = read_verified(key, &problem, &untrusted)) {  // an earlier publisher won
      remember(*theirs);
      return *theirs;
    }
    if (untrusted) problem = json_path(key).string() + " is not authenticated by this machine's key; replaced";
    if (!problem.empty()) set_aside(key, problem);
    publish(key, *mine.bytes, mine.meta);
    std::lock_guard<std::mutex> mem(mu_);
    untrusted_.erase(key);
  } catch (const std::exception& e) {  // Error or filesystem_error
    warn("could not publish " + key + " (kept in memory only): " + e.what());
  }
  remember(mine);
  return mine;
}

// Bytes first, metadata last: a reader that sees the .json finds the matching .bin.
void ArtifactStore::publish(const std::string& key, const std::string& bytes, const json& meta) {
  publish_file(bin_path(key), bytes);
  publish_file(json_path(key), meta.dump(2) + "\n");
  fsync_dir(bin_path(key).parent_path());
}

// ---- memory ---------------------------------------------------------------------------------

void ArtifactStore::remember(const Artifact& a) {
  std::lock_guard<std::mutex> lock(mu_);
  if (memory_.count(a.key) || a.bytes->size() > memory_cap_) return;
  memory_.emplace(a.key, a);
  order_.push_back(a.key);
  memory_used_ += a.bytes->size();
  while (memory_used_ > memory_cap_ && !order_.empty()) {
    auto it = memory_.find(order_.front());
    memory_used_ -= it->second.bytes->size();
    memory_.erase(it);
    order_.pop_front();
  }
}

std::optional<Artifact> ArtifactStore::recall(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = memory_.find(key);
  if (it == memory_.end()) return std::nullopt;
  return it->second;
}

}  // namespace gemmtune
