// Compile worker processes: spawning, the line protocol with deadlines, failure and reaping.
#include "compile/worker_pool.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/settings.hpp"
#include "gemmtune/error.hpp"

extern char** environ;


namespace gemmtune {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kStderrTail = 8192;  // bytes of a worker's stderr kept for error messages

// "60 s", "0.5 s".
std::string seconds_text(double s) {
  char buf[32];
  if (s == double(int64_t(s))) std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(s));
  else std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

// Moves fd to a number >= 3 (so that the child's dup2 onto 0..2 never collides, even when the
// parent runs with stdin closed) and marks it close-on-exec.
int high_cloexec(int fd) {
  if (fd >= 3) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

// CPU seconds (user + system) that process `pid` and its waited-for children have used, from
// /proc/<pid>/stat (fields 14-17: utime, stime, cutime, cstime, in clock ticks); -1 when unknown.
double process_cpu_seconds(pid_t pid) {
  if (pid <= 0) return -1;
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return -1;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name (field 2) may hold spaces
  if (!p) return -1;
  unsigned long long t[4];
  // After ") ": state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt.
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &t[0], &t[1], &t[2],
                  &t[3]) != 4)
    return -1;
  return double(t[0] + t[1] + t[2] + t[3]) / double(sysconf(_SC_CLK_TCK));
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// "exited with status 1", "died (signal 9)".
std::string status_text(int status) {
  if (WIFSIGNALED(status)) return "died (signal " + std::to_string(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped (wait status " + std::to_string(status) + ")";
}

// The last few non-empty lines of a worker's stderr, on one line.
std::string tail_lines(const std::string& text, int lines = 3) {
  std::vector<std::string> out;
  size_t end = text.size();
  while (end > 0 && int(out.size()) < lines) {
    size_t start = text.rfind('\n', end - 1);
    size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(from, end - from);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out.push_back(line.size() > 400 ? line.substr(0, 400) + "..." : line);
    if (start == std::string::npos) break;
    end = start;
  }
  std::reverse(out.begin(), out.end());
  std::string s;
  for (auto& l : out) s += (s.empty() ? "" : " | ") + l;
  return s;
}

std::string shorten(const std::string& s, size_t n = 200) { return s.size() > n ? s.substr(0, n) + "..." : s; }

// The inherited environment with `overrides` applied.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    if (!overrides.count(name)) out.push_back(std::move(kv));
  }
  for (auto& [k, v] : overrides) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

// ---- paths and defaults -------------------------------------------------------------------

WorkerPoolOptions WorkerPoolOptions::for_python(const CompileOptions& c) {
  WorkerPoolOptions o;
  o.command = {c.python, "-m", "gemmtune.worker"};
  std::string pythonpath = c.python_dir.string();
  if (std::string old = inherited_pythonpath(); !old.empty()) pythonpath += ":" + old;
  o.env = {{"PYTHONPATH", pythonpath}, {"PYTHONUNBUFFERED", "1"}};
  o.max_workers = std::max(1, c.workers);
  return o;
}

// ---- one worker process -------------------------------------------------------------------

namespace detail {

class Worker {
 public:
  // Spawns the worker and reads its ready line; throws Error (nothing left running) on failure,
  // also when `cancel_fd` (if >= 0) becomes readable or hung up meanwhile. `extra_env` is added
  // to opt.env.
  static std::unique_ptr<Worker> start(const WorkerPoolOptions& opt, int cancel_fd = -1,
                                       const std::map<std::string, std::string>& extra_env = {}) {
    auto w = std::unique_ptr<Worker>(new Worker);
    w->command_ = opt.command.empty() ? std::string("?") : opt.command[0];
    w->spawn(opt, extra_env);
    w->await_ready(opt, cancel_fd);
    return w;
  }

  // A worker forked by a fork server: makes its channels, has `fork` (the server's request)
  // hand the child's ends over and return the child's pid, then reads its ready line. `reap`
  // later kills and reaps it through the server. Throws Error like start().
  using ForkFn = std::function<pid_t(const int child_fds[3])>;
  using ReapFn = std::function<ReapResult(pid_t, double grace_s)>;
  static std::unique_ptr<Worker> forked(const WorkerPoolOptions& opt, int cancel_fd, const ForkFn& fork,
                                        ReapFn reap) {
    auto w = std::unique_ptr<Worker>(new Worker);
    w->command_ = opt.command.empty() ? std::string("?") : opt.command[0];
    w->reap_ = std::move(reap);
    int child[3] = {-1, -1, -1};
    w->make_channels(child);
    try {
      w->pid_ = fork(child);
    } catch (...) {
      for (int fd : child) close(fd);
      throw;
    }
    for (int fd : child) close(fd);
    w->forked_ = true;
    w->await_ready(opt, cancel_fd);
    return w;
  }

