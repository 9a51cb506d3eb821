// The compile worker pool against fake workers (small Python scripts speaking the protocol of
// docs/compile-worker.md): round trips in parallel, and every way a worker can fail costing
// only its request: crash, exit, hang past the timeout, garbage, wrong id, closed stdout,
// failure to start. Also: no zombies, no leaked descriptors, SIGPIPE-safe, defaults; prestart()
// (workers started ahead of need in the background); the fork server (the real gemmtune.worker
// without Triton, plus test ops): workers forked from it, the same failures through it, its
// death and a server that cannot fork (both: workers are spawned instead).
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <limits>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "compile/worker_pool.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFakeWorker = R"PY(
import json, os, sys, time
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if mode == "die_at_start":
    sys.stderr.write("fake: cannot import triton\n")
    sys.exit(3)
if mode == "silent":
    time.sleep(600)
if mode == "bad_ready":
    print("hello", flush=True)
    time.sleep(600)
print(json.dumps({"ready": True, "worker": 1, "python": "3", "versions": {"triton": "9.9.9"}}), flush=True)
if mode == "ready_then_exit":
    sys.exit(0)
for line in sys.stdin:
    req = json.loads(line)
    op = req.get("op")
    if op == "crash":
        sys.stderr.write("fake: crashing now\n")
        sys.stderr.flush()
        os.kill(os.getpid(), 9)
    if op == "exit":
        sys.exit(7)
    if op == "hang":
        time.sleep(600)
    if op == "garbage":
        print("this is not json", flush=True)
        continue
    if op == "wrong_id":
        print(json.dumps({"id": req["id"] + 1000, "ok": True}), flush=True)
        continue
    if op == "close_stdout":
        os.close(1)
        time.sleep(600)
    if op == "sleep":
        time.sleep(req["seconds"])
    if op == "spin":  # CPU here, then as much in a child process (the pool's cpu_s counts both)
        import subprocess
        burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < %f: pass\n" % req["seconds"]
        exec(burn)
        subprocess.run([sys.executable, "-c", burn], check=True)
    if op == "own_cpu":
        print(json.dumps({"id": req["id"], "ok": True, "cpu_s": 123.0}), flush=True)
        continue
    if op == "noisy":
        sys.stderr.write("x" * 300000 + "\n")
        sys.stderr.flush()
    print(json.dumps({"id": req["id"], "ok": True, "pid": os.getpid(), "echo": req.get("echo")}), flush=True)
)PY";

bool have_python3() { return std::system("python3 -c '' >/dev/null 2>&1") == 0; }

int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

// Children of this process (any state), and how many of them are zombies.
std::pair<int, int> children() {
  int all = 0, zombies = 0;
  std::string me = std::to_string(getpid());
  for (auto& e : fs::directory_iterator("/proc")) {
    std::ifstream stat(e.path() / "stat");
    std::string text;
    if (!stat || !std::getline(stat, text)) continue;
    size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid != me) continue;
    ++all;
    zombies += state == "Z";
  }
  return {all, zombies};
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_python3()) GTEST_SKIP() << "python3 not found";
    char tmpl[] = "/tmp/gemmtune-pool-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ / "fake_worker.py") << kFakeWorker;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  WorkerPoolOptions options(const std::string& mode = "ok", int workers = 2) const {
    WorkerPoolOptions o;
    o.command = {"python3", (dir_ / "fake_worker.py").string(), mode};
    o.max_workers = workers;
    o.start_timeout_s = 30;
    return o;
  }
  static std::string failure(WorkerPool& pool, const json& req, double timeout_s = 30) {
    try {
      pool.request(req, timeout_s);
    } catch (const Error& e) {
      return e.message();
    }
    return "(no error)";
  }
  fs::path dir_;
};

TEST_F(WorkerPoolTest, RoundTripAndReadyLine) {
  WorkerPool pool(options());
  json ready = pool.ready();
  EXPECT_EQ(ready["versions"]["triton"], "9.9.9");
  json r = pool.request({{"op", "ping"}, {"echo", "hello"}, {"id", 12345}}, 30);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_EQ(r["echo"], "hello");
  EXPECT_NE(r["id"], 12345);  // the pool assigns ids
  json r2 = pool.request({{"op", "ping"}}, 30);
  EXPECT_EQ(r2["pid"], r["pid"]);  // the same idle worker serves the next request
  EXPECT_EQ(pool.live_workers(), 1);
}

