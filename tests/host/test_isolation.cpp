// Crash isolation on the host (docs/isolation.md, src/engine/isolate.hpp): the caller's side of
// the protocol against fake helpers (bash scripts that speak it and crash, hang, fault or answer
// as told), the real gemmtune CLI as a helper (without a GPU it answers no_device), quarantine
// in the tuning cache, the isolation options (JSON, environment) and the exit descriptions.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda.hpp"
#include "core/log.hpp"
#include "core/problem_json.hpp"
#include "core/settings.hpp"
#include "engine/isolate.hpp"
#include "gemmtune/engine.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gt-isolation-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
int lines_of(const fs::path& p) {
  int n = 0;
  std::ifstream in(p);
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

// A fake helper in its own folder: on its N-th start it follows line N of `plan` (the last line
// from then on): crash, hang, fault, outside (exits before any candidate), error, garbage (a
// "done" without its report), done. Every
// request it receives is appended to `requests`, every start (with its pid) to `starts`.
class FakeHelper {
 public:
  FakeHelper(const std::vector<std::string>& plan, const std::string& version = gemmtune::version()) {
    std::ofstream(dir_.path() / "plan") << [&] {
      std::string s;
      for (auto& p : plan) s += p + "\n";
      return s;
    }();
    const std::string run_bad = R"({"ev":"run","backend":"fake","id":"bad","name":"fake bad","step":"verify"})";
    const std::string report =
        R"({"ev":"done","report":{"key":"k","spread":0.01,"notes":["fake: a note"],"results":[)"
        R"({"backend":"fake","id":"good","name":"fake good","status":"ok","reason":"","rel_err":0.001,)"
        R"("median_us":5.5,"p20_us":5.4,"p80_us":5.6,"samples":9,"compile_s":0,"winner":true,"is_default":false}]}})";
    std::ofstream script(exe());
    script << "#!/usr/bin/env bash\n"
           << "dir='" << dir_.path().string() << "'\n"
           << "echo $$ >> \"$dir/starts\"\n"
           << "n=$(wc -l < \"$dir/starts\")\n"
           << "plan=$(sed -n \"${n}p\" \"$dir/plan\"); [ -n \"$plan\" ] || plan=$(tail -1 \"$dir/plan\")\n"
           << "echo '{\"ev\":\"hello\",\"protocol\":1,\"version\":\"" << version << "\",\"pid\":'$$'}' >&3\n"
           << "while IFS= read -r line <&3; do\n"
           << "  printf '%s\\n' \"$line\" >> \"$dir/requests\"\n"
           << "  echo '{\"ev\":\"log\",\"line\":\"fake: tuning\"}' >&3\n"
           << "  echo '{\"ev\":\"stage\",\"stage\":\"verify\"}' >&3\n"
           << "  case $plan in\n"
           << "    crash) echo '" << run_bad << "' >&3; kill -SEGV $$ ;;\n"
           << "    hang) echo '" << run_bad << "' >&3; exec sleep 30 ;;\n"
           << "    fault) echo '" << run_bad << "' >&3;"
           << " echo '{\"ev\":\"fault\",\"backend\":\"fake\",\"id\":\"bad\",\"name\":\"fake bad\",\"reason\":\"an illegal memory access\"}' >&3; exit 70 ;;\n"
           << "    outside) exit 3 ;;\n"
           << "    error) echo '{\"ev\":\"error\",\"code\":0,\"message\":\"problem.m: bad\"}' >&3 ;;\n"
           << "    garbage) echo '{\"ev\":\"done\"}' >&3 ;;\n"
           << "    *) echo '{\"ev\":\"run\",\"backend\":\"fake\",\"id\":\"good\",\"name\":\"fake good\",\"step\":\"race\"}' >&3;"
           << " echo '{\"ev\":\"stage\",\"stage\":\"store\"}' >&3; echo '" << report << "' >&3 ;;\n"
           << "  esac\n"
           << "done\n";
    script.close();
    fs::permissions(exe(), fs::perms::owner_all);
  }
  fs::path exe() const { return dir_.path() / "helper.sh"; }
  int starts() const { return lines_of(dir_.path() / "starts"); }
  pid_t last_pid() const {
    std::ifstream in(dir_.path() / "starts");
    pid_t pid = -1;
    for (pid_t p; in >> p;) pid = p;
    return pid;
  }
  std::vector<std::string> requests() const {
    std::vector<std::string> out;
    std::ifstream in(dir_.path() / "requests");
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  const fs::path& dir() const { return dir_.path(); }

 private:
  TempDir dir_;
};

struct Lines {
  std::mutex mu;
  std::vector<std::string> all;
  bool has(const std::string& s) {
    std::lock_guard lock(mu);
    for (auto& l : all)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

struct Caller {
  EngineOptions opt;
  Lines lines;
  Log log{[this](const std::string& l) {
            std::lock_guard lock(lines.mu);
            lines.all.push_back(l);
          },
          LogLevel::debug};
  isolate::Request req;
  std::vector<Quarantined> session;

  explicit Caller(const FakeHelper& fake, double timeout_s = 30) {
    opt.isolation.helper = fake.exe();
    opt.isolation.candidate_timeout_s = timeout_s;
    req.op = "gemm";
    req.problem_json = problem_to_json(GemmProblem::linear(64, 128, 256));
    req.key = "k";
    req.environment = "env-1";
    req.options_json = engine_options_to_json(opt);
  }
  TuneReport tune(TuningCache* cache = nullptr) { return isolate::tune_in_helper(opt, log, cache, req, session); }
};

void expect_good_report(const TuneReport& r) {
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].backend, "fake");
  EXPECT_EQ(r.results[0].id, "good");
  EXPECT_TRUE(r.results[0].winner);
  EXPECT_EQ(r.results[0].status, CandidateStatus::ok);
  EXPECT_DOUBLE_EQ(r.results[0].median_us, 5.5);
  EXPECT_DOUBLE_EQ(r.results[0].rel_err, 0.001);
  EXPECT_EQ(r.results[0].samples, 9);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0], "fake: a note");
  EXPECT_DOUBLE_EQ(r.spread, 0.01);
}

