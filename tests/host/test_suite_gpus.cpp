// `gemmtune suite --gpus` without a GPU: the device list, and the spreading of a suite over
// worker processes, with a fake worker ($GEMMTUNE_SUITE_WORKER, a shell script speaking the
// protocol of tools/gemmtune/suite_gpus.hpp) that can be told to die.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <string>

#include <nlohmann/json.hpp>

#include "gemmtune/error.hpp"
#include "gemmtune/suite_gpus.hpp"
#include "host/problems.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using host_test::run_cli;
using host_test::TempDir;

TEST(SuiteGpus, DeviceList) {
  EXPECT_EQ(cli::parse_gpus("all", 3), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(cli::parse_gpus("2,0", 3), (std::vector<std::string>{"2", "0"}));
  EXPECT_EQ(cli::parse_gpus("5", -1), (std::vector<std::string>{"5"}));  // count unknown: not checked
  for (const auto& [text, count, why] : std::vector<std::tuple<std::string, int, std::string>>{
           {"all", 0, "no CUDA device"},
           {"", 2, "not a device index"},
           {"0,,1", 2, "not a device index"},
           {"x", 2, "not a device index"},
           {"-1", 2, "not a device index"},
           {"1,1", 2, "named twice"},
           {"2", 2, "does not exist"}}) {
    try {
      cli::parse_gpus(text, count);
      ADD_FAILURE() << "accepted --gpus " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.message().rfind("--gpus", 0), 0u) << e.message();
      EXPECT_NE(e.message().find(why), std::string::npos) << e.message();
    }
  }
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A worker that answers every index with one row {"index": index, "gpu": its CUDA_VISIBLE_DEVICES};
// $KILL_GPU: the worker of that GPU kills itself when its second problem arrives; $KILL_PROBLEM:
// every worker that gets that problem kills itself.
fs::path fake_worker(const fs::path& dir) {
  const fs::path p = dir / "worker.sh";
  std::ofstream(p) << R"(#!/bin/bash
g=$CUDA_VISIBLE_DEVICES
printf '{"log":"args %s"}\n' "$*"
echo "a stray print on stdout"
n=0
while read -r i; do
  n=$((n+1))
  if [ -n "$KILL_GPU" ] && [ "$g" = "$KILL_GPU" ] && [ $n -eq 2 ]; then kill -9 $$; fi
  if [ -n "$KILL_PROBLEM" ] && [ "$i" = "$KILL_PROBLEM" ]; then kill -9 $$; fi
  sleep 0.05
  printf '{"i":%s,"record":{"index":%s,"gpu":"%s"},"cells":["row","%s"]}\n' "$i" "$i" "$g" "$i"
  printf '{"i":%s,"done":"ok on %s"}\n' "$i" "$g"
done
)";
  fs::permissions(p, fs::perms::owner_all);
  return p;
}

fs::path suite_file(const fs::path& dir, int problems) {
  const fs::path p = dir / "suite.csv";
  std::ofstream f(p);
  f << "m,n,k\n";
  for (int i = 0; i < problems; ++i) f << 16 * (i + 1) << ",256,512\n";
  return p;
}

// Problem index -> the GPUs whose rows for it came back, from the --json output.
std::map<int, std::vector<std::string>> rows_by_problem(const fs::path& jsonl) {
  std::map<int, std::vector<std::string>> out;
  std::ifstream f(jsonl);
  for (std::string line; std::getline(f, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("index")) out[j["index"].get<int>()].push_back(j["gpu"].get<std::string>());
    else out[-1].push_back(j.value("reason", ""));  // an error row of the suite itself
  }
  return out;
}