  ~Worker() { kill_and_reap(); }

  const json& ready() const { return ready_; }
  pid_t pid() const { return pid_; }

  // One request and its response. Throws Error (the worker is then dead or unusable). With
  // `fds` (3 descriptors), they travel with the request's first bytes (SCM_RIGHTS; stdin is a
  // Unix socket). Gives up when cancel_fd (if >= 0) polls readable or hung up.
  json exchange(const json& request, int64_t id, double timeout_s, const int* fds = nullptr, int cancel_fd = -1) {
    auto deadline = Clock::now() + to_duration(timeout_s);
    err_tail_.clear();
    write_all(request.dump() + "\n", deadline, timeout_s, fds);
    std::string line = read_line(deadline, timeout_s, cancel_fd);
    json r = json::parse(line, nullptr, false);
    if (!r.is_object()) fail("compile worker answered a line that is not a JSON object: " + shorten(line));
    auto it = r.find("id");
    if (it == r.end() || !it->is_number_integer() || it->get<int64_t>() != id)
      fail("compile worker answered id " + (it == r.end() ? std::string("(none)") : it->dump()) + ", expected " +
           std::to_string(id));
    return r;
  }

  // False when the process has exited (it is reaped then; a forked one: when its stdout says
  // so, and it is reaped by the destructor, through the server).
  bool alive() {
    if (pid_ <= 0) return false;
    if (forked_) {
      // An idle worker writes nothing to stdout: anything readable there (EOF included) means
      // it is gone or broken.
      pollfd p{out_, POLLIN, 0};
      int rc;
      while ((rc = poll(&p, 1, 0)) < 0 && errno == EINTR) {
      }
      return out_buf_.empty() && rc == 0;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;
    return false;
  }

  // Lets the worker exit on its own (EOF on stdin); finish() then waits for it.
  void close_input() { close_fd(in_); }

  // Waits until `deadline` for the worker to exit, then kills it; always reaps.
  void finish(Clock::time_point deadline) {
    close_input();
    if (forked_ && pid_ > 0) {
      double grace = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (reap_) reap_(std::exchange(pid_, -1), std::clamp(grace, 0.0, 60.0));
      pid_ = -1;
    }
    while (pid_ > 0 && Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) != 0) pid_ = -1;
      else std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill_and_reap();
  }

  void kill_and_reap() {
    if (pid_ > 0 && forked_) {  // not our child: its server kills and reaps it
      pid_t pid = std::exchange(pid_, -1);
      if (reap_) reap_(pid, 0);
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
    close_fd(in_);
    close_fd(out_);
    close_fd(err_);
  }

 private:
  Worker() = default;

  // Seconds as a steady_clock duration, clamped to [0, one year]: a huge timeout (1e10, 1e300,
  // inf: "no timeout") would overflow the nanosecond count into a deadline in the past, failing
  // every compile at once (reliability audit D9). NaN is 0.
  static Clock::duration to_duration(double s) {
    constexpr double kYear = 365.0 * 24 * 3600;
    const double clamped = s >= 0 ? std::min(s, kYear) : 0.0;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(clamped));
  }


  [[noreturn]] void fail(const std::string& why) {
    std::string tail = tail_lines(err_tail_);
    GT_THROW(tail.empty() ? why : why + "; stderr: " + tail);
  }