TEST(Isolation, CrashQuarantinesTheAnnouncedCandidateAndRestarts) {
  FakeHelper fake({"crash", "done"});
  TempDir dir;
  TuningCache cache(dir.path() / "c.sqlite");
  Caller s(fake);
  TuneReport r = s.tune(&cache);
  expect_good_report(r);
  EXPECT_EQ(fake.starts(), 2);
  ASSERT_EQ(s.session.size(), 1u);
  const Quarantined& q = s.session[0];
  EXPECT_EQ(q.backend, "fake");
  EXPECT_EQ(q.candidate_id, "bad");
  EXPECT_EQ(q.candidate_name, "fake bad");
  EXPECT_EQ(q.scope, "");
  EXPECT_EQ(q.status, CandidateStatus::failed);
  EXPECT_NE(q.reason.find("killed by signal 11 (SIGSEGV)"), std::string::npos) << q.reason;
  EXPECT_NE(q.reason.find("verify step"), std::string::npos) << q.reason;
  // Remembered in the cache, for every problem of the environment.
  std::vector<Quarantined> stored = cache.quarantined("env-1", "another key");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].candidate_id, "bad");
  EXPECT_EQ(stored[0].reason, q.reason);
  EXPECT_TRUE(cache.quarantined("env-2", "k").empty());
  // The second request names the culprit to keep out.
  std::vector<std::string> req = fake.requests();
  ASSERT_EQ(req.size(), 2u);
  EXPECT_EQ(req[0].find("\"bad\""), std::string::npos);
  EXPECT_NE(req[1].find("\"exclude\":[{\"backend\":\"fake\",\"id\":\"bad\""), std::string::npos) << req[1];
  EXPECT_TRUE(s.lines.has("fake: tuning"));  // the helper's log reaches the caller's
  EXPECT_TRUE(s.lines.has("warning: fake fake bad: crashed the tuning helper"));
}

TEST(Isolation, HangIsKilledAtTheDeadline) {
  FakeHelper fake({"hang", "done"});
  Caller s(fake, 0.3);
  const auto t0 = Clock::now();
  TuneReport r = s.tune();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  expect_good_report(r);
  EXPECT_LT(took, 10);
  ASSERT_EQ(s.session.size(), 1u);
  EXPECT_EQ(s.session[0].reason.rfind("hung: no progress for 0.3 s while in its verify step", 0), 0u) << s.session[0].reason;
  EXPECT_EQ(fake.starts(), 2);
}

