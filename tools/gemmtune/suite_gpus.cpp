// `gemmtune suite --gpus`: one suite worker process per GPU (see suite_gpus.hpp).
#include "suite_gpus.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <set>

#include "core/text.hpp"
#include "gemmtune/error.hpp"

extern char** environ;

namespace gemmtune::cli {

namespace {

// "killed by signal 9 (SIGKILL)" / "exited with status 3".
std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (status " + std::to_string(status) + ")";
}

// $CUDA_VISIBLE_DEVICES split at commas; empty when unset.
std::vector<std::string> visible_devices() {
  std::vector<std::string> out;
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v || !*v) return out;
  std::string item;
  for (const char* c = v;; ++c) {
    if (*c == ',' || *c == '\0') {
      out.push_back(item);
      item.clear();
      if (*c == '\0') break;
    } else {
      item += *c;
    }
  }
  return out;
}

// One worker process: its pid, the write end of its stdin, the read end of its stdout.
struct Worker {
  std::string gpu;  // as the user named it (an index of this process's devices)
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string buffer;   // stdout bytes not yet forming a line
  long current = -1;    // the problem it is on, -1: idle
  std::vector<nlohmann::json> rows;  // rows of `current` so far
  bool alive = false;

  void close_in() {
    if (in >= 0) ::close(in), in = -1;
  }
  void close_all() {
    close_in();
    if (out >= 0) ::close(out), out = -1;
  }
};

void start(Worker& w, const std::vector<std::string>& argv, const std::string& device) {
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) GT_THROW(std::string("suite --gpus: pipe: ") + std::strerror(errno));
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    ::close(to_child[0]), ::close(to_child[1]);
    GT_THROW(std::string("suite --gpus: pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_strings.emplace_back(*e);
  env_strings.push_back("CUDA_VISIBLE_DEVICES=" + device);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (err != 0) {
    ::close(to_child[1]), ::close(from_child[0]);
    GT_THROW("suite --gpus: cannot start the worker " + argv[0] + " for GPU " + w.gpu + ": " + std::strerror(err));
  }
  w.pid = pid, w.in = to_child[1], w.out = from_child[0], w.alive = true;
}

}  // namespace

