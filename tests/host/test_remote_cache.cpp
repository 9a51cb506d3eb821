// The remote tuning cache (src/store/remote_cache.hpp) against Debian's redis-server, started on a
// free loopback port by the test and killed after it (also when the test process dies: the server
// gets PR_SET_PDEATHSIG), and against fake servers that never answer, trickle, or speak another
// protocol. Two processes with separate local caches share one server: the second is answered from
// it; a server killed mid-run costs nothing of the local caches; garbage under our keys is a
// warning, then local. No GPU: the layer is driven directly with TuningCache, as the engine does.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/problem_json.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/options.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "host/problems.hpp"
#include "store/remote_cache.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The bound the timing tests check (the default). Tests against the real server, where timing is
// not the point, use kPatient, so that a loaded CI machine cannot turn a slow answer into a
// failure.
constexpr auto kTimeout = 50ms;
constexpr auto kPatient = 2000ms;
const std::string kEnv = "device=test;gemmtune=remote-test";

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// ---- helpers --------------------------------------------------------------------------------

struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "gt-remote-XXXXXX").string();
    path = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A report for problem m x 256 x 512 whose winner is `winner` (a cublaslt candidate).
TuneReport report_for(int64_t m, const std::string& winner) {
  TuneReport r;
  r.problem.m = m, r.problem.n = 256, r.problem.k = 512;
  for (int i = 0; i < 3; ++i) {
    CandidateResult c;
    c.backend = "cublaslt";
    c.id = i == 0 ? winner : winner + "-" + std::to_string(i);
    c.name = "config " + c.id;
    c.status = CandidateStatus::ok;
    c.rel_err = 1e-3;
    c.median_us = 10.0 * (i + 1);
    c.p20_us = c.median_us * 0.9, c.p80_us = c.median_us * 1.1;
    c.samples = 25;
    c.winner = i == 0;
    r.results.push_back(c);
  }
  return r;
}

// A key as the engine makes it (any unique text works for the cache layer).
std::string key_for(int64_t m) { return stable_hash(kEnv + "|" + report_for(m, "x").problem_canonical()); }

// Every log line, for counting warnings.
struct Lines {
  std::shared_ptr<std::vector<std::string>> all = std::make_shared<std::vector<std::string>>();
  Log log() const {
    return Log([all = all](const std::string& l) { all->push_back(l); }, LogLevel::debug);
  }
  int warnings() const {
    int n = 0;
    for (const auto& l : *all) n += l.rfind("warning: ", 0) == 0;
    return n;
  }
  std::string text() const {
    std::string s;
    for (const auto& l : *all) s += l + "\n";
    return s;
  }
};

std::unique_ptr<RemoteTuningCache> remote_at(int port, const Lines& lines, std::chrono::milliseconds retry = 30s,
                                             std::chrono::milliseconds timeout = kPatient) {
  return std::make_unique<RemoteTuningCache>(make_redis_store({"127.0.0.1", port, 0}, timeout), lines.log(), retry);
}

// A free loopback TCP port (bound once, then released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// Debian's redis-server on a free loopback port, no persistence; killed on destruction, and by the
// kernel when this process dies.
class RedisServer {
 public:
  static bool installed() { return ::access("/usr/bin/redis-server", X_OK) == 0; }

  explicit RedisServer(const fs::path& dir) {
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = free_port();
      const pid_t parent = ::getpid();
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        const std::string port = std::to_string(port_), log = (dir / "redis.log").string();
        ::execl("/usr/bin/redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", dir.c_str(), "--logfile", log.c_str(), "--daemonize", "no",
                static_cast<char*>(nullptr));
        ::_exit(127);
      }
      pid_ = pid;
      if (!wait_ready()) stop();  // the port was taken meanwhile: another one
    }
  }
  ~RedisServer() { stop(); }
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // A raw command through hiredis's own client (to plant what our client never writes).
  std::string command(const std::vector<std::string>& args) const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    if (!c || c->err) {
      if (c) redisFree(c);
      return "connect failed";
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), argv.data(), lens.data()));
    std::string out = !r ? "no reply" : r->str ? std::string(r->str, r->len) : std::to_string(r->integer);
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
  }

 private:
  bool wait_ready() {
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (command({"PING"}) == "PONG") return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  pid_t pid_ = -1;
  int port_ = 0;
};