  // Creates this worker's channels: ours in in_/out_/err_ (non-blocking), the child's ends in
  // child[0..2] (its stdin: a socket, so that writes can say MSG_NOSIGNAL and descriptors can
  // travel; stdout, stderr: pipes). All close-on-exec, numbered >= 3. Throws Error.
  void make_channels(int child[3]) {
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    bool made = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
                pipe2(err, O_CLOEXEC) == 0;
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]})
      if (*fd >= 0) *fd = high_cloexec(*fd);
    made = made && in[0] >= 0 && in[1] >= 0 && out[0] >= 0 && out[1] >= 0 && err[0] >= 0 && err[1] >= 0;
    std::string why = made ? "" : std::string("compile worker: cannot create pipes: ") + std::strerror(errno);
    in_ = in[0], out_ = out[0], err_ = err[0];
    child[0] = in[1], child[1] = out[1], child[2] = err[1];
    if (!made) {
      for (int i = 0; i < 3; ++i)
        if (child[i] >= 0) close(child[i]);
      GT_THROW(why);  // ours are closed by the destructor
    }
    set_nonblocking(in_);
    set_nonblocking(out_);
    set_nonblocking(err_);
  }

  void spawn(const WorkerPoolOptions& opt, const std::map<std::string, std::string>& extra_env) {
    GT_CHECK(!opt.command.empty(), "compile worker: empty command");
    int child[3] = {-1, -1, -1};
    make_channels(child);
    int child_in = child[0], child_out = child[1], child_err = child[2];

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, child_in, 0);
    posix_spawn_file_actions_adddup2(&fa, child_out, 1);
    posix_spawn_file_actions_adddup2(&fa, child_err, 2);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // descriptors others opened without CLOEXEC
#endif
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

    std::map<std::string, std::string> env = opt.env;
    for (auto& [k, v] : extra_env) env[k] = v;
    std::vector<std::string> args = opt.command, envs = child_environment(env);
    std::vector<char*> argv = c_strings(args), envp = c_strings(envs);
    int rc = posix_spawnp(&pid_, args[0].c_str(), &fa, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(child_in);
    close(child_out);
    close(child_err);
    if (rc != 0) {
      pid_ = -1;
      kill_and_reap();
      GT_THROW("cannot start compile worker '" + args[0] + "': " + std::strerror(rc));
    }
  }

  // Reads the ready line; on failure kills and reaps the worker and throws "compile worker
  // '<command>' did not start: <why>".
  void await_ready(const WorkerPoolOptions& opt, int cancel_fd) {
    try {
      std::string line = read_line(Clock::now() + to_duration(opt.start_timeout_s), opt.start_timeout_s, cancel_fd);
      json ready = json::parse(line, nullptr, false);
      if (!ready.is_object() || !ready.value("ready", false))
        fail("compile worker's first line is not a ready line: " + shorten(line));
      ready_ = std::move(ready);
    } catch (const Error& e) {
      kill_and_reap();
      std::string why = e.message();
      if (why.rfind("compile worker ", 0) == 0) why.erase(0, 15);
      GT_THROW("compile worker '" + command_ + "' did not start: " + why);
    }
  }

  // Why the worker stopped answering: it exited (reaped here) or closed its stdout.
  [[noreturn]] void died() {
    if (forked_) {  // the server waits (2 s) for it, kills it if it runs on, and says how it ended
      pid_t pid = std::exchange(pid_, -1);
      ReapResult r = reap_ ? reap_(pid, 2.0) : ReapResult{};
      drain_stderr();
      if (r.ok && r.killed) fail("compile worker closed its stdout (killed)");
      fail("compile worker " + (r.ok ? r.status : std::string("vanished (its fork server is gone)")));
    }
    int status = 0;
    pid_t pid = std::exchange(pid_, -1);
    auto grace = Clock::now() + std::chrono::seconds(2);
    pid_t r = 0;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (r == 0) {  // closed stdout but kept running
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      drain_stderr();
      fail("compile worker closed its stdout (killed)");
    }
    drain_stderr();  // after the exit: everything it wrote is in the pipe
    fail("compile worker " + (r > 0 ? status_text(status) : std::string("vanished")));
  }

  [[noreturn]] void timed_out(double timeout_s) {
    drain_stderr();
    kill_and_reap();
    fail("compile worker timed out after " + seconds_text(timeout_s));
  }

  void drain_stderr() {
    char buf[4096];
    while (err_ >= 0) {
      ssize_t n = read(err_, buf, sizeof buf);
      if (n > 0) {
        err_tail_.append(buf, size_t(n));
        if (err_tail_.size() > kStderrTail) err_tail_.erase(0, err_tail_.size() - kStderrTail);
      } else if (n == 0) {
        close_fd(err_);
      } else if (errno != EINTR) {
        break;  // EAGAIN: nothing more for now
      }
    }
  }

  int poll_ms(Clock::time_point deadline) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return int(std::clamp<int64_t>(left + 1, 0, 1000));
  }

  // With `fds` (3), the first bytes sent carry them (SCM_RIGHTS).
  void write_all(const std::string& text, Clock::time_point deadline, double timeout_s, const int* fds = nullptr) {
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n;
      if (fds) {
        iovec iov{const_cast<char*>(text.data() + done), text.size() - done};
        alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(3 * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
        n = sendmsg(in_, &msg, MSG_NOSIGNAL);
        if (n > 0) fds = nullptr;  // sent with these bytes
      } else {
        n = send(in_, text.data() + done, text.size() - done, MSG_NOSIGNAL);
      }
      if (n > 0) {
        done += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) died();
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        fail(std::string("compile worker: write: ") + std::strerror(errno));
      if (Clock::now() >= deadline) timed_out(timeout_s);
      pollfd p[2] = {{in_, POLLOUT, 0}, {err_, POLLIN, 0}};
      poll(p, err_ >= 0 ? 2 : 1, poll_ms(deadline));
      if (p[1].revents) drain_stderr();
    }
  }

  // The next line of stdout (without the newline), draining stderr meanwhile; gives up when
  // cancel_fd (if >= 0) polls readable or hung up.
  std::string read_line(Clock::time_point deadline, double timeout_s, int cancel_fd = -1) {
    for (;;) {
      if (size_t nl = out_buf_.find('\n'); nl != std::string::npos) {
        std::string line = out_buf_.substr(0, nl);
        out_buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (Clock::now() >= deadline) timed_out(timeout_s);
      // err_ may be closed (-1: poll ignores it); cancel_fd likewise.
      pollfd p[3] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
      int rc = poll(p, 3, poll_ms(deadline));
      if (rc < 0 && errno != EINTR) fail(std::string("compile worker: poll: ") + std::strerror(errno));
      if (rc <= 0) continue;
      if (p[2].revents) fail("cancelled (the pool is closing)");
      if (p[1].revents) drain_stderr();
      if (p[0].revents) read_stdout();
    }
  }

  void read_stdout() {
    char buf[65536];
    for (;;) {
      ssize_t n = read(out_, buf, sizeof buf);
      if (n > 0) {
        out_buf_.append(buf, size_t(n));
        if (out_buf_.size() > (size_t(64) << 20)) fail("compile worker sent a line over 64 MiB");
        continue;
      }
      if (n == 0) {
        if (out_buf_.find('\n') != std::string::npos) return;  // answer the complete line first
        died();
      }
      if (errno == EINTR) continue;
      return;  // EAGAIN
    }
  }

  std::string command_;
  pid_t pid_ = -1;
  bool forked_ = false;  // a fork server's child: reap_ kills and reaps it
  ReapFn reap_;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_buf_, err_tail_;
  json ready_;
};

}  // namespace detail

