// The remote tuning cache (remote_cache.hpp): the Redis client and the read-through /
// write-through layer.
//
// Why our own socket under hiredis's reader and formatter: hiredis 0.14 (Debian 12) writes with
// write(), so a server that closed the connection raises SIGPIPE, which kills a process that has
// not ignored it; and its timeouts are per system call, so a server that trickles bytes could
// hold a caller for as long as it likes. Here every operation has one deadline and sends use
// MSG_NOSIGNAL.
#include "store/remote_cache.hpp"

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_input.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune {
namespace {

using Clock = std::chrono::steady_clock;

// Text from outside for a message: at most 80 bytes, control bytes escaped, in quotes.
std::string outside_text(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out + (s.size() > 80 ? "...'" : "'");
}

// Decimal digits only, in [lo, hi]; nullopt otherwise.
std::optional<long long> decimal(std::string_view s, long long lo, long long hi) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

// ---- the socket ---------------------------------------------------------------------------

[[noreturn]] void unreachable(const std::string& why) { GT_THROW(why); }  // ErrorCode::runtime

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Waits until fd is ready for `events` or the deadline passes (Error "timed out ... <what>").
void wait_for(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) unreachable(std::string("timed out ") + what);
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, int(std::min<long long>(left, 60'000)));
    if (n > 0) return;  // ready, or an error the next call reports
    if (n < 0 && errno != EINTR) unreachable(std::string("poll: ") + std::strerror(errno));
  }
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

std::string reply_text(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_ERROR: return "error " + outside_text(std::string_view(r.str, r.len));
    case REDIS_REPLY_STATUS: return "status " + outside_text(std::string_view(r.str, r.len));
    case REDIS_REPLY_STRING: return "a string of " + std::to_string(r.len) + " bytes";
    case REDIS_REPLY_INTEGER: return "the integer " + std::to_string(r.integer);
    case REDIS_REPLY_NIL: return "nil";
    default: return "a reply of type " + std::to_string(r.type);
  }
}

class RedisStore final : public RemoteStore {
 public:
  RedisStore(RedisAddress address, std::chrono::milliseconds timeout)
      : address_(std::move(address)), timeout_(timeout) {}

  std::string describe() const override { return address_.url(); }

  // GETRANGE bounds what the server sends (a missing key reads as "", like an empty value, which
  // no entry of ours is). A key of another type answers WRONGTYPE.
  std::optional<std::string> get(const std::string& key, size_t max_bytes) override {
    Reply r = command({"GETRANGE", key, "0", std::to_string(max_bytes)}, max_bytes + 64);
    if (r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).rfind("WRONGTYPE", 0) == 0)
      GT_INVALID("GETRANGE " + outside_text(key) + ": the key holds another type (" + reply_text(*r) + ")");
    if (r->type != REDIS_REPLY_STRING) fail("GETRANGE " + outside_text(key) + ": answered " + reply_text(*r));
    if (r->len == 0) return std::nullopt;
    if (r->len > max_bytes)
      GT_INVALID("GETRANGE " + outside_text(key) + ": the value is larger than " + std::to_string(max_bytes) + " bytes");
    return std::string(r->str, r->len);
  }

  void put(const std::string& key, const std::string& value) override {
    Reply r = command({"SET", key, value}, 4096);
    if (r->type != REDIS_REPLY_STATUS || std::string_view(r->str, r->len) != "OK")
      fail("SET " + outside_text(key) + ": answered " + reply_text(*r));
  }

 private:
  // Drops the connection (its state is unknown) and throws Error(runtime).
  [[noreturn]] void fail(const std::string& why) {
    fd_.reset();
    unreachable(why);
  }

  // One request, one reply (at most max_reply bytes), within one timeout; connects first if
  // needed (connect and SELECT within their own timeout).
  Reply command(const std::vector<std::string>& args, size_t max_reply) {
    if (!fd_) connect();
    try {
      const Clock::time_point deadline = Clock::now() + timeout_;
      send_command(args, deadline);
      return read_reply(deadline, max_reply);
    } catch (const Error&) {
      fd_.reset();
      throw;
    }
  }

  void connect() {
    const Clock::time_point deadline = Clock::now() + timeout_;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(address_.port);
    if (const int rc = ::getaddrinfo(address_.host.c_str(), port.c_str(), &hints, &found); rc != 0)
      unreachable("cannot resolve " + outside_text(address_.host) + ": " + ::gai_strerror(rc));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, ::freeaddrinfo);
    std::string why = "no address";
    for (const addrinfo* a = found; a; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd) {
        why = std::string("socket: ") + std::strerror(errno);
        continue;
      }
      if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
          why = std::string("connect: ") + std::strerror(errno);
          continue;
        }
        wait_for(fd.get(), POLLOUT, deadline, "connecting");
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err != 0) {
          why = std::string("connect: ") + std::strerror(err);
          continue;
        }
      }
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small requests
      fd_ = std::move(fd);
      break;
    }
    if (!fd_) unreachable(why);
    if (address_.db != 0) {
      try {
        send_command({"SELECT", std::to_string(address_.db)}, deadline);
        Reply r = read_reply(deadline, 4096);
        if (r->type != REDIS_REPLY_STATUS) fail("SELECT " + std::to_string(address_.db) + ": answered " + reply_text(*r));
      } catch (const Error&) {
        fd_.reset();
        throw;
      }
    }
  }

  void send_command(const std::vector<std::string>& args, Clock::time_point deadline) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    char* raw = nullptr;
    const int n = redisFormatCommandArgv(&raw, int(argv.size()), argv.data(), lens.data());
    if (n < 0 || !raw) throw std::bad_alloc();
    const std::unique_ptr<char, void (*)(char*)> text(raw, redisFreeCommand);
    for (size_t sent = 0; sent < size_t(n);) {
      const ssize_t k = ::send(fd_.get(), raw + sent, size_t(n) - sent, MSG_NOSIGNAL);
      if (k > 0) {
        sent += size_t(k);
      } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        wait_for(fd_.get(), POLLOUT, deadline, "sending");
      } else if (k < 0 && errno != EINTR) {
        unreachable(std::string("send: ") + std::strerror(errno));
      }
    }
  }

  // The one reply to the request just sent. Only the reply kinds our commands produce (bulk
  // string, status, error, integer) are parsed: anything else (an array header announcing 2^31
  // elements, not RESP at all) is refused before hiredis sees it.
  Reply read_reply(Clock::time_point deadline, size_t max_reply) {
    const std::unique_ptr<redisReader, void (*)(redisReader*)> reader(redisReaderCreate(), redisReaderFree);
    if (!reader) throw std::bad_alloc();
    char buf[16384];
    size_t total = 0;
    for (;;) {
      void* out = nullptr;
      if (redisReaderGetReply(reader.get(), &out) != REDIS_OK)
        unreachable(std::string("not a Redis reply: ") + reader->errstr);
      if (out) return Reply(static_cast<redisReply*>(out));
      wait_for(fd_.get(), POLLIN, deadline, "waiting for the reply");
      const ssize_t k = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (k == 0) unreachable("the server closed the connection");
      if (k < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        unreachable(std::string("recv: ") + std::strerror(errno));
      }
      if (total == 0 && !std::strchr("$+-:", buf[0]))
        unreachable("not a Redis reply of the kinds asked for (starts with " + outside_text(std::string_view(buf, 1)) + ")");
      total += size_t(k);
      if (total > max_reply) unreachable("a reply longer than " + std::to_string(max_reply) + " bytes");
      if (redisReaderFeed(reader.get(), buf, size_t(k)) != REDIS_OK) throw std::bad_alloc();
    }
  }

  RedisAddress address_;
  std::chrono::milliseconds timeout_;
  Fd fd_;
};