// A TCP server on a free loopback port that does `behave(client_fd)` with each connection, on its
// own thread; or, with behave empty, listens with a backlog of 0 and never accepts.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int)> behave) : behave_(std::move(behave)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 0);
    if (behave_)
      thread_ = std::thread([this] {
        for (;;) {
          const int c = ::accept(fd_, nullptr, nullptr);
          if (c < 0 || stop_) {
            if (c >= 0) ::close(c);
            return;
          }
          behave_(c);
          ::close(c);
        }
      });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  std::function<void(int)> behave_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Runs f in a child process; its exit status (0 = passed). Messages go to stderr.
int in_child(const std::function<int()>& f) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define CHILD_CHECK(cond, code)                                             \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      return code;                                                          \
    }                                                                       \
  } while (0)

#define NEED_REDIS()                                                                           \
  if (!RedisServer::installed()) GTEST_SKIP() << "redis-server not installed (scripts/setup.sh)"; \
  TempDir dir;                                                                                  \
  RedisServer redis(dir.path);                                                                  \
  ASSERT_TRUE(redis.running()) << "redis-server did not start"

// ---- the address --------------------------------------------------------------------------

TEST(RemoteCache, ParsesRedisUrls) {
  auto url = [](const std::string& s) { return parse_redis_url(s, "--remote").url(); };
  EXPECT_EQ(url("redis://127.0.0.1:6380/2"), "redis://127.0.0.1:6380/2");
  EXPECT_EQ(url("redis://localhost"), "redis://localhost:6379/0");
  EXPECT_EQ(url("redis://cache-01.lan_x:1/"), "redis://cache-01.lan_x:1/0");
  EXPECT_EQ(url("redis://[::1]:7000/3"), "redis://[::1]:7000/3");
  EXPECT_EQ(url("redis://[::1]"), "redis://[::1]:6379/0");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"http://h:1/0", "is not a redis:// URL"},
      {"REDIS://h", "is not a redis:// URL"},
      {"redis://", "has no host"},
      {"redis://:6379", "has no host"},
      {"redis://h:0", "port"},
      {"redis://h:65536", "port"},
      {"redis://h:12x", "port"},
      {"redis://h:", "empty port"},
      {"redis://h/db1", "database"},
      {"redis://h/-1", "database"},
      {"redis://h/99999999999", "database"},
      {"redis://user:pw@h", "password"},
      {"redis://h?x=1", "query"},
      {"redis://[::1", "unterminated"},
      {"redis://[::1]x", "after the IPv6"},
      {"redis://[zz]", "IPv6"},
      {"redis://h h", "host name"},
      {"redis://h\x1b[31m", "host name"},
  };
  for (const auto& [text, why] : bad) {
    try {
      parse_redis_url(text, "--remote");
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid) << text;
      EXPECT_EQ(e.message().rfind("--remote: ", 0), 0u) << e.message();
      EXPECT_NE(e.message().find(why), std::string::npos) << text << ": " << e.message();
      EXPECT_EQ(e.message().find('\x1b'), std::string::npos) << "control bytes are escaped: " << e.message();
    }
  }
  const std::string longer = "redis://" + std::string(5000, 'h') + ":x";
  try {
    parse_redis_url(longer, "--remote");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_LT(e.message().size(), 300u) << "quoted input is capped";
  }
}

TEST(RemoteCache, KeysAreNamespacedByEnvironmentAndFormat) {
  const std::string k = RemoteTuningCache::remote_key(kEnv, "0123456789abcdef");
  EXPECT_EQ(k, "gemmtune:tuning:v" + std::to_string(kRemoteFormat) + ":" + stable_hash(kEnv) + ":0123456789abcdef");
  EXPECT_NE(k, RemoteTuningCache::remote_key(kEnv + ";driver=2", "0123456789abcdef"));
}

// ---- the option, its variable, flag and JSON field -----------------------------------------

