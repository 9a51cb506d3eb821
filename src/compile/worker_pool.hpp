// A pool of long-lived compile worker processes (`python -m gemmtune.worker`, protocol in
// docs/compile-worker.md): one JSON request per line on the worker's stdin, one JSON response
// per line on its stdout, the first stdout line being the ready line.
//
//   WorkerPool pool(WorkerPoolOptions::defaults());
//   nlohmann::json ready = pool.ready();           // starts a worker if none has started yet
//   nlohmann::json r = pool.request({{"op", "ping"}}, 60.0);
//
// Workers start on demand, up to max_workers at once; request() is thread-safe and runs up to
// max_workers requests in parallel (others wait for a free worker). A worker that crashes,
// exceeds the request's timeout (it is killed), or answers anything but a JSON object with the
// request's id costs only that request: request() throws Error with the reason and the worker
// is reaped; the next request gets a fresh one. Workers are spawned with posix_spawn; every
// descriptor is close-on-exec, the request pipe is a socket written with MSG_NOSIGNAL (a dead
// worker never raises SIGPIPE here), and every exited worker is waited for (no zombies).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gemmtune {

struct WorkerPoolOptions {
  // argv of one worker; argv[0] is looked up in PATH when it has no '/'.
  std::vector<std::string> command;
  // Added to (or replacing in) the inherited environment.
  std::map<std::string, std::string> env;
  int max_workers = 1;
  double start_timeout_s = 120;  // until the ready line (importing triton can take seconds)
  std::function<void(const std::string&)> log;  // may be empty

  // `<python> -m gemmtune.worker` with PYTHONPATH=<python dir>, max_workers from
  // $GEMMTUNE_COMPILE_WORKERS, else the hardware's cores (at most 32).
  static WorkerPoolOptions defaults();
};

// The Python package directory: $GEMMTUNE_PYTHON_DIR, else the build's <repo>/python.
std::filesystem::path python_dir();
// $GEMMTUNE_PYTHON, else <repo>/.venv/bin/python when it exists, else "python3".
std::string python_executable();

namespace detail {
class Worker;
}

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();  // closes idle workers' stdin, waits briefly, then kills them
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The ready line of the most recently started worker; starts one if none has ever started.
  // Throws Error when a worker cannot start (its reason, with the tail of its stderr).
  nlohmann::json ready();

  // Sends `request` (its "id" is replaced by a fresh one) and returns the response, whose "id"
  // matches. Throws Error when no worker can be started or the worker fails this request.
  nlohmann::json request(nlohmann::json request, double timeout_s);

  const WorkerPoolOptions& options() const { return opt_; }
  int live_workers() const;  // started and not yet reaped

 private:
  std::unique_ptr<detail::Worker> acquire();
  void release(std::unique_ptr<detail::Worker> w, bool healthy);

  WorkerPoolOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<detail::Worker>> idle_;
  int live_ = 0;
  int64_t next_id_ = 1;
  nlohmann::json last_ready_;
};

}  // namespace gemmtune