std::vector<std::string> parse_gpus(const std::string& text, int count) {
  const std::string t = text;
  std::vector<std::string> out;
  if (t == "all") {
    GT_CHECK_INVALID(count > 0, "--gpus all: no CUDA device is visible to this process");
    for (int i = 0; i < count; ++i) out.push_back(std::to_string(i));
    return out;
  }
  std::set<long> seen;
  size_t pos = 0;
  while (pos <= t.size()) {
    const size_t comma = t.find(',', pos);
    const std::string item = t.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    errno = 0;
    const long v = item.empty() ? -1 : std::strtol(item.c_str(), &end, 10);
    GT_CHECK_INVALID(!item.empty() && errno == 0 && end && *end == '\0' && v >= 0 && v < 4096,
                     "--gpus: '" + printable(item) + "' is not a device index (expected all, or indices such as 0,1,2)");
    GT_CHECK_INVALID(count < 0 || v < count, "--gpus: device " + item + " does not exist (" + std::to_string(count) +
                                                 " visible to this process)");
    GT_CHECK_INVALID(seen.insert(v).second, "--gpus: device " + item + " is named twice");
    out.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void run_suite_on_gpus(const std::vector<std::string>& argv, const std::vector<std::string>& gpus, size_t count,
                       const GpuSuiteSink& sink) {
  // A dead worker's stdin must not end this process (EPIPE instead).
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  struct Restore {
    struct sigaction old;
    ~Restore() { ::sigaction(SIGPIPE, &old, nullptr); }
  } restore{old};

  const std::vector<std::string> visible = visible_devices();
  std::vector<Worker> workers(gpus.size());
  std::string start_errors;
  for (size_t w = 0; w < gpus.size(); ++w) {
    workers[w].gpu = gpus[w];
    // Device index i of this process is entry i of its $CUDA_VISIBLE_DEVICES, when set.
    const size_t idx = std::stoul(gpus[w]);
    const std::string device = visible.empty() ? gpus[w] : idx < visible.size() ? visible[idx] : gpus[w];
    try {
      start(workers[w], argv, device);
    } catch (const Error& e) {
      start_errors += (start_errors.empty() ? "" : "; ") + e.message();
    }
  }
  size_t alive = 0;
  for (auto& w : workers) alive += w.alive;
  GT_CHECK(alive > 0, start_errors);
  if (!start_errors.empty() && sink.log) sink.log("", start_errors);

  std::deque<size_t> queue;
  for (size_t i = 0; i < count; ++i) queue.push_back(i);
  std::map<size_t, int> attempts;
  std::map<size_t, std::string> deaths;  // problem -> what happened to the workers that took it
  size_t settled = 0;

  // An idle worker gets the next problem. Idle workers keep their stdin open until the end: a
  // problem of a worker that dies later goes back to the queue for them.
  auto give = [&](Worker& w) {
    if (!w.alive || w.in < 0 || w.current >= 0 || queue.empty()) return;
    const size_t i = queue.front();
    queue.pop_front();
    const std::string line = std::to_string(i) + "\n";
    if (::write(w.in, line.data(), line.size()) == ssize_t(line.size())) {
      w.current = long(i);
      ++attempts[i];
      return;
    }
    queue.push_front(i);  // the worker is gone: its EOF comes on its stdout
    w.close_in();
  };
  auto settle_lost = [&](size_t i, const std::string& why) {
    ++settled;
    sink.lost(i, why);
  };
  auto on_line = [&](Worker& w, const std::string& text) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const std::exception&) {
      if (sink.log) sink.log(w.gpu, text);  // a stray line: shown, not trusted
      return;
    }
    if (!j.is_object()) return;
    if (j.contains("log") && j["log"].is_string()) {
      if (sink.log) sink.log(w.gpu, j["log"].get<std::string>());
      return;
    }
    if (!j.contains("i") || !j["i"].is_number_unsigned() || long(j["i"].get<size_t>()) != w.current) return;
    const size_t i = j["i"].get<size_t>();
    if (j.contains("record")) {
      w.rows.push_back(std::move(j));
    } else if (j.contains("done") || j.contains("error")) {
      const bool error = j.contains("error");
      const nlohmann::json& s = error ? j["error"] : j["done"];
      sink.finished(i, w.gpu, w.rows, s.is_string() ? s.get<std::string>() : s.dump(), error);
      ++settled;
      w.rows.clear();
      w.current = -1;
      give(w);
    }
  };
  auto on_exit = [&](Worker& w) {
    int status = 0;
    ::waitpid(w.pid, &status, 0);
    w.alive = false;
    w.close_all();
    --alive;
    const std::string what = "its tuning process on GPU " + w.gpu + " " + describe_status(status);
    if (w.current >= 0) {
      const size_t i = size_t(w.current);
      w.current = -1;
      w.rows.clear();
      deaths[i] += (deaths[i].empty() ? "" : "; ") + what;
      if (attempts[i] < kAttempts && alive > 0) {
        queue.push_front(i);
        if (sink.log) sink.log(w.gpu, "problem " + std::to_string(i) + ": " + what + "; another GPU takes it");
      } else {
        settle_lost(i, deaths[i]);
      }
    } else if (settled < count) {
      if (sink.log) sink.log(w.gpu, what);
    }
    for (auto& o : workers) give(o);
  };

  for (auto& w : workers) give(w);
  while (settled < count && alive > 0) {
    std::vector<pollfd> fds;
    std::vector<Worker*> who;
    for (auto& w : workers)
      if (w.alive) fds.push_back({w.out, POLLIN, 0}), who.push_back(&w);
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      GT_THROW(std::string("suite --gpus: poll: ") + std::strerror(errno));
    }
    for (size_t f = 0; f < fds.size(); ++f) {
      if (!(fds[f].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Worker& w = *who[f];
      char buf[65536];
      const ssize_t n = ::read(w.out, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        on_exit(w);
        continue;
      }
      w.buffer.append(buf, size_t(n));
      for (size_t nl; (nl = w.buffer.find('\n')) != std::string::npos;) {
        const std::string line = w.buffer.substr(0, nl);
        w.buffer.erase(0, nl + 1);
        on_line(w, line);
      }
    }
  }
  // Whatever is left had no worker to run it.
  while (!queue.empty()) {
    const size_t i = queue.front();
    queue.pop_front();
    settle_lost(i, "no tuning process was left to run it" + (deaths[i].empty() ? "" : " (" + deaths[i] + ")"));
  }
  for (auto& w : workers) w.close_in();  // each ends at EOF
  for (auto& w : workers)
    if (w.alive) {
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      w.close_all();
    }
}

SuiteWorkerChannel::SuiteWorkerChannel() {
  fd_ = ::dup(1);
  GT_CHECK(fd_ >= 0, std::string("suite worker: dup: ") + std::strerror(errno));
  ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  std::cout.flush();
  ::dup2(2, 1);
}

SuiteWorkerChannel::~SuiteWorkerChannel() {
  if (fd_ >= 0) ::close(fd_);
}

bool SuiteWorkerChannel::next(size_t count, size_t& i) {
  std::string line;
  if (!std::getline(std::cin, line)) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(line.c_str(), &end, 10);
  GT_CHECK_INVALID(!line.empty() && errno == 0 && end && *end == '\0' && v < count,
                   "suite worker: '" + printable(line) + "' is not a problem index below " + std::to_string(count));
  i = size_t(v);
  return true;
}

void SuiteWorkerChannel::send(const nlohmann::json& line) {
  const std::string text = line.dump() + "\n";
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    GT_CHECK(n > 0, std::string("suite worker: the suite process is gone (") + std::strerror(errno) + ")");
    off += size_t(n);
  }
}

}  // namespace gemmtune::cli