TEST(RemoteCache, OptionFromTheEnvironmentFlagAndJson) {
  // The variables, as resolve() reads them; explicit values win. Put back as they were after.
  struct Saved {
    std::string name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* v : {"GEMMTUNE_REMOTE_CACHE", "GEMMTUNE_REMOTE_TIMEOUT_MS"}) {
    const char* old = std::getenv(v);
    saved.push_back({v, old ? std::optional<std::string>(old) : std::nullopt});
    ::unsetenv(v);
  }
  EngineOptions none = resolve(EngineOptions{});
  EXPECT_EQ(none.remote_cache, "");
  EXPECT_EQ(none.remote_timeout_ms, 50);
  ::setenv("GEMMTUNE_REMOTE_CACHE", "redis://10.0.0.5:6380/1", 1);
  ::setenv("GEMMTUNE_REMOTE_TIMEOUT_MS", "20", 1);
  EngineOptions from_env = resolve(EngineOptions{});
  EXPECT_EQ(from_env.remote_cache, "redis://10.0.0.5:6380/1");
  EXPECT_EQ(from_env.remote_timeout_ms, 20);
  EngineOptions explicit_one;
  explicit_one.remote_cache = "redis://cache";
  explicit_one.remote_timeout_ms = 5;
  EXPECT_EQ(resolve(explicit_one).remote_cache, "redis://cache");
  EXPECT_EQ(resolve(explicit_one).remote_timeout_ms, 5);
  ::setenv("GEMMTUNE_REMOTE_TIMEOUT_MS", "soon", 1);
  try {
    resolve(EngineOptions{});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid);
    EXPECT_NE(e.message().find("$GEMMTUNE_REMOTE_TIMEOUT_MS"), std::string::npos) << e.message();
  }
  for (const Saved& v : saved) {
    if (v.value) ::setenv(v.name.c_str(), v.value->c_str(), 1);
    else ::unsetenv(v.name.c_str());
  }

  // The C API's options JSON.
  const EngineOptions j = engine_options_from_json(R"({"remote_cache": "redis://h:1/2", "remote_timeout_ms": 30})");
  EXPECT_EQ(j.remote_cache, "redis://h:1/2");
  EXPECT_EQ(j.remote_timeout_ms, 30);
  for (const char* bad : {R"({"remote_timeout_ms": -1})", R"({"remote_timeout_ms": 1e9})", R"({"remote_cache": 5})"}) {
    try {
      engine_options_from_json(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("options.remote_"), std::string::npos) << e.message();
    }
  }

  // The CLI flag, on every engine command.
  cli::Cli c;
  c.parse(std::vector<std::string>{"tune", "64x64x64", "--remote", "redis://127.0.0.1:7000/4", "--remote-timeout", "25"});
  const EngineOptions f = cli::engine_options(c.tune.engine, {});
  EXPECT_EQ(f.remote_cache, "redis://127.0.0.1:7000/4");
  EXPECT_EQ(f.remote_timeout_ms, 25);
}

TEST(RemoteCache, BadFlagsAreUsageErrorsBeforeTheGpu) {
  host_test::TempDir dir("gemmtune_remote_");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tune 64x64x64 --remote http://cache:6379", "--remote: 'http://cache:6379' is not a redis:// URL"},
      {"suite x.csv --remote redis://cache:0", "port"},
      {"run --a a.npy --b b.npy --out d.npy --remote redis://", "has no host"},
      {"tune 64x64x64 --remote redis://cache --no-cache", "--no-cache"},
      {"tune 64x64x64 --remote redis://cache --remote-timeout 0", "--remote-timeout"},
  };
  for (const auto& [args, says] : cases) {
    const host_test::Exec e = host_test::run_cli(dir.root, args);
    EXPECT_EQ(e.code, 2) << args << "\n" << e.err;
    EXPECT_NE(e.err.find(says), std::string::npos) << args << "\n" << e.err;
    EXPECT_EQ(e.err.find("no CUDA device"), std::string::npos) << args << "\n" << e.err;
  }
}

// ---- a real server ------------------------------------------------------------------------