// ---- the pool -----------------------------------------------------------------------------

WorkerPool::WorkerPool(WorkerPoolOptions options) : opt_(std::move(options)) {
  opt_.max_workers = std::max(1, opt_.max_workers);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) == 0) {  // without it, prestart() does nothing
    cancel_read_ = high_cloexec(fds[0]);
    cancel_write_ = high_cloexec(fds[1]);
    if (cancel_read_ < 0 || cancel_write_ < 0) {
      close_fd(cancel_read_);
      close_fd(cancel_write_);
    }
  }
}

WorkerPool::~WorkerPool() {
  // Workers still starting for prestart(): closing the write end wakes their ready-line wait,
  // which then kills and reaps them; a worker that made it first lands in idle_.
  close_fd(cancel_write_);
  std::map<int64_t, std::thread> starters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    starters.swap(starters_);
  }
  for (auto& [serial, t] : starters) t.join();
  close_fd(cancel_read_);

  std::vector<std::unique_ptr<detail::Worker>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle.swap(idle_);
  }
  for (auto& w : idle) w->close_input();  // all exit in parallel
  auto deadline = Clock::now() + std::chrono::seconds(2);
  for (auto& w : idle) w->finish(deadline);  // a forked one through the server: before the server
  idle.clear();

  std::unique_ptr<detail::Worker> server;
  {
    std::lock_guard<std::mutex> lock(server_mu_);
    server.swap(server_);
  }
  if (server) server->finish(Clock::now() + std::chrono::seconds(3));  // it kills children left
}

pid_t WorkerPool::fork_server_pid() const {
  std::lock_guard<std::mutex> lock(server_mu_);
  return server_ ? server_->pid() : -1;
}