TEST_F(WorkerPoolTest, AnswersCarryTheWorkersCpuSeconds) {
  WorkerPool pool(options());
  json idle = pool.request({{"op", "sleep"}, {"seconds", 0.3}}, 30);
  ASSERT_TRUE(idle.contains("cpu_s")) << idle.dump();
  EXPECT_LT(idle["cpu_s"].get<double>(), 0.2);  // asleep: wall time is not CPU time
  json busy = pool.request({{"op", "spin"}, {"seconds", 0.3}}, 60);
  // 0.3 s in the worker and 0.3 s in its child (and the child's start); /proc counts 10 ms ticks.
  EXPECT_GE(busy["cpu_s"].get<double>(), 0.55) << busy.dump();
  json own = pool.request({{"op", "own_cpu"}}, 30);
  EXPECT_EQ(own["cpu_s"].get<double>(), 123.0);  // a worker's own figure is kept
}

TEST_F(WorkerPoolTest, ParallelRequestsUseUpToMaxWorkers) {
  WorkerPool pool(options("ok", 4));
  pool.ready();
  std::vector<std::thread> threads;
  std::vector<json> answers(8);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] { answers[i] = pool.request({{"op", "sleep"}, {"seconds", 0.6}, {"echo", i}}, 60); });
  for (auto& t : threads) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::set<int> pids;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(answers[i]["echo"], i);
    pids.insert(answers[i]["pid"].get<int>());
  }
  EXPECT_LE(pids.size(), 4u);
  EXPECT_GE(pids.size(), 2u);
  EXPECT_LE(pool.live_workers(), 4);
  EXPECT_LT(s, 8 * 0.6) << "requests did not run in parallel";
}

TEST_F(WorkerPoolTest, CrashCostsOnlyThatRequest) {
  WorkerPool pool(options());
  int first = pool.request({{"op", "ping"}}, 30)["pid"];
  std::string why = failure(pool, {{"op", "crash"}});
  EXPECT_NE(why.find("compile worker died (signal 9)"), std::string::npos) << why;
  EXPECT_NE(why.find("fake: crashing now"), std::string::npos) << why;  // the worker's stderr
  json r = pool.request({{"op", "ping"}}, 30);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_NE(r["pid"].get<int>(), first);
  EXPECT_EQ(pool.live_workers(), 1);
}

TEST_F(WorkerPoolTest, ExitStatusIsReported) {
  WorkerPool pool(options());
  std::string why = failure(pool, {{"op", "exit"}});
  EXPECT_NE(why.find("exited with status 7"), std::string::npos) << why;
}

TEST_F(WorkerPoolTest, HangIsKilledAfterTheTimeout) {
  WorkerPool pool(options());
  pool.ready();
  auto t0 = std::chrono::steady_clock::now();
  std::string why = failure(pool, {{"op", "hang"}}, 0.5);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(why.find("compile worker timed out after 0.5 s"), std::string::npos) << why;
  EXPECT_LT(s, 5.0);
  EXPECT_TRUE(pool.request({{"op", "ping"}}, 30)["ok"].get<bool>());
  EXPECT_EQ(pool.live_workers(), 1);
}

// Reliability audit D9: a timeout above ~9.2e9 s (1e10, 1e300, inf: "no timeout") overflowed the
// deadline into the past, and every request failed at once with "timed out". Clamped now.
TEST_F(WorkerPoolTest, HugeTimeoutsMeanNoTimeout) {
  WorkerPool pool(options());
  for (double t : {1e10, 1e300, std::numeric_limits<double>::infinity()}) {
    json r = pool.request({{"op", "sleep"}, {"seconds", 0.2}}, t);
    EXPECT_TRUE(r["ok"].get<bool>()) << t << ": " << r.dump();
  }
}