TEST(RemoteCache, SecondProcessIsAnsweredFromRedis) {
  NEED_REDIS();
  const std::string key = key_for(64);
  const TuneReport report = report_for(64, "algo-7");
  // Process 1: tuned (its local cache has the entry) and shared it.
  ASSERT_EQ(in_child([&] {
              Lines lines;
              TuningCache local(dir.path / "a.sqlite");
              local.store(key, kEnv, report);
              remote_at(redis.port(), lines)->publish(local, key, kEnv);
              CHILD_CHECK(lines.warnings() == 0, 2);
              return 0;
            }),
            0);
  // Process 2, another local cache: a local miss answered by Redis, then written locally.
  ASSERT_EQ(in_child([&] {
              Lines lines;
              TuningCache local(dir.path / "b.sqlite");
              CHILD_CHECK(!local.lookup(key), 2);
              auto hit = remote_at(redis.port(), lines)->fetch(local, key, kEnv, report.problem_canonical());
              CHILD_CHECK(hit, 3);
              CHILD_CHECK(hit->candidate_id == "algo-7" && hit->backend == "cublaslt", 4);
              CHILD_CHECK(hit->environment == kEnv, 5);
              CHILD_CHECK(lines.warnings() == 0, 6);
              return 0;
            }),
            0);
  // What process 2 got is in its local cache, every result with it: no network needed next time.
  TuningCache b(dir.path / "b.sqlite");
  const auto hit = b.lookup(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->candidate_id, "algo-7");
  EXPECT_EQ(b.results(key).size(), 3u);
  // Another environment (driver, versions) or problem never takes the entry.
  Lines lines;
  TuningCache c(dir.path / "c.sqlite");
  EXPECT_FALSE(remote_at(redis.port(), lines)->fetch(c, key, kEnv + ";other", report.problem_canonical()));
  EXPECT_FALSE(c.lookup(key));
}

TEST(RemoteCache, SelectsTheDatabaseOfTheUrl) {
  NEED_REDIS();
  const std::string key = key_for(8);
  const TuneReport report = report_for(8, "in-db-3");
  Lines lines;
  TuningCache a(dir.path / "a.sqlite"), b(dir.path / "b.sqlite"), c(dir.path / "c.sqlite");
  a.store(key, kEnv, report);
  RemoteTuningCache db3(make_redis_store({"127.0.0.1", redis.port(), 3}, kPatient), lines.log());
  db3.publish(a, key, kEnv);
  EXPECT_FALSE(remote_at(redis.port(), lines)->fetch(b, key, kEnv, report.problem_canonical())) << "db 0 is empty";
  EXPECT_TRUE(db3.fetch(c, key, kEnv, report.problem_canonical()));
  EXPECT_EQ(lines.warnings(), 0) << lines.text();
}

