// Content-addressed artifact store: atomic publish, verified reads, corrupt entries set aside.
#include "store/artifact_store.hpp"

#include "core/settings.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gemmtune/error.hpp"
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

// Whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const fs::path& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fd);
  return out;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Writes bytes to `path` (new file) and fsyncs it. Throws Error.
void write_synced(const fs::path& path, std::string_view bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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

ArtifactStore::ArtifactStore(fs::path root, std::function<void(const std::string&)> log, size_t memory_bytes)
    : root_(root.empty() ? default_root() : std::move(root)), log_(std::move(log)), memory_cap_(memory_bytes) {}

fs::path ArtifactStore::default_root() { return user_cache_path("GEMMTUNE_ARTIFACTS", "artifacts"); }

std::string ArtifactStore::make_key(std::string_view material) { return sha256_hex(material); }

fs::path ArtifactStore::bin_path(const std::string& key) const { return root_ / key.substr(0, 2) / (key + ".bin"); }
fs::path ArtifactStore::json_path(const std::string& key) const { return root_ / key.substr(0, 2) / (key + ".json"); }

void ArtifactStore::warn(const std::string& msg) const {
  if (log_) log_("warning: artifact store: " + msg);
}

// ---- reads ----------------------------------------------------------------------------------

// The artifact when both files are present and agree; else nullopt, with `problem` set when
// the files exist but are corrupt (left empty for a plain miss).
std::optional<Artifact> ArtifactStore::read_verified(const std::string& key, std::string* problem) const {
  problem->clear();
  auto meta_text = read_file(json_path(key));
  if (!meta_text) return std::nullopt;
  json meta = json::parse(*meta_text, nullptr, false);
  if (!meta.is_object() || meta.value("format", "") != kFormat || meta.value("key", "") != key ||
      !meta.contains("size") || !meta["size"].is_number_unsigned() || !meta.contains("sha256") ||
      !meta["sha256"].is_string()) {
    *problem = "unreadable metadata " + json_path(key).string();
    return std::nullopt;
  }
  auto bytes = read_file(bin_path(key));
  if (!bytes) {
    *problem = "missing " + bin_path(key).string();
    return std::nullopt;
  }
  if (bytes->size() != meta["size"].get<uint64_t>()) {
    *problem = bin_path(key).string() + " has " + std::to_string(bytes->size()) + " bytes, expected " +
               std::to_string(meta["size"].get<uint64_t>());
    return std::nullopt;
  }
  if (sha256_hex(*bytes) != meta["sha256"].get<std::string>()) {
    *problem = bin_path(key).string() + " does not match its SHA-256";
    return std::nullopt;
  }
  return Artifact{key, std::make_shared<const std::string>(std::move(*bytes)), std::move(meta)};
}

std::optional<Artifact> ArtifactStore::get(const std::string& key) {
  check_key(key);
  if (auto a = recall(key)) return a;
  std::string problem;
  auto a = read_verified(key, &problem);
  if (!a && !problem.empty()) {
    try {
      a = check_under_lock(key);  // a publisher may have been between its two renames
    } catch (const Error& e) {
      warn("cannot check " + key + ": " + e.message());
    }
  }
  if (a) remember(*a);
  return a;
}

// Re-reads under the shard lock (no publisher in flight) and sets a corrupt entry aside.
std::optional<Artifact> ArtifactStore::check_under_lock(const std::string& key) {
  fs::path dir = bin_path(key).parent_path();
  ShardLock lock(dir);
  std::string problem;
  auto a = read_verified(key, &problem);
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
  meta["format"] = kFormat;
  meta["format_version"] = kFormatVersion;
  meta["key"] = key;
  meta["size"] = uint64_t(bytes.size());
  meta["sha256"] = sha256_hex(bytes);
  Artifact mine{key, std::make_shared<const std::string>(std::move(bytes)), std::move(meta)};
  try {
    fs::path dir = bin_path(key).parent_path();
    fs::create_directories(dir);
    ShardLock lock(dir);
    std::string problem;
    if (auto theirs = read_verified(key, &problem)) {  // an earlier publisher won
      remember(*theirs);
      return *theirs;
    }
    if (!problem.empty()) set_aside(key, problem);
    publish(key, *mine.bytes, mine.meta);
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