TEST(SuiteGpus, SpreadsTheProblemsOverOneWorkerPerGpu) {
  TempDir dir("suite-gpus-spread");
  ScopedEnv worker("GEMMTUNE_SUITE_WORKER", fake_worker(dir.root).string());
  const auto suite = suite_file(dir.root, 9);
  const auto out = run_cli(dir.root, "suite " + suite.string() + " --gpus 0,1,2 --json " + (dir.root / "r.jsonl").string() +
                                         " --csv " + (dir.root / "r.csv").string() + " --backends cublaslt");
  ASSERT_EQ(out.code, 0) << out.err;
  const auto rows = rows_by_problem(dir.root / "r.jsonl");
  ASSERT_EQ(rows.size(), 9u) << out.err;
  std::map<std::string, int> per_gpu;
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(rows.at(i).size(), 1u) << "problem " << i;
    ++per_gpu[rows.at(i)[0]];
  }
  EXPECT_GE(per_gpu.size(), 2u) << "one worker ran every problem";
  // The workers' command line: the suite's, without --gpus, --csv and --json, plus --suite-worker.
  EXPECT_NE(out.err.find("--suite-worker"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("--backends cublaslt"), std::string::npos) << out.err;
  EXPECT_EQ(out.err.find("--gpus"), std::string::npos) << out.err;
  EXPECT_EQ(out.err.find("--json"), std::string::npos) << out.err;
  // A line that is not the protocol is shown, never taken for a row.
  EXPECT_NE(out.err.find("a stray print on stdout"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("9 problems on 3 GPUs"), std::string::npos) << out.err;
  // The CSV holds the header and one row per problem.
  std::ifstream csv(dir.root / "r.csv");
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 10);
}

TEST(SuiteGpus, AKilledWorkerLosesNoProblem) {
  TempDir dir("suite-gpus-kill");
  ScopedEnv worker("GEMMTUNE_SUITE_WORKER", fake_worker(dir.root).string());
  ScopedEnv kill("KILL_GPU", "1");
  const auto suite = suite_file(dir.root, 8);
  const auto out = run_cli(dir.root, "suite " + suite.string() + " --gpus 0,1 --json " + (dir.root / "r.jsonl").string());
  ASSERT_EQ(out.code, 0) << out.err;
  const auto rows = rows_by_problem(dir.root / "r.jsonl");
  ASSERT_EQ(rows.size(), 8u) << out.err;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(rows.at(i).size(), 1u) << "problem " << i;
  EXPECT_NE(out.err.find("GPU 1 killed by signal 9"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("another GPU takes it"), std::string::npos) << out.err;
}

TEST(SuiteGpus, AProblemThatKillsEveryWorkerIsReportedAndTheRestFinish) {
  TempDir dir("suite-gpus-poison");
  ScopedEnv worker("GEMMTUNE_SUITE_WORKER", fake_worker(dir.root).string());
  ScopedEnv kill("KILL_PROBLEM", "2");
  const auto suite = suite_file(dir.root, 6);
  const auto out = run_cli(dir.root, "suite " + suite.string() + " --gpus 0,1,2 --json " + (dir.root / "r.jsonl").string());
  EXPECT_EQ(out.code, 1) << out.err;  // one problem failed
  const auto rows = rows_by_problem(dir.root / "r.jsonl");
  for (int i : {0, 1, 3, 4, 5}) EXPECT_EQ(rows.count(i) ? rows.at(i).size() : 0u, 1u) << "problem " << i;
  EXPECT_EQ(rows.count(2), 0u);
  ASSERT_EQ(rows.count(-1), 1u) << out.err;
  ASSERT_EQ(rows.at(-1).size(), 1u);
  const std::string& reason = rows.at(-1)[0];
  EXPECT_EQ(reason.rfind("lost: ", 0), 0u) << reason;
  // Tried on kAttempts workers, each death named.
  size_t deaths = 0;
  for (size_t at = reason.find("killed by signal 9"); at != std::string::npos; at = reason.find("killed by signal 9", at + 1))
    ++deaths;
  EXPECT_EQ(deaths, size_t(cli::kAttempts)) << reason;
}

TEST(SuiteGpus, NoWorkerThatCanStart) {
  TempDir dir("suite-gpus-missing");
  ScopedEnv worker("GEMMTUNE_SUITE_WORKER", (dir.root / "no-such-worker").string());
  const auto suite = suite_file(dir.root, 2);
  const auto out = run_cli(dir.root, "suite " + suite.string() + " --gpus 0");
  EXPECT_EQ(out.code, 1) << out.err;
  EXPECT_NE(out.err.find("cannot start the worker"), std::string::npos) << out.err;
}

}  // namespace
}  // namespace gemmtune