TEST(RemoteCache, RedisKilledMidRunCostsNothingLocal) {
  NEED_REDIS();
  constexpr int kEntries = 150;
  // Worker w stores its own problems (m = w*1000 + i) locally and remotely, and reads the other
  // worker's; a third of the way through, it says so and waits until the server is killed.
  // Checks its local cache at the end.
  auto worker = [&](int w, int progress_fd, int go_fd) {
    Lines lines;
    TuningCache local(dir.path / ("w" + std::to_string(w) + ".sqlite"));
    auto remote = remote_at(redis.port(), lines, 5ms);  // retries often: still one warning
    int fetched = 0;
    for (int i = 0; i < kEntries; ++i) {
      const int64_t m = w * 1000 + i + 1, other = (1 - w) * 1000 + i + 1;
      local.store(key_for(m), kEnv, report_for(m, "w" + std::to_string(w)));
      const auto t0 = Clock::now();
      remote->publish(local, key_for(m), kEnv);
      if (remote->fetch(local, key_for(other), kEnv, report_for(other, "x").problem_canonical())) ++fetched;
      CHILD_CHECK(ms_since(t0) < kPatient.count(), 2);  // a dead server answers at once (refused)
      if (i + 1 == kEntries / 3) {  // tell the parent, and wait until the server is gone
        char byte = 1;
        CHILD_CHECK(::write(progress_fd, &byte, 1) == 1, 3);
        CHILD_CHECK(::read(go_fd, &byte, 1) == 1, 3);
      }
      std::this_thread::sleep_for(2ms);
    }
    for (int i = 0; i < kEntries; ++i) {
      const auto hit = local.lookup(key_for(w * 1000 + i + 1));
      CHILD_CHECK(hit && hit->candidate_id == "w" + std::to_string(w), 4);
    }
    CHILD_CHECK(local.list().size() == size_t(kEntries + fetched), 5);  // what came from Redis stayed
    if (lines.warnings() != 1) {
      std::fprintf(stderr, "child %d: %d warnings:\n%s", w, lines.warnings(), lines.text().c_str());
      return 6;
    }
    return 0;
  };
  int pipes[2][2], go[2][2];
  pid_t pids[2];
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(::pipe(pipes[w]), 0);
    ASSERT_EQ(::pipe(go[w]), 0);
    std::fflush(nullptr);
    pids[w] = ::fork();
    if (pids[w] == 0) {
      ::close(pipes[w][0]);
      ::close(go[w][1]);
      int rc = 99;
      try {
        rc = worker(w, pipes[w][1], go[w][0]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
      }
      ::_exit(rc);
    }
    ::close(pipes[w][1]);
    ::close(go[w][0]);
  }
  // Kill the server once both workers are a third of the way through, then let them go on.
  for (int w = 0; w < 2; ++w) {
    char byte = 0;
    ASSERT_EQ(::read(pipes[w][0], &byte, 1), 1) << "worker " << w << " stopped early";
  }
  redis.stop();
  for (int w = 0; w < 2; ++w) {
    const char byte = 1;
    ASSERT_EQ(::write(go[w][1], &byte, 1), 1);
    ::close(go[w][1]);
  }
  for (int w = 0; w < 2; ++w) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[w], &status, 0), pids[w]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << w << " status " << status << " (exit " << WEXITSTATUS(status) << ")";
    ::close(pipes[w][0]);
  }
}

TEST(RemoteCache, GarbageUnderOurKeysIsOneWarningThenLocal) {
  NEED_REDIS();
  const std::string key = key_for(32);
  const TuneReport report = report_for(32, "good");
  const std::string rkey = RemoteTuningCache::remote_key(kEnv, key);
  TuningCache source(dir.path / "source.sqlite");
  source.store(key, kEnv, report);
  const std::string good = *source.export_entry(key);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> garbage = {
      {"not json", "text"},
      {std::string("\x00\xff\xfe", 3), "binary"},
      {std::string(40, '[') + std::string(40, ']'), "deep nesting"},
      {"{\"entries\": []}", "no entry"},
      {replaced("\"key\":\"" + key, "\"key\":\"0000" + key.substr(4)), "another key"},
      {replaced("\"environment\":\"" + kEnv, "\"environment\":\"" + kEnv + "x"), "another environment"},
      {replaced("\"median_us\":10.0", "\"median_us\":\"fast\""), "a bad field"},
      {replaced("\"gemmtune-cache\"", "\"other\""), "another format"},
      {std::string(kMaxRemoteEntryBytes + 1, ' '), "too large"},
  };
  Lines lines;
  TuningCache local(dir.path / "local.sqlite");
  auto remote = remote_at(redis.port(), lines);
  for (const auto& [value, what] : garbage) {
    ASSERT_EQ(redis.command({"SET", rkey, value}), "OK");
    EXPECT_FALSE(remote->fetch(local, key, kEnv, report.problem_canonical())) << what;
    EXPECT_FALSE(local.lookup(key)) << what << ": nothing written locally";
  }
  ASSERT_EQ(redis.command({"DEL", rkey}), "1");
  ASSERT_EQ(redis.command({"RPUSH", rkey, "a", "b"}), "2");  // another type under our key
  EXPECT_FALSE(remote->fetch(local, key, kEnv, report.problem_canonical()));
  EXPECT_EQ(lines.warnings(), 1) << lines.text();
  EXPECT_NE(lines.text().find("not used"), std::string::npos) << lines.text();
  // The store keeps answering (garbage is not an outage): a tune here replaces the entry.
  ASSERT_EQ(redis.command({"DEL", rkey}), "1");
  remote->publish(source, key, kEnv);
  EXPECT_TRUE(remote->fetch(local, key, kEnv, report.problem_canonical()));
  EXPECT_EQ(local.lookup(key)->candidate_id, "good");
}

