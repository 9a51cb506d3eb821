// Crash isolation: the caller's side (tune_in_helper: start, watch, blame, restart) and the
// helper's (run_tuner). Protocol and reasons: isolate.hpp.
#include "engine/isolate.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "core/problem_json.hpp"
#include "core/settings.hpp"
#include "core/report_json.hpp"
#include "engine/tune_hooks.hpp"
#include "gemmtune/engine.hpp"
#include "gemmtune/error.hpp"

extern char** environ;

#ifndef GEMMTUNE_INSTALL_BINDIR
#define GEMMTUNE_INSTALL_BINDIR ""
#endif

namespace gemmtune::isolate {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxLine = 64u << 20;   // a report of thousands of candidates is ~1 MB
constexpr double kHelloTimeoutS = 60;    // exec + static initialization of the helper
constexpr double kExitWaitS = 10;        // a dying helper's CUDA teardown, before SIGKILL
constexpr int kMaxDeathsPerTune = 64;    // then the tune fails rather than restart forever

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Newline-separated messages over a stream socket. send never raises SIGPIPE (MSG_NOSIGNAL):
// a dead peer is a false return, not the end of the caller's process.
class Channel {
 public:
  enum class Got { line, eof, timeout };

  explicit Channel(int fd) : fd_(fd) {}
  int fd() const { return fd_; }

  bool send(const std::string& text) {
    std::string line = text + "\n";
    size_t off = 0;
    while (off < line.size()) {
      const ssize_t n = ::send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += size_t(n);
    }
    return true;
  }

  // The next line (without its newline) within timeout_s (< 0: no limit). A peer that sends
  // more than kMaxLine without a newline is treated as gone.
  Got next(std::string& out, double timeout_s) {
    const auto deadline = timeout_s < 0 ? Clock::time_point::max()
                                        : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                             std::chrono::duration<double>(timeout_s));
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        out = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return Got::line;
      }
      if (buf_.size() > kMaxLine) return Got::eof;
      int wait_ms = -1;
      if (deadline != Clock::time_point::max()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return Got::timeout;
        wait_ms = int(std::min<long long>(left, 1000));
      }
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, wait_ms);
      if (r < 0 && errno != EINTR) return Got::eof;
      if (r <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return Got::eof;
      buf_.append(chunk, size_t(n));
    }
  }

 private:
  int fd_;
  std::string buf_;
};

// ---- the caller's side --------------------------------------------------------------------