// ---- the fork server ----------------------------------------------------------------------

bool WorkerPool::ensure_server_locked() {
  if (server_dropped_) return false;
  if (server_) return true;
  // Throws when it cannot start: a spawned worker would fail the same way (same command).
  auto t0 = Clock::now();
  try {
    server_ = detail::Worker::start(opt_, cancel_read_, {{"GEMMTUNE_WORKER_WARMUP", "1"}});
  } catch (...) {
    server_dropped_ = true;
    throw;
  }
  if (opt_.log) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "compile worker fork server started (pid %d, ready line after %.2f s)",
                  int(server_->pid()), std::chrono::duration<double>(Clock::now() - t0).count());
    opt_.log(buf);
  }
  std::lock_guard<std::mutex> lock(mu_);
  last_ready_ = server_->ready();
  return true;
}

void WorkerPool::drop_server_locked(const std::string& why) {
  if (opt_.log) opt_.log("compile worker fork server dropped (workers are spawned from now on): " + why);
  server_dropped_ = true;
  if (server_) server_->kill_and_reap();  // its children die with it (PR_SET_PDEATHSIG)
  server_.reset();
}

pid_t WorkerPool::server_fork(const int fds[3], int cancel_fd) {
  std::lock_guard<std::mutex> lock(server_mu_);
  if (!ensure_server_locked()) GT_THROW("compile worker fork server: dropped");
  int64_t id = server_next_id_++;
  json r;
  try {
    // Its first fork waits for its warm-up: the start timeout covers both.
    r = server_->exchange({{"op", "fork"}, {"id", id}}, id, opt_.start_timeout_s, fds, cancel_fd);
  } catch (const Error& e) {
    drop_server_locked(e.message());
    throw;
  }
  // A fork answer names the op and a child's pid (never the server's own).
  if (!r.value("ok", false) || r.value("op", std::string()) != "fork" || !r.contains("pid") ||
      !r["pid"].is_number_integer() || r["pid"].get<int64_t>() <= 0 || r["pid"].get<int64_t>() == server_->pid()) {
    std::string why = "compile worker fork server refused to fork: " + shorten(r.dump());
    drop_server_locked(why);
    GT_THROW(why);
  }
  return pid_t(r["pid"].get<int64_t>());
}

detail::ReapResult WorkerPool::server_reap(pid_t pid, double grace_s) {
  std::lock_guard<std::mutex> lock(server_mu_);
  detail::ReapResult out;
  if (!server_) return out;  // dropped or closed: its children died with it
  int64_t id = server_next_id_++;
  try {
    json r = server_->exchange({{"op", "reap"}, {"id", id}, {"pid", pid}, {"grace_s", grace_s}}, id, grace_s + 30);
    if (!r.value("ok", false)) {
      if (opt_.log) opt_.log("compile worker fork server: reap " + std::to_string(pid) + ": " + shorten(r.dump()));
      return out;
    }
    out.ok = true;
    out.status = r.value("status", std::string("ended"));
    out.killed = r.value("killed", false);
  } catch (const Error& e) {
    drop_server_locked(e.message());
  }
  return out;
}

std::unique_ptr<detail::Worker> WorkerPool::new_worker(int cancel_fd) {
  if (opt_.fork_server) {
    bool usable;
    {
      std::lock_guard<std::mutex> lock(server_mu_);
      usable = ensure_server_locked();  // throws when the server cannot start
    }
    if (usable) {
      try {
        return detail::Worker::forked(
            opt_, cancel_fd, [this, cancel_fd](const int fds[3]) { return server_fork(fds, cancel_fd); },
            [this](pid_t pid, double grace_s) { return server_reap(pid, grace_s); });
      } catch (const Error&) {
        std::lock_guard<std::mutex> lock(server_mu_);
        if (!server_dropped_) throw;  // the child's own failure: this request's
        // The server failed: spawn this one (and the next ones) instead, unless the pool is
        // closing (the cancel pipe hung up).
        pollfd p{cancel_fd, POLLIN, 0};
        if (cancel_fd >= 0 && poll(&p, 1, 0) > 0) throw;
      }
    }
  }
  return detail::Worker::start(opt_, cancel_fd);
}

int WorkerPool::live_workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

int WorkerPool::idle_workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int(idle_.size());
}