// Throws Error(invalid) unless `value` is an export document whose one entry is key's, in this
// environment, for this problem (the import then checks every field).
void check_entry(const std::string& value, const std::string& key, const std::string& environment,
                 const std::string& problem) {
  const nlohmann::json doc = parse_json_input(value, "remote entry");
  const auto entries = doc.is_object() ? doc.find("entries") : doc.end();
  if (!doc.is_object() || entries == doc.end() || !entries->is_array() || entries->size() != 1)
    GT_INVALID("remote entry: not an export document holding one entry");
  const nlohmann::json& e = (*entries)[0];
  auto is = [&](const char* field, const std::string& want) {
    const auto f = e.is_object() ? e.find(field) : e.end();
    if (f == e.end() || !f->is_string() || f->get_ref<const std::string&>() != want)
      GT_INVALID(std::string("remote entry: entries[0].") + field + " is not " + outside_text(want));
  };
  is("key", key);
  is("environment", environment);
  is("problem", problem);
}

}  // namespace

// ---- the address --------------------------------------------------------------------------

std::string RedisAddress::url() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "redis://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" + std::to_string(db);
}

RedisAddress parse_redis_url(const std::string& url, const std::string& field) {
  auto bad = [&](const std::string& why) -> RedisAddress {
    GT_INVALID(field + ": " + outside_text(url) + " " + why + " (expected redis://host[:port][/db])");
  };
  constexpr std::string_view scheme = "redis://";
  if (url.compare(0, scheme.size(), scheme) != 0) return bad("is not a redis:// URL");
  std::string_view rest = std::string_view(url).substr(scheme.size());
  if (rest.find_first_of("@?#") != std::string_view::npos)
    return bad("has a user, password, query or fragment, which are not supported");
  RedisAddress a;
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      const auto v = decimal(db, 0, 1 << 30);
      if (!v) return bad("has a database that is not a number in [0, 2^30]");
      a.db = int(*v);
    }
    rest = rest.substr(0, slash);
  }
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("has an unterminated [IPv6 address]");
    a.host = std::string(rest.substr(1, close - 1));
    for (char c : a.host)
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return bad("has a bad IPv6 address");
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("has text after the IPv6 address");
    if (!rest.empty()) port = rest.substr(1);
    if (rest == ":") return bad("has an empty port");
  } else {
    const size_t colon = rest.find(':');
    a.host = std::string(rest.substr(0, colon));
    for (char c : a.host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
        return bad("has a host name with a character other than letters, digits, '.', '-', '_'");
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return bad("has an empty port");
    }
  }
  if (a.host.empty()) return bad("has no host");
  if (!port.empty()) {
    const auto v = decimal(port, 1, 65535);
    if (!v) return bad("has a port that is not a number in [1, 65535]");
    a.port = int(*v);
  }
  return a;
}