// One running helper process and its socket.
class Helper {
 public:
  Helper(fs::path exe) : exe_(std::move(exe)) {}
  ~Helper() { stop(); }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  // Whether the process is still there (an idle helper may have been killed meanwhile: then it is
  // reaped here).
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;
    close_socket();
    return false;
  }
  pid_t pid() const { return pid_; }
  Channel& channel() { return *channel_; }

  // Starts the helper and waits for its hello. Throws Error (runtime) when it cannot start or
  // does not speak this protocol and version.
  void start() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      GT_THROW(std::string("tuning helper: socketpair: ") + std::strerror(errno));
    int child_end = sv[1];
    if (child_end == kTunerFd) {  // dup2(3, 3) would keep close-on-exec: move it out of the way
      child_end = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
      ::close(sv[1]);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, child_end, kTunerFd);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);  // stray prints must not reach the caller's stdout
    std::vector<std::string> argv_s{exe_.string(), kTunerArg};
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int err = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(child_end);
    if (err != 0) {
      ::close(sv[0]);
      GT_THROW("tuning helper: cannot start " + exe_.string() + ": " + std::strerror(err));
    }
    pid_ = pid;
    fd_ = sv[0];
    channel_ = std::make_unique<Channel>(fd_);
    std::string line;
    const Channel::Got got = channel_->next(line, kHelloTimeoutS);
    std::string why;
    if (got == Channel::Got::line) {
      try {
        const json hello = json::parse(line);
        if (hello.value("ev", "") != "hello") why = "its first message is not a hello";
        else if (hello.value("protocol", -1) != kProtocol)
          why = "it speaks protocol " + dump(hello.value("protocol", json())) + ", this library " + std::to_string(kProtocol);
        else if (hello.value("version", "") != version())
          why = "it is gemmtune " + hello.value("version", std::string("?")) + ", this library " + version();
      } catch (const json::exception&) {
        why = "its first message is not JSON";
      }
    } else {
      why = got == Channel::Got::timeout ? "no hello within 60 s" : "it ended before its hello (" + reap(false) + ")";
    }
    if (!why.empty()) {
      stop();
      GT_THROW("tuning helper " + exe_.string() + " is unusable: " + why +
               " (set isolation.helper or $GEMMTUNE_TUNER to this build's gemmtune, or use isolation mode in_process)");
    }
  }

  // Ends the helper (SIGKILL when `kill`, else it is expected to be exiting) and returns how it
  // ended (describe_exit).
  std::string reap(bool kill) {
    if (pid_ <= 0) return "not running";
    if (kill) ::kill(pid_, SIGKILL);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::duration<double>(kExitWaitS);
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno != EINTR)) break;
      if (Clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    close_socket();
    return describe_exit(status);
  }

  // Closing the socket tells an idle helper to exit; one that does not is killed.
  void stop() {
    close_socket();
    if (pid_ > 0) {
      int status = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(1);
      while (::waitpid(pid_, &status, WNOHANG) == 0 && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (::waitpid(pid_, &status, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
      }
      pid_ = -1;
    }
  }

 private:
  void close_socket() {
    channel_.reset();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  fs::path exe_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::unique_ptr<Channel> channel_;
};

// The helpers of this process: one per (device, executable), kept warm between tunes, one tune
// at a time each (tunes on one GPU would disturb each other's timings anyway). Process-wide on
// purpose: a helper outlives the engines that use it, so that a later Engine in the same process
// finds it warm. Its destructor (at exit) closes every socket, which ends idle helpers.
class Pool {
 public:
  struct Slot {
    std::mutex busy;
    std::unique_ptr<Helper> helper;
  };
  Slot& slot(int device, const fs::path& exe) {
    std::lock_guard lock(mu_);
    auto& s = slots_[{device, exe.string()}];
    if (!s) s = std::make_unique<Slot>();
    return *s;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, std::string>, std::unique_ptr<Slot>> slots_;
};

Pool& pool() {
  static Pool p;
  return p;
}

CandidateStatus status_from(const std::string& s) {
  for (CandidateStatus st : {CandidateStatus::ok, CandidateStatus::wrong, CandidateStatus::failed, CandidateStatus::pruned})
    if (s == to_string(st)) return st;
  GT_THROW_CODE(internal, "tuning helper: unknown candidate status '" + s + "'");
}

double number_or(const json& j, const char* key, double none) {
  auto it = j.find(key);
  return it == j.end() || !it->is_number() ? none : it->get<double>();
}

// Inverse of to_json(CandidateResult) (core/report_json.hpp); null numbers read as NaN
// (rel_err: -1, "not measured").
CandidateResult result_from(const json& j) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  CandidateResult r;
  r.backend = j.at("backend").get<std::string>();
  r.id = j.at("id").get<std::string>();
  r.name = j.at("name").get<std::string>();
  r.status = status_from(j.at("status").get<std::string>());
  r.reason = j.at("reason").get<std::string>();
  r.rel_err = number_or(j, "rel_err", -1);
  r.median_us = number_or(j, "median_us", kNaN);
  r.p20_us = number_or(j, "p20_us", kNaN);
  r.p80_us = number_or(j, "p80_us", kNaN);
  r.samples = j.value("samples", 0);
  r.compile_s = number_or(j, "compile_s", 0);
  r.winner = j.value("winner", false);
  r.is_default = j.value("is_default", false);
  return r;
}

json quarantined_json(const Quarantined& q) {
  return {{"backend", q.backend}, {"id", q.candidate_id}, {"name", q.candidate_name},
          {"status", to_string(q.status)}, {"reason", q.reason}};
}

// The candidate whose code the helper said it runs, and since when.
struct Current {
  bool running = false;
  std::string backend, id, name, step;
};

// Acts on one message of the helper (isolate.hpp) during a tune: forwards its log line, tracks
// the candidate it runs (`cur`) and its account of a fault; the report when it is "done".
// Throws the helper's Error for "error", and Error (internal) for a malformed message.
std::optional<TuneReport> handle(const std::string& line, const Log& log, Current& cur, std::string& fault) {
  try {
    const json m = json::parse(line);
    const std::string ev = m.at("ev").get<std::string>();
    if (ev == "log") {
      const std::string text = m.at("line").get<std::string>();
      if (text.rfind("warning: ", 0) == 0) log.warn(text.substr(9));
      else log(text);
    } else if (ev == "stage") {
      cur.running = false;
    } else if (ev == "run") {
      cur = {true, m.at("backend").get<std::string>(), m.at("id").get<std::string>(), m.value("name", ""),
             m.value("step", "")};
    } else if (ev == "fault") {  // names the candidate itself: the blame does not rest on the last "run"
      fault = m.at("reason").get<std::string>();
      cur = {true, m.at("backend").get<std::string>(), m.at("id").get<std::string>(), m.value("name", ""), cur.step};
    } else if (ev == "done") {
      const json& rep = m.at("report");
      TuneReport r;
      r.spread = number_or(rep, "spread", 0);
      for (const json& n : rep.at("notes")) r.notes.push_back(n.get<std::string>());
      for (const json& c : rep.at("results")) r.results.push_back(result_from(c));
      return r;
    } else if (ev == "error") {
      const int code = m.value("code", int(ErrorCode::runtime));
      throw Error(m.value("message", std::string("the tuning helper failed")), __FILE__, __LINE__,
                  code >= 0 && code <= int(ErrorCode::internal) ? ErrorCode(code) : ErrorCode::runtime);
    }
    return std::nullopt;
  } catch (const json::exception& e) {
    GT_THROW_CODE(internal, std::string("tuning helper: a malformed message (") + e.what() + "): " + line.substr(0, 200));
  }
}

}  // namespace

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (wait status " + std::to_string(status) + ")";
}