TEST_F(WorkerPoolTest, GarbageAndWrongIdCostOnlyThatRequest) {
  WorkerPool pool(options());
  std::string why = failure(pool, {{"op", "garbage"}});
  EXPECT_NE(why.find("not a JSON object: this is not json"), std::string::npos) << why;
  why = failure(pool, {{"op", "wrong_id"}});
  EXPECT_NE(why.find("answered id"), std::string::npos) << why;
  EXPECT_TRUE(pool.request({{"op", "ping"}}, 30)["ok"].get<bool>());
}

TEST_F(WorkerPoolTest, ClosedStdoutIsAFailure) {
  WorkerPool pool(options());
  std::string why = failure(pool, {{"op", "close_stdout"}});
  EXPECT_NE(why.find("closed its stdout"), std::string::npos) << why;
  EXPECT_TRUE(pool.request({{"op", "ping"}}, 30)["ok"].get<bool>());
}

TEST_F(WorkerPoolTest, LoudStderrDoesNotBlock) {
  WorkerPool pool(options());
  EXPECT_TRUE(pool.request({{"op", "noisy"}}, 30)["ok"].get<bool>());
}

TEST_F(WorkerPoolTest, WorkerKilledWhileIdleIsReplaced) {
  WorkerPool pool(options());
  int pid = pool.request({{"op", "ping"}}, 30)["pid"];
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  json r = pool.request({{"op", "ping"}}, 30);
  EXPECT_NE(r["pid"].get<int>(), pid);
}

TEST_F(WorkerPoolTest, DeadWorkerNeverRaisesSigpipe) {
  WorkerPool pool(options("ready_then_exit"));
  for (int i = 0; i < 3; ++i) {
    std::string why = failure(pool, {{"op", "ping"}, {"echo", std::string(1 << 20, 'x')}});
    EXPECT_TRUE(why.find("exited with status 0") != std::string::npos || why.find("died") != std::string::npos)
        << why;
  }
}

TEST_F(WorkerPoolTest, MissingPythonIsAClearError) {
  WorkerPoolOptions o = options();
  o.command = {"/nonexistent/python3", "-m", "gemmtune.worker"};
  WorkerPool pool(o);
  try {
    pool.ready();
    FAIL() << "started a missing python";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot start compile worker '/nonexistent/python3': No such file or directory"),
              std::string::npos)
        << e.message();
  }
  EXPECT_EQ(pool.live_workers(), 0);
  o.command = {"no-such-python-anywhere", "-m", "gemmtune.worker"};
  WorkerPool pool2(o);
  std::string why = failure(pool2, {{"op", "ping"}});
  EXPECT_NE(why.find("cannot start compile worker 'no-such-python-anywhere'"), std::string::npos) << why;
}

TEST_F(WorkerPoolTest, WorkerThatCannotStartSaysWhy) {
  WorkerPool dies(options("die_at_start"));
  std::string why = failure(dies, {{"op", "ping"}});
  EXPECT_NE(why.find("did not start: exited with status 3"), std::string::npos) << why;
  EXPECT_NE(why.find("fake: cannot import triton"), std::string::npos) << why;

  WorkerPool bad(options("bad_ready"));
  why = failure(bad, {{"op", "ping"}});
  EXPECT_NE(why.find("first line is not a ready line: hello"), std::string::npos) << why;

  WorkerPoolOptions o = options("silent");
  o.start_timeout_s = 0.5;
  WorkerPool silent(o);
  why = failure(silent, {{"op", "ping"}});
  EXPECT_NE(why.find("did not start: timed out after 0.5 s"), std::string::npos) << why;
  EXPECT_EQ(silent.live_workers(), 0);
}

TEST_F(WorkerPoolTest, NoZombiesNoLeakedDescriptors) {
  // Baselines: other tests may have left a process-wide compiler's workers running.
  int fds = open_fds();
  int kids = children().first;
  {
    WorkerPool pool(options("ok", 3));
    failure(pool, {{"op", "crash"}});
    failure(pool, {{"op", "hang"}}, 0.3);
    failure(pool, {{"op", "garbage"}});
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) threads.emplace_back([&] { pool.request({{"op", "sleep"}, {"seconds", 0.2}}, 30); });
    for (auto& t : threads) t.join();
    EXPECT_EQ(children().second, 0) << "zombie workers";
  }
  EXPECT_EQ(children().first, kids) << "workers left running after the pool";
  EXPECT_EQ(open_fds(), fds) << "descriptors leaked";
}