TEST(Isolation, FaultReportedByTheHelperNamesItsReason) {
  FakeHelper fake({"fault", "done"});
  Caller s(fake);
  expect_good_report(s.tune());
  ASSERT_EQ(s.session.size(), 1u);
  EXPECT_EQ(s.session[0].reason, "faulted while in its verify step: an illegal memory access");
}

TEST(Isolation, SessionQuarantineTravelsWithLaterRequests) {
  FakeHelper fake({"crash", "done"});
  Caller s(fake);
  s.tune();
  s.req.key = "k2";  // another problem of the same environment
  s.tune();
  std::vector<std::string> req = fake.requests();
  ASSERT_EQ(req.size(), 3u);
  EXPECT_NE(req[2].find("\"id\":\"bad\""), std::string::npos) << req[2];
  s.req.environment = "env-other";
  s.tune();
  req = fake.requests();
  ASSERT_EQ(req.size(), 4u);
  EXPECT_EQ(req[3].find("\"id\":\"bad\""), std::string::npos) << req[3];
}

TEST(Isolation, DeathOutsideACandidateIsAnError) {
  FakeHelper fake({"outside"});
  Caller s(fake);
  try {
    s.tune();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("exited with status 3 outside any candidate's step"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(s.session.empty());
}

TEST(Isolation, HelperErrorKeepsItsCode) {
  FakeHelper fake({"error"});
  Caller s(fake);
  try {
    s.tune();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid);
    EXPECT_EQ(e.message(), "problem.m: bad");
  }
  // The helper is still up and answers the next request.
  EXPECT_EQ(fake.starts(), 1);
}

TEST(Isolation, MalformedMessageIsAnInternalError) {
  FakeHelper fake({"garbage"});
  Caller s(fake);
  try {
    s.tune();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_NE(e.message().find("tuning helper: a malformed message"), std::string::npos) << e.message();
  }
}

TEST(Isolation, HelperStaysWarmAndIsRestartedWhenKilledWhileIdle) {
  FakeHelper fake({"done"});
  Caller s(fake);
  s.tune();
  s.tune();
  EXPECT_EQ(fake.starts(), 1);
  const pid_t pid = fake.last_pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) {
    int st;
    ::waitpid(pid, &st, WNOHANG);  // reaped by the pool's next look otherwise; either is fine
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  expect_good_report(s.tune());
  EXPECT_EQ(fake.starts(), 2);
  EXPECT_TRUE(s.session.empty());
}

TEST(Isolation, HelperOfAnotherVersionIsRefused) {
  FakeHelper fake({"done"}, "9.9.9");
  Caller s(fake);
  try {
    s.tune();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("is unusable: it is gemmtune 9.9.9"), std::string::npos) << e.message();
  }
}

TEST(Isolation, ConfiguredHelperMustBeExecutable) {
  TempDir dir;
  std::ofstream(dir.path() / "not-exec") << "x";
  for (const fs::path& p : {dir.path() / "missing", dir.path() / "not-exec", dir.path()}) {
    try {
      isolate::find_tuner(p);
      ADD_FAILURE() << p;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid);
      EXPECT_NE(e.message().find("isolation.helper: '" + p.string() + "' is not an executable file"), std::string::npos);
    }
  }
  FakeHelper fake({"done"});
  EXPECT_EQ(isolate::find_tuner(fake.exe()), fake.exe());
}