fs::path find_tuner(const fs::path& configured) {
  auto executable = [](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (!configured.empty()) {
    GT_CHECK_INVALID(executable(configured),
                     "isolation.helper: '" + configured.string() + "' is not an executable file");
    return configured;
  }
  std::vector<fs::path> dirs;
  Dl_info info{};
  std::error_code ec;
  // dli_fname is the name the object was loaded by (dlopen's argument, argv[0] for a program):
  // maybe relative to the working directory.
  if (::dladdr(reinterpret_cast<void*>(&find_tuner), &info) && info.dli_fname && info.dli_fname[0] != '\0') {
    if (fs::path lib = fs::absolute(info.dli_fname, ec); !ec && fs::exists(lib, ec)) dirs.push_back(lib.parent_path());
  }
  if (fs::path self = fs::read_symlink("/proc/self/exe", ec); !ec) dirs.push_back(self.parent_path());
  std::vector<fs::path> tried;
  for (const fs::path& d : dirs)
    for (const fs::path& p : {d / "gemmtune", d / "_bin" / "gemmtune", d.parent_path() / "bin" / "gemmtune"})
      if (std::find(tried.begin(), tried.end(), p) == tried.end()) tried.push_back(p);
  if (std::string bindir = GEMMTUNE_INSTALL_BINDIR; !bindir.empty()) tried.push_back(fs::path(bindir) / "gemmtune");
  std::string looked;
  for (const fs::path& p : tried) {
    if (executable(p)) return p;
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  // Last, $PATH (an installed gemmtune; one of another version is refused at its hello).
  for (const fs::path& d : executable_path())
    if (d.is_absolute() && executable(d / "gemmtune")) return d / "gemmtune";
  GT_THROW("isolation: cannot find the tuning helper (the gemmtune executable) at " + looked + " or on $PATH" +
           "; set isolation.helper or $GEMMTUNE_TUNER, or isolation mode in_process ($GEMMTUNE_ISOLATION=in-process)");
}

TuneReport tune_in_helper(const EngineOptions& opt, const Log& log, TuningCache* cache, const Request& req,
                          std::vector<Quarantined>& session) {
  const fs::path exe = find_tuner(opt.isolation.helper);
  Pool::Slot& slot = pool().slot(opt.device, exe);
  std::lock_guard busy(slot.busy);
  const double deadline_s = opt.isolation.candidate_timeout_s > 0 ? opt.isolation.candidate_timeout_s : 30;

  bool fresh = false;  // the helper was started for this attempt
  for (int deaths = 0;;) {
    fresh = !slot.helper || !slot.helper->running();
    if (fresh) {
      const auto t0 = Clock::now();
      slot.helper = std::make_unique<Helper>(exe);
      slot.helper->start();
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.1f", std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      log.debug("  tuning helper started: " + exe.string() + " (pid " + std::to_string(slot.helper->pid()) +
                ", hello after " + ms + " ms)");
    }
    Helper& h = *slot.helper;
    json exclude = json::array();
    for (const Quarantined& q : session)
      if (q.environment == req.environment && (q.scope.empty() || q.scope == req.key)) exclude.push_back(quarantined_json(q));
    const json request{{"op", req.op},         {"problem", json::parse(req.problem_json)},
                       {"key", req.key},       {"environment", req.environment},
                       {"options", req.options_json}, {"exclude", std::move(exclude)}};

    Current cur;
    bool heard = false;  // any answer to this request
    std::string fault;   // the helper's own account of a lost CUDA context
    Channel::Got got = h.channel().send(dump(request)) ? Channel::Got::line : Channel::Got::eof;
    while (got == Channel::Got::line) {
      std::string line;
      got = h.channel().next(line, cur.running ? deadline_s : -1);
      if (got != Channel::Got::line) break;
      heard = true;
      if (std::optional<TuneReport> r = handle(line, log, cur, fault)) return std::move(*r);
    }

    // The helper died, or ran one candidate step past the deadline.
    const bool hung = got == Channel::Got::timeout;
    const std::string ended = h.reap(/*kill=*/hung);
    // A warm helper that ended while idle (killed from outside) before it heard this request:
    // start a fresh one and ask again.
    if (!heard && !hung && !fresh) {
      log.debug("  tuning helper ended while idle (" + ended + "); starting a new one");
      continue;
    }
    const std::string where = cur.running ? " while in its " + cur.step + " step" : "";
    std::string reason;
    if (hung) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", deadline_s);
      reason = std::string("hung: no progress for ") + buf + " s" + where + " (the helper was killed)";
    } else if (!fault.empty()) {
      reason = "faulted" + where + ": " + fault;
    } else {
      reason = "crashed the tuning helper (" + ended + ")" + where;
    }
    if (!cur.running)
      GT_THROW("the tuning helper (" + exe.string() + ") " + (hung ? "hung" : ended) +
               " outside any candidate's step; the tune cannot go on");
    Quarantined q{req.environment, "", cur.backend, cur.id, cur.name, CandidateStatus::failed, reason, 0};
    session.push_back(q);
    if (cache) {
      try {
        cache->quarantine(q);
      } catch (const Error& e) {
        log.warn("could not quarantine " + cur.backend + " " + cur.name + " in the tuning cache: " + e.message());
      }
    }
    log.warn(cur.backend + " " + cur.name + ": " + reason + "; quarantined, the tune goes on in a new helper");
    if (++deaths >= kMaxDeathsPerTune)
      GT_THROW("the tuning helper died " + std::to_string(deaths) + " times in one tune; giving up");
  }
}

}  // namespace gemmtune::isolate