template <class F>
bool eventually(F cond, double seconds = 20);
double seconds_since(std::chrono::steady_clock::time_point t0);

// ---- the fork server ----------------------------------------------------------------------
// The real worker (python/gemmtune/worker.py: fork, reap) with no backend imported, and ops to
// misbehave with: a forked child runs the same handle().
constexpr const char* kForkWorker = R"PY(
import os, sys, time
from gemmtune import worker as w
plain = w.Worker.handle
def handle(self, rid, req):
    op = req.get("op")
    if op == "crash":
        sys.stderr.write("fake: crashing now\n"); sys.stderr.flush()
        os.kill(os.getpid(), 9)
    if op == "exit7":
        sys.stderr.flush(); os._exit(7)
    if op == "hang":
        time.sleep(600)
    if op == "close_stdout":
        self._proto.close(); time.sleep(600)
    if op == "sleep":
        time.sleep(req["seconds"])
    if op in ("whoami", "sleep"):
        return {"id": rid, "ok": True, "pid": os.getpid(), "ppid": os.getppid(), "forked": self.forked}
    return plain(self, rid, req)
w.Worker.handle = handle
sys.exit(w.main())
)PY";

bool process_exists(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!stat || !std::getline(stat, text)) return false;
  size_t close = text.rfind(')');
  return close != std::string::npos && text.substr(close + 2, 1) != "Z";
}

class ForkServerTest : public WorkerPoolTest {
 protected:
  void SetUp() override {
    WorkerPoolTest::SetUp();
    if (IsSkipped()) return;
    std::ofstream(dir_ / "fork_worker.py") << kForkWorker;
  }
  WorkerPoolOptions fork_options(int workers = 3) {
    WorkerPoolOptions o;
    o.command = {"python3", (dir_ / "fork_worker.py").string()};
    o.env = {{"PYTHONPATH", resolve(CompileOptions{}).python_dir.string()}, {"GEMMTUNE_WORKER_BACKENDS", "none"}};
    o.max_workers = workers;
    o.start_timeout_s = 30;
    o.fork_server = true;
    o.log = [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_ += m + "\n";
    };
    return o;
  }
  std::string log_text() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(ForkServerTest, WorkersAreForkedFromOneServer) {
  int kids = children().first;
  WorkerPool pool(fork_options(3));
  json ready = pool.ready();  // the server's
  EXPECT_EQ(ready["worker"], 1);
  int server = pool.fork_server_pid();
  ASSERT_GT(server, 0);
  EXPECT_EQ(ready["pid"], server);
  EXPECT_EQ(pool.live_workers(), 0);  // the server compiles nothing and is not counted
  EXPECT_EQ(children().first, kids + 1);

  auto t0 = std::chrono::steady_clock::now();
  pool.prestart(3);
  ASSERT_TRUE(eventually([&] { return pool.idle_workers() == 3; }));
  double forked_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::thread> threads;
  std::vector<json> answers(3);
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] { answers[i] = pool.request({{"op", "sleep"}, {"seconds", 0.3}}, 30); });
  for (auto& t : threads) t.join();
  std::set<int> pids;
  for (auto& a : answers) {
    EXPECT_EQ(a["ppid"], server) << a.dump();  // the server's children, not ours
    EXPECT_TRUE(a["forked"].get<bool>());
    pids.insert(a["pid"].get<int>());
  }
  EXPECT_EQ(pids.size(), 3u);
  EXPECT_FALSE(pids.count(server));
  EXPECT_EQ(children().first, kids + 1);
  EXPECT_EQ(pool.live_workers(), 3);
  EXPECT_EQ(pool.fork_server_pid(), server);
  std::printf("[ fork ] 3 workers forked and ready %.3f s after prestart\n", forked_s);
}