std::unique_ptr<RemoteStore> make_redis_store(const RedisAddress& address, std::chrono::milliseconds timeout) {
  GT_CHECK(timeout.count() > 0, "remote cache: the timeout must be positive");
  return std::make_unique<RedisStore>(address, timeout);
}

// ---- read-through, write-through ----------------------------------------------------------

RemoteTuningCache::RemoteTuningCache(std::unique_ptr<RemoteStore> store, Log log, std::chrono::milliseconds retry_after)
    : store_(std::move(store)), log_(std::move(log)), retry_after_(retry_after) {}

std::string RemoteTuningCache::remote_key(const std::string& environment, const std::string& key) {
  return "gemmtune:tuning:v" + std::to_string(kRemoteFormat) + ":" + stable_hash(environment) + ":" + key;
}

bool RemoteTuningCache::usable() {
  if (!down_) return true;
  if (Clock::now() < retry_at_) return false;
  down_ = false;  // try again; the next failure leaves it alone again
  came_back_ = true;
  return true;
}

void RemoteTuningCache::succeeded() {
  if (!came_back_) return;
  came_back_ = false;
  log_.info("remote tuning cache " + store_->describe() + ": reachable again");
}

void RemoteTuningCache::failed(const std::string& what, const Error& e) {
  if (e.code() == ErrorCode::invalid) {  // the server answered; this entry is not usable
    const std::string m = "remote tuning cache " + store_->describe() + ": " + what + " not used: " + e.message() +
                          "; tuning locally (a tune replaces it)";
    if (std::exchange(warned_garbage_, true)) log_.debug(m);
    else log_.warn(m);
    return;
  }
  down_ = true;
  came_back_ = false;
  retry_at_ = Clock::now() + retry_after_;
  const std::string m = "remote tuning cache " + store_->describe() + ": " + what + ": " + e.message() +
                        "; working with the local cache only (next try in " +
                        std::to_string(retry_after_.count() / 1000.0).substr(0, 4) + " s)";
  if (std::exchange(warned_down_, true)) log_.debug(m);
  else log_.warn(m);
}

std::optional<CachedChoice> RemoteTuningCache::fetch(TuningCache& local, const std::string& key,
                                                     const std::string& environment, const std::string& problem) {
  std::lock_guard lock(mutex_);
  if (!usable()) return std::nullopt;
  const std::string rkey = remote_key(environment, key);
  std::optional<std::string> value;
  try {
    value = store_->get(rkey, kMaxRemoteEntryBytes);
  } catch (const Error& e) {
    failed(e.code() == ErrorCode::invalid ? "the entry " + rkey : "read " + rkey, e);
    return std::nullopt;
  }
  succeeded();
  if (!value) {
    log_.debug("remote tuning cache: no entry " + rkey);
    return std::nullopt;
  }
  try {
    check_entry(*value, key, environment, problem);
    local.import_json(*value);  // checks every field before writing
    std::optional<CachedChoice> hit = local.lookup(key);
    if (hit) log_.debug("remote tuning cache: " + rkey + " from " + store_->describe() + ", now in the local cache");
    return hit;
  } catch (const Error& e) {
    failed("the entry " + rkey, Error(e.message(), __FILE__, __LINE__, ErrorCode::invalid));
    return std::nullopt;
  }
}

void RemoteTuningCache::publish(const TuningCache& local, const std::string& key, const std::string& environment) {
  std::lock_guard lock(mutex_);
  if (!usable()) return;
  const std::string rkey = remote_key(environment, key);
  std::optional<std::string> doc;
  try {
    doc = local.export_entry(key);
  } catch (const Error& e) {
    log_.warn("remote tuning cache: cannot read " + key + " from the local cache to share it: " + e.message());
    return;
  }
  if (!doc) return;
  if (doc->size() > kMaxRemoteEntryBytes) {
    log_.debug("remote tuning cache: " + rkey + " not shared: " + std::to_string(doc->size()) + " bytes");
    return;
  }
  try {
    store_->put(rkey, *doc);
    succeeded();
    log_.debug("remote tuning cache: stored " + rkey);
  } catch (const Error& e) {
    failed("store " + rkey, e);
  }
}

}  // namespace gemmtune