// Without a configured helper, the library's folders come first, then $PATH. (The host test
// binary has no gemmtune beside it; an installed one in the install's bin would be found first:
// then this test is skipped.)
TEST(Isolation, HelperFoundOnPathLast) {
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
  TempDir dir;
  ::setenv("PATH", "", 1);
  std::string none;
  try {
    isolate::find_tuner("");
  } catch (const Error& e) {
    none = e.message();
  }
  const fs::path exe = dir.path() / "gemmtune";
  std::ofstream(exe) << "#!/bin/sh\n";
  fs::permissions(exe, fs::perms::owner_all);
  ::setenv("PATH", ("relative/dir:" + dir.path().string()).c_str(), 1);
  fs::path found;
  try {
    found = isolate::find_tuner("");
  } catch (const Error&) {
  }
  ::setenv("PATH", saved.c_str(), 1);
  if (none.empty()) GTEST_SKIP() << "a gemmtune outside $PATH is found first";
  EXPECT_NE(none.find("cannot find the tuning helper"), std::string::npos) << none;
  EXPECT_NE(none.find("$GEMMTUNE_TUNER"), std::string::npos) << none;
  EXPECT_EQ(found, exe);
}

// The real helper (the CLI in its hidden mode) speaks the protocol: without a GPU its engine
// cannot start, and the caller gets that error with its code.
TEST(Isolation, TheCliIsAHelper) {
  std::string why;
  if (cuda_device_present(&why)) GTEST_SKIP() << "a GPU is present: covered by the GPU tests";
  EngineOptions opt;
  opt.isolation.helper = GEMMTUNE_CLI;
  opt.use_cache = false;
  isolate::Request req{"gemm", problem_to_json(GemmProblem::linear(64, 64, 64)), "k", "e", engine_options_to_json(opt)};
  std::vector<Quarantined> session;
  try {
    isolate::tune_in_helper(opt, Log(), nullptr, req, session);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::no_device) << e.message();
  }
}

TEST(Isolation, DescribeExit) {
  EXPECT_EQ(isolate::describe_exit(SIGSEGV), "killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(isolate::describe_exit(SIGKILL), "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(isolate::describe_exit(3 << 8), "exited with status 3");
}

// ---- quarantine in the tuning cache --------------------------------------------------------

TEST(Quarantine, PersistsByEnvironmentAndScope) {
  TempDir dir;
  const fs::path path = dir.path() / "q.sqlite";
  {
    TuningCache cache(path);
    EXPECT_TRUE(cache.quarantined("env", "k1").empty());  // no table yet
    cache.quarantine({"env", "", "cutlass", "c1", "cutlass one", CandidateStatus::failed, "crashed", 0});
    cache.quarantine({"env", "k1", "triton", "t1", "triton one", CandidateStatus::wrong, "rel_err 0.5", 0});
    cache.quarantine({"env2", "", "cutlass", "c2", "cutlass two", CandidateStatus::failed, "hung", 0});
    // The same candidate and scope again: replaced, not doubled.
    cache.quarantine({"env", "", "cutlass", "c1", "cutlass one", CandidateStatus::failed, "crashed again", 0});
  }
  TuningCache cache(path);
  std::vector<Quarantined> k1 = cache.quarantined("env", "k1");
  ASSERT_EQ(k1.size(), 2u);
  EXPECT_EQ(k1[0].backend, "cutlass");
  EXPECT_EQ(k1[0].reason, "crashed again");
  EXPECT_EQ(k1[0].scope, "");
  EXPECT_GT(k1[0].at, 1.6e9);
  EXPECT_EQ(k1[1].backend, "triton");
  EXPECT_EQ(k1[1].status, CandidateStatus::wrong);
  EXPECT_EQ(k1[1].scope, "k1");
  std::vector<Quarantined> k2 = cache.quarantined("env", "k2");  // the wrong one was for k1 only
  ASSERT_EQ(k2.size(), 1u);
  EXPECT_EQ(k2[0].candidate_id, "c1");
  EXPECT_EQ(cache.quarantined("env2", "k1").size(), 1u);
  cache.clear();
  EXPECT_TRUE(cache.quarantined("env", "k1").empty());
}

TEST(Quarantine, RefusesEmptyNames) {
  TempDir dir;
  TuningCache cache(dir.path() / "q.sqlite");
  EXPECT_THROW(cache.quarantine({"", "", "b", "i", "n", CandidateStatus::failed, "r", 0}), Error);
  EXPECT_THROW(cache.quarantine({"e", "", "", "i", "n", CandidateStatus::failed, "r", 0}), Error);
  EXPECT_THROW(cache.quarantine({"e", "", "b", "", "n", CandidateStatus::failed, "r", 0}), Error);
}

// ---- options ----------------------------------------------------------------------------------

TEST(IsolationOptions, JsonRoundTrip) {
  EngineOptions o;
  o.isolation.mode = Isolation::in_process;
  o.isolation.helper = "/opt/gt/bin/gemmtune";
  o.isolation.candidate_timeout_s = 12.5;
  o.backends = {"cublaslt", "triton"};
  o.cache_path = "/tmp/c.sqlite";
  o.use_cache = false;
  o.device = 1;
  o.max_configs = 7;
  o.log_level = LogLevel::debug;
  o.tune.min_rounds = 4;
  o.tune.seed = 42;
  o.compile.artifacts = "/tmp/store";
  o.compile.load_only = {"cutlass"};
  o.compile.cutlass_kernel_dir = "/k";
  o.compile.keep_build = true;
  o.compile.fork_server = false;
  const std::string text = engine_options_to_json(o);
  EngineOptions back = engine_options_from_json(text);
  EXPECT_EQ(engine_options_to_json(back), text);
  EXPECT_EQ(back.isolation.mode, Isolation::in_process);
  EXPECT_EQ(back.isolation.helper, "/opt/gt/bin/gemmtune");
  EXPECT_DOUBLE_EQ(back.isolation.candidate_timeout_s, 12.5);
  EXPECT_EQ(back.compile.cutlass_kernel_dir, "/k");
  EXPECT_TRUE(back.compile.keep_build);
  EXPECT_FALSE(back.compile.fork_server);
  EXPECT_EQ(engine_options_from_json("{}").isolation.mode, Isolation::process);
}

TEST(IsolationOptions, BadValuesNameTheField) {
  auto message = [](const std::string& json) {
    try {
      engine_options_from_json(json);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid);
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"isolation": {"mode": "thread"}})"),
            "options.isolation.mode: 'thread' is not one of process, in_process");
  EXPECT_EQ(message(R"({"isolation": {"candidate_timeout_s": -1}})"),
            "options.isolation.candidate_timeout_s: must be in [0, 86400] seconds");
  EXPECT_NE(message(R"({"isolation": {"helpr": "x"}})").find("options.isolation.helpr: unknown field"), std::string::npos);
  EXPECT_NE(message(R"({"isolation": 3})").find("options.isolation: must be an object"), std::string::npos);
}