TEST_F(ForkServerTest, FailuresOfForkedWorkersCostOnlyTheirRequest) {
  WorkerPool pool(fork_options(2));
  pool.ready();
  int server = pool.fork_server_pid();
  int first = pool.request({{"op", "whoami"}}, 30)["pid"];

  std::string why = failure(pool, {{"op", "crash"}});
  EXPECT_NE(why.find("compile worker died (signal 9)"), std::string::npos) << why;
  EXPECT_NE(why.find("fake: crashing now"), std::string::npos) << why;  // the worker's stderr
  EXPECT_FALSE(process_exists(first));

  why = failure(pool, {{"op", "exit7"}});
  EXPECT_NE(why.find("compile worker exited with status 7"), std::string::npos) << why;

  json r = pool.request({{"op", "whoami"}}, 30);
  int hung = r["pid"];
  auto t0 = std::chrono::steady_clock::now();
  why = failure(pool, {{"op", "hang"}}, 0.5);
  EXPECT_NE(why.find("compile worker timed out after 0.5 s"), std::string::npos) << why;
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_FALSE(process_exists(hung)) << "the hung worker was not killed";

  why = failure(pool, {{"op", "close_stdout"}});
  EXPECT_NE(why.find("closed its stdout (killed)"), std::string::npos) << why;

  why = failure(pool, {{"op", "frobnicate"}});  // the real worker's answer: not a failure of the pool
  EXPECT_EQ(why, "(no error)");

  r = pool.request({{"op", "whoami"}}, 30);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_EQ(r["ppid"], server);
  EXPECT_EQ(pool.fork_server_pid(), server);  // the server survived all of it
  EXPECT_EQ(pool.live_workers(), 1);
  EXPECT_EQ(log_text().find("dropped"), std::string::npos) << log_text();
}

TEST_F(ForkServerTest, ForkedWorkerKilledWhileIdleIsReplaced) {
  WorkerPool pool(fork_options(2));
  int pid = pool.request({{"op", "whoami"}}, 30)["pid"];
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  json r = pool.request({{"op", "whoami"}}, 30);
  EXPECT_NE(r["pid"].get<int>(), pid);
  EXPECT_EQ(r["ppid"], pool.fork_server_pid());
  EXPECT_EQ(pool.live_workers(), 1);
}

TEST_F(ForkServerTest, ServerDeathFallsBackToSpawning) {
  int kids = children().first;
  WorkerPool pool(fork_options(2));
  int server = pool.ready()["pid"];
  int child = pool.request({{"op", "whoami"}}, 30)["pid"];
  ASSERT_EQ(kill(server, SIGKILL), 0);
  // Its idle child dies with it (PR_SET_PDEATHSIG); the next request spawns a worker.
  ASSERT_TRUE(eventually([&] { return !process_exists(child); }, 10)) << "a forked worker outlived its server";
  json r = pool.request({{"op", "whoami"}}, 30);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_FALSE(r["forked"].get<bool>());
  EXPECT_EQ(r["ppid"], getpid());
  EXPECT_EQ(pool.fork_server_pid(), -1);
  EXPECT_NE(log_text().find("fork server dropped"), std::string::npos) << log_text();
  EXPECT_EQ(children().first, kids + 1);  // the spawned worker; the server was reaped
  EXPECT_EQ(children().second, 0);
}

TEST_F(ForkServerTest, ServerThatCannotForkFallsBackToSpawning) {
  // The fake worker knows no fork op (it answers without "op": "fork"): dropped, then spawned.
  WorkerPoolOptions o = options("ok", 2);
  o.fork_server = true;
  std::string log;
  std::mutex mu;
  o.log = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    log += m + "\n";
  };
  int kids = children().first;
  WorkerPool pool(o);
  EXPECT_EQ(pool.ready()["versions"]["triton"], "9.9.9");
  json r = pool.request({{"op", "ping"}}, 30);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_EQ(pool.fork_server_pid(), -1);
  EXPECT_NE(log.find("refused to fork"), std::string::npos) << log;
  EXPECT_EQ(pool.live_workers(), 1);
  EXPECT_EQ(children().first, kids + 1);

  // A server that cannot start: its reason is the caller's, as without one.
  WorkerPoolOptions bad = options("die_at_start");
  bad.fork_server = true;
  WorkerPool dies(bad);
  std::string why = failure(dies, {{"op", "ping"}});
  EXPECT_NE(why.find("did not start: exited with status 3"), std::string::npos) << why;
  EXPECT_NE(why.find("fake: cannot import triton"), std::string::npos) << why;
}