// ---- the helper's side ----------------------------------------------------------------------

namespace gemmtune::detail {
namespace {

using nlohmann::json;

// Ends the helper when its parent (the caller) is gone: an orphaned helper must not keep a GPU
// context. The caller closing the socket ends an idle helper; this covers a busy one.
void watch_parent() {
  const pid_t parent = ::getppid();
  std::thread([parent] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      if (::getppid() != parent) ::_exit(0);
    }
  }).detach();
}

}  // namespace

int run_tuner(int fd) {
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // compile workers this helper starts must not hold the socket
  // A crash here is an expected event (a faulting candidate), not a bug to debug: no core file
  // (a GPU process's core takes seconds to write).
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  isolate::Channel ch(fd);
  std::mutex write_mu;
  // A caller that is gone cannot be told anything: end quietly.
  auto send = [&](const json& j) {
    std::lock_guard lock(write_mu);
    if (!ch.send(isolate::dump(j))) ::_exit(0);
  };
  watch_parent();
  send({{"ev", "hello"}, {"protocol", isolate::kProtocol}, {"version", version()}, {"pid", int(::getpid())}});

  // The engine of the last options text, kept for later requests with the same options (its
  // toolchain probes and compile workers, its loaded candidates); other options replace it, so
  // that a helper never holds more than one engine's workers.
  std::string engine_options;
  std::unique_ptr<Engine> engine;
  for (;;) {
    std::string line;
    if (ch.next(line, -1) != isolate::Channel::Got::line) return 0;
    try {
      json req;
      try {
        req = json::parse(line);
      } catch (const json::exception& e) {
        GT_THROW_CODE(internal, std::string("tuning helper: a request that is not JSON: ") + e.what());
      }
      const std::string op = req.at("op").get<std::string>();
      const std::string options = req.at("options").get<std::string>();
      if (!engine || engine_options != options) {
        engine.reset();
        engine_options = options;
        EngineOptions o = engine_options_from_json(options);
        o.isolation.mode = Isolation::in_process;
        o.log = [&send](const std::string& text) { send({{"ev", "log"}, {"line", text}}); };
        engine = std::make_unique<Engine>(std::move(o));
      }
      TuneHooks hooks;
      for (const json& q : req.at("exclude")) {
        Quarantined x;
        x.backend = q.at("backend").get<std::string>();
        x.candidate_id = q.at("id").get<std::string>();
        x.candidate_name = q.value("name", "");
        x.status = q.value("status", "failed") == "wrong" ? CandidateStatus::wrong : CandidateStatus::failed;
        x.reason = q.value("reason", "");
        hooks.exclude.push_back(std::move(x));
      }
      hooks.keep_winner = false;
      hooks.stage = [&](const char* stage) { send({{"ev", "stage"}, {"stage", stage}}); };
      // One message per change of candidate or step, and at least every 100 ms while one
      // candidate's step repeats (a race's samples): the caller's deadline is per message.
      std::string last;
      auto last_at = isolate::Clock::now();
      hooks.running = [&](const CandidateResult& c, const char* step) {
        const std::string now = c.backend + "\n" + c.id + "\n" + step;
        if (now == last && isolate::Clock::now() - last_at < std::chrono::milliseconds(100)) return;
        last = now, last_at = isolate::Clock::now();
        send({{"ev", "run"}, {"backend", c.backend}, {"id", c.id}, {"name", c.name}, {"step", step}});
      };
      // A sticky CUDA error (illegal address, trap, ...) poisons this context for good: name the
      // candidate and end, so that the caller restarts a fresh helper without it.
      hooks.failed = [&](const CandidateResult& c, const std::string& reason) {
        cudaGetLastError();
        const cudaError_t st = cudaDeviceSynchronize();
        if (st == cudaSuccess) return;
        send({{"ev", "fault"}, {"backend", c.backend}, {"id", c.id}, {"name", c.name},
              {"reason", reason + " (CUDA context lost: " + cudaGetErrorName(st) + ")"}});
        ::_exit(70);
      };
      TuneReport r;
      auto tune = [&](const auto& problem) {
        const std::string key = engine->cache_key(problem);
        if (key != req.at("key").get<std::string>())
          GT_THROW("tuning helper: its environment differs from the caller's (helper: " + engine->environment(op) +
                   "; caller: " + req.value("environment", std::string("?")) + ")");
        r = EngineAccess::tune_here(*engine, problem, hooks);
      };
      if (op == GemmOp::name) tune(problem_from_json(req.at("problem").dump()));
      else if (op == SoftmaxOp::name) tune(softmax_problem_from_json(req.at("problem").dump()));
      else if (op == GroupedOp::name) tune(grouped_problem_from_json(req.at("problem").dump()));
      else GT_THROW_CODE(internal, "tuning helper: unknown op '" + op + "'");
      json results = json::array();
      for (const CandidateResult& c : r.results) results.push_back(to_json(c));
      send({{"ev", "done"}, {"report", {{"key", r.key}, {"spread", r.spread}, {"notes", r.notes}, {"results", results}}}});
    } catch (const Error& e) {
      send({{"ev", "error"}, {"code", int(e.code())}, {"message", e.message()}});
    } catch (const std::exception& e) {
      send({{"ev", "error"}, {"code", int(ErrorCode::internal)}, {"message", std::string("tuning helper: ") + e.what()}});
    }
  }
}

}  // namespace gemmtune::detail