// The environment, through resolve() (one reader: core/settings.cpp).
class IsolationEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (auto& [name, value] : saved_)
      if (value) ::setenv(name, value->c_str(), 1);
      else ::unsetenv(name);
  }
  static constexpr const char* kVars[] = {"GEMMTUNE_ISOLATION", "GEMMTUNE_TUNER", "GEMMTUNE_CANDIDATE_TIMEOUT"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(IsolationEnv, DefaultsAndVariables) {
  EngineOptions o;
  o.use_cache = false;
  EngineOptions r = resolve(o);
  EXPECT_EQ(r.isolation.mode, Isolation::process);
  EXPECT_TRUE(r.isolation.helper.empty());
  EXPECT_DOUBLE_EQ(r.isolation.candidate_timeout_s, 30);
  ::setenv("GEMMTUNE_ISOLATION", "in-process", 1);
  ::setenv("GEMMTUNE_TUNER", "/x/gemmtune", 1);
  ::setenv("GEMMTUNE_CANDIDATE_TIMEOUT", "5", 1);
  r = resolve(o);
  EXPECT_EQ(r.isolation.mode, Isolation::in_process);
  EXPECT_EQ(r.isolation.helper, "/x/gemmtune");
  EXPECT_DOUBLE_EQ(r.isolation.candidate_timeout_s, 5);
  // Options set in code win over the environment (but the mode's default, process).
  o.isolation.helper = "/y/gemmtune";
  o.isolation.candidate_timeout_s = 2;
  r = resolve(o);
  EXPECT_EQ(r.isolation.helper, "/y/gemmtune");
  EXPECT_DOUBLE_EQ(r.isolation.candidate_timeout_s, 2);
  ::setenv("GEMMTUNE_ISOLATION", "threads", 1);
  try {
    resolve(o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "$GEMMTUNE_ISOLATION: 'threads' is not one of process, in-process");
  }
}

}  // namespace
}  // namespace gemmtune