TEST(RemoteCache, ADownServerIsOneWarningAndLeftAlone) {
  Lines lines;
  TempDir dir;
  TuningCache local(dir.path / "local.sqlite");
  local.store(key_for(1), kEnv, report_for(1, "a"));
  const int port = free_port();  // nothing listens: refused at once
  auto remote = remote_at(port, lines);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(remote->fetch(local, key_for(2), kEnv, report_for(2, "x").problem_canonical()));
    remote->publish(local, key_for(1), kEnv);
  }
  EXPECT_EQ(lines.warnings(), 1) << lines.text();
  EXPECT_NE(lines.text().find("working with the local cache only"), std::string::npos) << lines.text();
  EXPECT_TRUE(local.lookup(key_for(1)));
}

// The stand-in for redis-server that the GPU machine's check uses (scripts/gpu/remote-cache.sh)
// speaks what this client sends.
TEST(RemoteCache, MiniRedisStandInServesTheClient) {
  TempDir dir;
  const fs::path portfile = dir.path / "port";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const std::string script = std::string(GEMMTUNE_TEST_SOURCE_DIR) + "/tests/support/mini_redis.py";
    ::execlp("python3", "python3", script.c_str(), "serve", portfile.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int port = 0;
  for (int i = 0; i < 500 && port == 0; ++i) {
    std::this_thread::sleep_for(10ms);
    std::ifstream in(portfile);
    in >> port;
  }
  if (port == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    GTEST_SKIP() << "python3 did not start tests/support/mini_redis.py";
  }
  const std::string key = key_for(12);
  const TuneReport report = report_for(12, "mini");
  Lines lines;
  TuningCache a(dir.path / "a.sqlite"), b(dir.path / "b.sqlite");
  a.store(key, kEnv, report);
  RemoteTuningCache remote(make_redis_store({"127.0.0.1", port, 2}, std::chrono::milliseconds(500)), lines.log());
  EXPECT_FALSE(remote.fetch(b, key, kEnv, report.problem_canonical()));
  remote.publish(a, key, kEnv);
  const auto hit = remote.fetch(b, key, kEnv, report.problem_canonical());
  ASSERT_TRUE(hit) << lines.text();
  EXPECT_EQ(hit->candidate_id, "mini");
  EXPECT_EQ(lines.warnings(), 0) << lines.text();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// ---- slow and broken servers: every operation ends by the timeout -----------------------

// fetch() against `server`: nullopt, one warning, within the bound; then left alone (instant).
void expect_bounded(int port, const std::string& what) {
  Lines lines;
  TempDir dir;
  TuningCache local(dir.path / "local.sqlite");
  auto remote = remote_at(port, lines, 30s, kTimeout);
  auto t0 = Clock::now();
  EXPECT_FALSE(remote->fetch(local, key_for(3), kEnv, report_for(3, "x").problem_canonical())) << what;
  const double ms = ms_since(t0);
  EXPECT_LT(ms, 6 * kTimeout.count()) << what;  // connect + command timeouts, and slack for a busy CI
  EXPECT_EQ(lines.warnings(), 1) << what << ": " << lines.text();
  local.store(key_for(3), kEnv, report_for(3, "y"));
  t0 = Clock::now();
  EXPECT_FALSE(remote->fetch(local, key_for(4), kEnv, report_for(4, "x").problem_canonical()));
  remote->publish(local, key_for(3), kEnv);
  EXPECT_LT(ms_since(t0), kTimeout.count()) << what << ": a failed store is left alone";
  EXPECT_EQ(lines.warnings(), 1) << lines.text();
}

TEST(RemoteCache, ServerThatNeverAnswersIsBoundedByTheTimeout) {
  // Accepted by the kernel (backlog), never read: the command times out.
  FakeServer silent(nullptr);
  expect_bounded(silent.port(), "silent");
}

TEST(RemoteCache, ConnectIsBoundedByTheTimeout) {
  // A backlog of 0 holds one connection; the next SYNs are dropped: connect() never completes.
  FakeServer full(nullptr);
  const int filler = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(full.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(filler, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  expect_bounded(full.port(), "connect");
  ::close(filler);
}

TEST(RemoteCache, ServerThatTricklesIsBoundedByTheTimeout) {
  FakeServer trickle([](int c) {
    char buf[256];
    (void)::recv(c, buf, sizeof buf, 0);
    const std::string head = "$100000\r\n";
    if (::send(c, head.data(), head.size(), MSG_NOSIGNAL) < 0) return;
    for (int i = 0; i < 200; ++i) {  // a byte every 5 ms: never done within the timeout
      if (::send(c, "x", 1, MSG_NOSIGNAL) < 0) return;
      std::this_thread::sleep_for(5ms);
    }
  });
  expect_bounded(trickle.port(), "trickle");
}

TEST(RemoteCache, ServerSpeakingAnotherProtocolIsRefused) {
  for (const std::string answer : {std::string("HTTP/1.1 400 Bad Request\r\n\r\n"), std::string("*2147483647\r\n"),
                                   std::string("$-5\r\n"), std::string("$99999999999\r\n")}) {
    FakeServer other([answer](int c) {
      char buf[256];
      (void)::recv(c, buf, sizeof buf, 0);
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      std::this_thread::sleep_for(100ms);
    });
    expect_bounded(other.port(), answer);
  }
}

TEST(RemoteCache, ServerClosingTheConnectionRaisesNoSigpipe) {
  // The server answers one read (a miss), then closes the connection. The next request, a large
  // entry on the same connection, is sent to a closed peer: its reset makes the next send fail
  // with EPIPE, which without MSG_NOSIGNAL raises SIGPIPE and ends this test process.
  FakeServer closer([](int c) {
    char buf[4096];
    if (::recv(c, buf, sizeof buf, 0) <= 0) return;
    (void)::send(c, "$0\r\n\r\n", 6, MSG_NOSIGNAL);  // GETRANGE of a missing key
  });
  Lines lines;
  TempDir dir;
  TuningCache local(dir.path / "local.sqlite");
  TuneReport big = report_for(5, "big");
  for (int i = 0; i < 4000; ++i) {
    CandidateResult c = big.results.back();
    c.id = "filler-" + std::to_string(i), c.winner = false, c.reason = std::string(200, 'r');
    big.results.push_back(c);
  }
  local.store(key_for(5), kEnv, big);
  auto remote = remote_at(closer.port(), lines, 1ms, kTimeout);
  EXPECT_FALSE(remote->fetch(local, key_for(6), kEnv, report_for(6, "x").problem_canonical()));
  EXPECT_EQ(lines.warnings(), 0) << lines.text();
  std::this_thread::sleep_for(20ms);  // the server's FIN has arrived
  remote->publish(local, key_for(5), kEnv);
  EXPECT_EQ(lines.warnings(), 1) << lines.text();
}

// The binaries carry hiredis (and SQLite): the GPU machine has neither package.
TEST(RemoteCache, BinariesLinkHiredisStatically) {
  const fs::path cli = GEMMTUNE_CLI, capi = cli.parent_path() / "libgemmtune_c.so";
  ASSERT_TRUE(fs::exists(capi)) << capi;
  for (const fs::path& binary : {cli, capi}) {
    FILE* p = ::popen(("ldd '" + binary.string() + "' 2>&1").c_str(), "r");
    ASSERT_TRUE(p);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
    EXPECT_EQ(out.find("hiredis"), std::string::npos) << out;
    EXPECT_EQ(out.find("sqlite"), std::string::npos) << out;
    EXPECT_NE(out.find("libc.so"), std::string::npos) << "ldd ran: " << out;
  }
}

}  // namespace
}  // namespace gemmtune
