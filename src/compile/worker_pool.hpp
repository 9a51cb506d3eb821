// A pool of long-lived compile worker processes (`python -m gemmtune.worker`, protocol in
// docs/compile-worker.md): one JSON request per line on the worker's stdin, one JSON response
// per line on its stdout, the first stdout line being the ready line.
//
//   WorkerPool pool(WorkerPoolOptions::for_python(compile_options));
//   nlohmann::json ready = pool.ready();           // starts a worker if none has started yet
//   nlohmann::json r = pool.request({{"op", "ping"}}, 60.0);
//
// Workers start on demand, up to max_workers at once; request() is thread-safe and runs up to
// max_workers requests in parallel (others wait for a free worker). prestart(n) starts workers
// ahead of need on background threads (a request then waits for one of those rather than
// starting yet another). A worker that crashes,
// exceeds the request's timeout (it is killed), or answers anything but a JSON object with the
// request's id costs only that request: request() throws Error with the reason and the worker
// is reaped; the next request gets a fresh one. Workers are spawned with posix_spawn; every
// descriptor is close-on-exec, the request pipe is a socket written with MSG_NOSIGNAL (a dead
// worker never raises SIGPIPE here), and every exited worker is waited for (no zombies).
//
// Fork server (options.fork_server): the pool first starts one worker as a fork server
// ("zygote", with $GEMMTUNE_WORKER_WARMUP=1: after its ready line it imports what Triton would
// import at the first compile), which compiles nothing itself. Every compile worker is then forked from it ({"op":
// "fork"} with the new worker's three descriptors passed over its stdin socket): it inherits the
// imported, warmed-up compiler, so it is ready in milliseconds instead of paying Python start,
// imports and Triton's lazy set-up. A forked worker is the server's child, not ours: the server
// reaps it ({"op": "reap"}: waits, kills if needed, reports the wait status), and it dies with
// the server (PR_SET_PDEATHSIG). Failures cost the same as before (only the request). When the
// server cannot fork (it died, hung, or refused), the pool drops it and spawns workers as
// without it; when it cannot start at all, that start's error is the caller's.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gemmtune/engine_options.hpp"

namespace gemmtune {

struct WorkerPoolOptions {
  // argv of one worker; argv[0] is looked up in PATH when it has no '/'.
  std::vector<std::string> command;
  // Added to (or replacing in) the inherited environment.
  std::map<std::string, std::string> env;
  int max_workers = 1;
  double start_timeout_s = 120;  // until the ready line (importing triton can take seconds)
  // Fork workers from one fork-server worker (see above); the command must be gemmtune.worker.
  bool fork_server = false;
  std::function<void(const std::string&)> log;  // may be empty

  // `<o.python> -m gemmtune.worker` with PYTHONPATH=<o.python_dir> (before an inherited
  // PYTHONPATH), max_workers o.workers; `o` resolved (core/settings.hpp).
  static WorkerPoolOptions for_python(const CompileOptions& o);
};

namespace detail {
class Worker;
struct ReapResult {
  bool ok = false;      // false: the server could not tell (gone); the worker then died with it
  std::string status;   // "exited with status 0", "died (signal 9)"
  bool killed = false;  // the server killed it (it had not exited within the grace)
};
}  // namespace detail

class WorkerPool {
 public:
  explicit WorkerPool(WorkerPoolOptions options);
  // Cancels workers still starting for prestart() (killed, joined), then closes idle workers'
  // stdin, waits briefly, then kills them.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The ready line of the most recently started worker (with a fork server: the server's,
  // starting the server if none has started yet); starts one if none has ever started.
  // Throws Error when a worker cannot start (its reason, with the tail of its stderr).
  nlohmann::json ready();

  // Sends `request` (its "id" is replaced by a fresh one) and returns the response, whose "id"
  // matches. Throws Error when no worker can be started or the worker fails this request.
  nlohmann::json request(nlohmann::json request, double timeout_s);

  // Returns at once; starts workers on background threads until min(n, max_workers) are live
  // (started or starting), and parks them idle for the next requests. A worker that fails to
  // start is dropped quietly (the next request that starts one reports why). Thread-safe.
  void prestart(size_t n);

  const WorkerPoolOptions& options() const { return opt_; }
  int live_workers() const;  // started or starting, not yet reaped (the fork server not counted)
  int idle_workers() const;  // started and waiting for a request
  // The fork server's pid while it serves; -1 before it starts, without one, or once dropped.
  pid_t fork_server_pid() const;

 private:
  std::unique_ptr<detail::Worker> acquire();
  void release(std::unique_ptr<detail::Worker> w, bool healthy);
  void start_in_background(int64_t serial);  // one prestart thread's body
  void join_finished_locked(std::vector<std::thread>& out);
  // A new worker: forked from the fork server when there is one that works, else spawned.
  std::unique_ptr<detail::Worker> new_worker(int cancel_fd);
  // Under server_mu_: starts the fork server when none has started; false when it is dropped.
  bool ensure_server_locked();
  void drop_server_locked(const std::string& why);
  pid_t server_fork(const int fds[3], int cancel_fd);             // throws Error
  detail::ReapResult server_reap(pid_t pid, double grace_s);      // never throws

  WorkerPoolOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<detail::Worker>> idle_;
  int live_ = 0;       // idle + busy + starting
  int starting_ = 0;   // of live_: being started by prestart threads
  int waiting_ = 0;    // in acquire(), waiting for a worker
  int64_t prestart_failures_ = 0;     // prestarted workers that did not start
  std::exception_ptr prestart_error_;  // the latest one's reason
  int64_t next_id_ = 1;
  nlohmann::json last_ready_;
  // prestart threads by serial, and those that have finished (to join); a pipe whose write end
  // the destructor closes to cancel workers still starting.
  std::map<int64_t, std::thread> starters_;
  std::vector<int64_t> finished_;
  int64_t next_starter_ = 0;
  int cancel_read_ = -1, cancel_write_ = -1;
  // The fork server: one request at a time under server_mu_ (taken before mu_, never inside it).
  mutable std::mutex server_mu_;
  std::unique_ptr<detail::Worker> server_;
  bool server_dropped_ = false;  // it failed: workers are spawned from then on
  int64_t server_next_id_ = 1;
};

}  // namespace gemmtune