TEST_F(ForkServerTest, NoZombiesNoLeakedDescriptorsNoOrphans) {
  int fds = open_fds();
  int kids = children().first;
  std::vector<int> forked;
  int server = -1;
  {
    WorkerPool pool(fork_options(3));
    failure(pool, {{"op", "crash"}});
    failure(pool, {{"op", "hang"}}, 0.3);
    std::vector<std::thread> threads;
    std::mutex mu;
    for (int i = 0; i < 3; ++i)
      threads.emplace_back([&] {
        json r = pool.request({{"op", "sleep"}, {"seconds", 0.2}}, 30);
        std::lock_guard<std::mutex> lock(mu);
        forked.push_back(r["pid"]);
      });
    for (auto& t : threads) t.join();
    server = pool.fork_server_pid();
    EXPECT_GT(server, 0);
    EXPECT_EQ(children().second, 0) << "zombie workers";
  }
  EXPECT_EQ(children().first, kids) << "the server left running after the pool";
  EXPECT_FALSE(process_exists(server));
  for (int pid : forked) EXPECT_FALSE(process_exists(pid)) << "forked worker " << pid << " left running";
  EXPECT_EQ(open_fds(), fds) << "descriptors leaked";
}

TEST_F(ForkServerTest, DestructionDuringPrestartIsClean) {
  int fds = open_fds();
  int kids = children().first;
  auto t0 = std::chrono::steady_clock::now();
  {
    WorkerPool pool(fork_options(3));
    pool.prestart(3);
  }
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(children().first, kids);
  EXPECT_EQ(open_fds(), fds);
}

// Polls until cond() or `seconds` pass; returns cond().
template <class F>
bool eventually(F cond, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!cond() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return cond();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(WorkerPoolTest, PrestartParksIdleWorkersWithoutARequest) {
  int kids = children().first;
  WorkerPool pool(options("ok", 4));
  auto t0 = std::chrono::steady_clock::now();
  pool.prestart(3);
  EXPECT_LT(seconds_since(t0), 0.5) << "prestart blocked";
  EXPECT_EQ(pool.live_workers(), 3);  // counted at once, while starting
  ASSERT_TRUE(eventually([&] { return pool.idle_workers() == 3; })) << pool.idle_workers();
  EXPECT_EQ(children().first, kids + 3);
  EXPECT_EQ(pool.ready()["versions"]["triton"], "9.9.9");  // a prestarted worker's ready line

  // Three parallel requests are served by the three prestarted workers: none is started.
  std::vector<std::thread> threads;
  std::vector<json> answers(3);
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] { answers[i] = pool.request({{"op", "sleep"}, {"seconds", 0.3}}, 30); });
  for (auto& t : threads) t.join();
  std::set<int> pids;
  for (auto& a : answers) pids.insert(a["pid"].get<int>());
  EXPECT_EQ(pids.size(), 3u);
  EXPECT_EQ(pool.live_workers(), 3);
  EXPECT_EQ(children().first, kids + 3);
  pool.prestart(3);  // already there: nothing more
  EXPECT_EQ(pool.live_workers(), 3);
}

TEST_F(WorkerPoolTest, PrestartIsCappedByThePoolSize) {
  int kids = children().first;
  WorkerPool pool(options("ok", 2));
  pool.prestart(10);
  EXPECT_EQ(pool.live_workers(), 2);
  ASSERT_TRUE(eventually([&] { return pool.idle_workers() == 2; }));
  pool.prestart(100);
  pool.prestart(0);
  EXPECT_EQ(pool.live_workers(), 2);
  EXPECT_EQ(children().first, kids + 2);
  EXPECT_TRUE(pool.request({{"op", "ping"}}, 30)["ok"].get<bool>());
  EXPECT_EQ(pool.live_workers(), 2);
}