void WorkerPool::prestart(size_t n) {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    join_finished_locked(done);
    if (cancel_read_ < 0) return;
    int target = int(std::min<size_t>(n, size_t(opt_.max_workers)));
    for (; live_ < target; ++live_, ++starting_) {
      int64_t serial = next_starter_++;
      try {
        starters_.emplace(serial, std::thread([this, serial] { start_in_background(serial); }));
      } catch (const std::system_error&) {  // no thread to spare: requests start workers themselves
        break;
      }
    }
  }
  for (auto& t : done) t.join();  // finished already: returns at once
}

// Moves the threads of finished prestarts out of starters_ (to be joined outside mu_).
void WorkerPool::join_finished_locked(std::vector<std::thread>& out) {
  for (int64_t serial : finished_) {
    auto it = starters_.find(serial);
    if (it == starters_.end()) continue;
    out.push_back(std::move(it->second));
    starters_.erase(it);
  }
  finished_.clear();
}

void WorkerPool::start_in_background(int64_t serial) {
  std::unique_ptr<detail::Worker> w;
  std::exception_ptr failure;
  try {
    w = new_worker(cancel_read_);
  } catch (...) {  // dropped; requests that were waiting for it get this reason
    failure = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  --starting_;
  if (w) {
    last_ready_ = w->ready();
    idle_.push_back(std::move(w));
  } else {
    --live_;
    prestart_error_ = failure;
    ++prestart_failures_;
  }
  finished_.push_back(serial);
  freed_.notify_all();
}

json WorkerPool::ready() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!last_ready_.is_null()) return last_ready_;
  }
  if (opt_.fork_server) {
    std::lock_guard<std::mutex> slock(server_mu_);
    if (ensure_server_locked()) {  // throws when it cannot start
      std::lock_guard<std::mutex> lock(mu_);
      return last_ready_;
    }
  }
  release(acquire(), true);
  std::lock_guard<std::mutex> lock(mu_);
  return last_ready_;
}

std::unique_ptr<detail::Worker> WorkerPool::acquire() {
  {
    std::vector<std::unique_ptr<detail::Worker>> dead;  // destroyed (reaped) after mu_ is released
    std::unique_lock<std::mutex> lock(mu_);
    // Start a worker only when there is room and more requests wait than prestarts are under
    // way; otherwise wait for one of those (or for a busy worker) to become idle.
    const int64_t failures = prestart_failures_;
    ++waiting_;
    freed_.wait(lock, [&] { return !idle_.empty() || (live_ < opt_.max_workers && waiting_ > starting_); });
    --waiting_;
    while (!idle_.empty()) {
      auto w = std::move(idle_.back());
      idle_.pop_back();
      if (w->alive()) return w;
      --live_;  // exited while idle (e.g. killed from outside): replace it
      dead.push_back(std::move(w));
      if (opt_.log) opt_.log("compile worker exited while idle; starting another");
    }
    // A prestart this request may have waited for failed: its reason is this request's, rather
    // than starting (and waiting for) yet another worker that would fail the same way.
    if (prestart_failures_ != failures && prestart_error_) std::rethrow_exception(prestart_error_);
    ++live_;
  }
  try {
    auto w = new_worker(-1);
    std::lock_guard<std::mutex> lock(mu_);
    last_ready_ = w->ready();
    return w;
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    --live_;
    freed_.notify_all();
    throw;
  }
}

void WorkerPool::release(std::unique_ptr<detail::Worker> w, bool healthy) {
  if (!healthy) w->kill_and_reap();
  std::lock_guard<std::mutex> lock(mu_);
  if (healthy) idle_.push_back(std::move(w));
  else --live_;
  freed_.notify_all();
}

json WorkerPool::request(json req, double timeout_s) {
  auto w = acquire();
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
  }
  req["id"] = id;
  try {
    const double cpu0 = process_cpu_seconds(w->pid());
    json r = w->exchange(req, id, timeout_s);
    // The CPU time the worker spent on this request (its compilers' child processes included),
    // unless the worker reports its own.
    const double cpu1 = process_cpu_seconds(w->pid());
    if (r.is_object() && !r.contains("cpu_s") && cpu0 >= 0 && cpu1 >= cpu0) r["cpu_s"] = cpu1 - cpu0;
    release(std::move(w), true);
    return r;
  } catch (...) {
    release(std::move(w), false);
    throw;
  }
}

}  // namespace gemmtune