TEST_F(WorkerPoolTest, RequestWaitsForAWorkerBeingPrestarted) {
  int kids = children().first;
  WorkerPool pool(options("ok", 4));
  pool.prestart(2);
  // Both workers are still starting: the requests take them rather than starting their own.
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&] { pool.request({{"op", "ping"}}, 30); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.live_workers(), 2);
  EXPECT_EQ(children().first, kids + 2);
  // A third concurrent request beyond the prestarted ones may start one.
  threads.clear();
  for (int i = 0; i < 3; ++i) threads.emplace_back([&] { pool.request({{"op", "sleep"}, {"seconds", 0.3}}, 30); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(pool.live_workers(), 3);
}

TEST_F(WorkerPoolTest, PrestartWithABrokenPythonDoesNotThrow) {
  int kids = children().first;
  WorkerPool dies(options("die_at_start", 3));
  EXPECT_NO_THROW(dies.prestart(3));
  // A request while they start gets their reason; one afterwards starts its own and says why.
  std::string why = failure(dies, {{"op", "ping"}});
  EXPECT_NE(why.find("did not start: exited with status 3"), std::string::npos) << why;
  EXPECT_NE(why.find("fake: cannot import triton"), std::string::npos) << why;
  ASSERT_TRUE(eventually([&] { return dies.live_workers() == 0; }));
  why = failure(dies, {{"op", "ping"}});
  EXPECT_NE(why.find("did not start: exited with status 3"), std::string::npos) << why;
  EXPECT_EQ(dies.live_workers(), 0);
  EXPECT_EQ(children().first, kids);

  WorkerPoolOptions o = options();
  o.command = {"/nonexistent/python3", "-m", "gemmtune.worker"};
  WorkerPool missing(o);
  EXPECT_NO_THROW(missing.prestart(2));
  ASSERT_TRUE(eventually([&] { return missing.live_workers() == 0; }));
  why = failure(missing, {{"op", "ping"}});
  EXPECT_NE(why.find("cannot start compile worker '/nonexistent/python3': No such file or directory"),
            std::string::npos)
      << why;
  try {
    missing.ready();
    FAIL() << "ready() without a worker";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cannot start compile worker"), std::string::npos) << e.message();
  }
}

TEST_F(WorkerPoolTest, DestructionDuringPrestartIsClean) {
  int fds = open_fds();
  int kids = children().first;
  for (const char* mode : {"silent", "ok"}) {
    WorkerPoolOptions o = options(mode, 3);
    o.start_timeout_s = 60;
    auto t0 = std::chrono::steady_clock::now();
    {
      WorkerPool pool(o);
      pool.prestart(3);
      if (std::string(mode) == "silent") {
        EXPECT_TRUE(eventually([&] { return children().first == kids + 3; }, 10));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // all waiting for ready lines
        EXPECT_EQ(pool.idle_workers(), 0);
      }
    }  // workers still starting: cancelled, killed and reaped
    EXPECT_LT(seconds_since(t0), 5.0) << mode << ": destruction waited for the start timeout";
    EXPECT_EQ(children().first, kids) << mode << ": workers left after the pool";
    EXPECT_EQ(open_fds(), fds) << mode << ": descriptors leaked";
  }
}

TEST(WorkerPoolDefaults, PythonWorkersFromTheCompileOptions) {
  CompileOptions c;
  c.python = "/opt/py/bin/python";
  c.python_dir = "/opt/gemmtune/python";
  c.workers = 3;
  WorkerPoolOptions o = WorkerPoolOptions::for_python(c);
  ASSERT_EQ(o.command.size(), 3u);
  EXPECT_EQ(o.command[0], "/opt/py/bin/python");
  EXPECT_EQ(o.command[1], "-m");
  EXPECT_EQ(o.command[2], "gemmtune.worker");
  EXPECT_EQ(o.env.at("PYTHONPATH").substr(0, 20), "/opt/gemmtune/python");
  EXPECT_EQ(o.max_workers, 3);
  // Resolved defaults: the build's python dir, and the repo's .venv python when present.
  const CompileOptions r = resolve(CompileOptions{});
  EXPECT_TRUE(fs::exists(r.python_dir / "gemmtune" / "__init__.py")) << r.python_dir;
  EXPECT_TRUE(r.python == "python3" || r.python == (r.python_dir.parent_path() / ".venv" / "bin" / "python").string() ||
              !std::string(std::getenv("GEMMTUNE_PYTHON") ? std::getenv("GEMMTUNE_PYTHON") : "").empty())
      << r.python;
  EXPECT_GE(WorkerPoolOptions::for_python(r).max_workers, 1);
}

}  // namespace
}  // namespace gemmtune
