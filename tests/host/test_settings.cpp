// The one reader of the GEMMTUNE_* environment (core/settings.hpp): resolve() fills the fields
// left at their defaults from the variables, explicit values win, bad values are Errors naming
// the variable, the built-in defaults; and no other library source calls getenv.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/problem_json.hpp"
#include "core/settings.hpp"
#include "gemmtune/engine_options.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

// The source tree as CMake gives it (not __FILE__, which ccache with CCACHE_BASEDIR makes relative).
fs::path repo_root() { return GEMMTUNE_TEST_SOURCE_DIR; }

// Every variable resolve() reads: unset for each test, and put back as it was after it.
const char* const kVars[] = {
    "GEMMTUNE_CACHE",         "GEMMTUNE_ARTIFACTS",      "GEMMTUNE_COMPILE_WORKERS",    "GEMMTUNE_NVCC_JOBS",
    "GEMMTUNE_COMPILE_TIMEOUT", "GEMMTUNE_LOAD_ONLY",    "GEMMTUNE_PYTHON",             "GEMMTUNE_PYTHON_DIR",
    "GEMMTUNE_NVCC",          "GEMMTUNE_CUTLASS_DIR",    "GEMMTUNE_CUTLASS_KERNEL_DIR", "GEMMTUNE_KEEP_BUILD",
    "GEMMTUNE_COMPILE_FORK_SERVER", "GEMMTUNE_MAX_CONFIGS", "GEMMTUNE_LOG",             "GEMMTUNE_DEBUG",
    "GEMMTUNE_COMPILE_BUDGET",
    "GEMMTUNE_ISOLATION",     "GEMMTUNE_TUNER",          "GEMMTUNE_CANDIDATE_TIMEOUT",
    "XDG_CACHE_HOME",
};

class ScopedEnv {
 public:
  ScopedEnv() {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      else saved_[v] = std::nullopt;
      unsetenv(v);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gemmtune-settings-XXXXXX";
    const char* p = mkdtemp(tmpl);
    if (!p) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

class Settings : public ::testing::Test {
 protected:
  ScopedEnv env;
  TempDir tmp;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no Error thrown)";
}

// The code of the Error f() throws; ErrorCode::internal (and a failure) when it throws none.
ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no Error thrown";
  return ErrorCode::internal;
}

// A malformed value is bad input (the C API's GT_ERR_INVALID), not a runtime failure.
TEST_F(Settings, BadValuesAreInvalid) {
  env.set("GEMMTUNE_NVCC_JOBS", "many");
  EXPECT_EQ(code_of([] { resolve(CompileOptions{}); }), ErrorCode::invalid);
  unsetenv("GEMMTUNE_NVCC_JOBS");
  env.set("GEMMTUNE_LOG", "loud");
  EXPECT_EQ(code_of([] { resolve(EngineOptions{}); }), ErrorCode::invalid);
  unsetenv("GEMMTUNE_LOG");
  CompileOptions huge;
  huge.timeout_s = 1e12;
  EXPECT_EQ(code_of([&] { resolve(huge); }), ErrorCode::invalid);
}

// The compile budget: 8 by default, a whole number or "all" (-1) from the environment, an
// explicit field kept (any negative value meaning no budget).
TEST_F(Settings, CompileBudget) {
  EXPECT_EQ(resolve(EngineOptions{}).compile_budget, 8);
  env.set("GEMMTUNE_COMPILE_BUDGET", "3");
  EXPECT_EQ(resolve(EngineOptions{}).compile_budget, 3);
  env.set("GEMMTUNE_COMPILE_BUDGET", "all");
  EXPECT_EQ(resolve(EngineOptions{}).compile_budget, -1);
  EngineOptions explicit_budget;
  explicit_budget.compile_budget = 5;
  EXPECT_EQ(resolve(explicit_budget).compile_budget, 5);
  explicit_budget.compile_budget = -7;
  EXPECT_EQ(resolve(explicit_budget).compile_budget, -1);
  // It travels to the tuning helper.
  EngineOptions o;
  o.compile_budget = 4;
  EXPECT_EQ(engine_options_from_json(engine_options_to_json(o)).compile_budget, 4);
  o.compile_budget = -1;
  EXPECT_EQ(engine_options_from_json(engine_options_to_json(o)).compile_budget, -1);
  EXPECT_NE(error_of([] { engine_options_from_json(R"({"compile_budget": -2})"); }).find("compile_budget"), std::string::npos);
  EXPECT_NE(error_of([] { engine_options_from_json(R"({"compile_budget": 5000})"); }).find("compile_budget"), std::string::npos);
}

TEST_F(Settings, EnvironmentFillsTheDefaults) {
  const fs::path pydir = tmp.path() / "py";
  env.set("GEMMTUNE_CACHE", (tmp.path() / "tuning.sqlite").string());
  env.set("GEMMTUNE_ARTIFACTS", (tmp.path() / "store").string());
  env.set("GEMMTUNE_COMPILE_WORKERS", "3");
  env.set("GEMMTUNE_NVCC_JOBS", "5");
  env.set("GEMMTUNE_COMPILE_TIMEOUT", "90.5");
  env.set("GEMMTUNE_LOAD_ONLY", "triton,,cutedsl");
  env.set("GEMMTUNE_PYTHON", "/opt/py/bin/python3.12");
  env.set("GEMMTUNE_PYTHON_DIR", pydir.string());
  env.set("GEMMTUNE_MAX_CONFIGS", "7");
  env.set("GEMMTUNE_LOG", "debug");
  env.set("GEMMTUNE_KEEP_BUILD", "1");
  env.set("GEMMTUNE_COMPILE_FORK_SERVER", "0");

  EngineOptions o = resolve(EngineOptions{});
  EXPECT_EQ(o.cache_path, tmp.path() / "tuning.sqlite");
  EXPECT_EQ(o.max_configs, 7);
  EXPECT_EQ(o.log_level, LogLevel::debug);
  const CompileOptions& c = o.compile;
  EXPECT_EQ(c.artifacts, tmp.path() / "store");
  EXPECT_EQ(c.workers, 3);
  EXPECT_EQ(c.nvcc_jobs, 5);
  EXPECT_DOUBLE_EQ(c.timeout_s, 90.5);
  EXPECT_EQ(c.load_only, (std::vector<std::string>{"triton", "cutedsl"}));
  EXPECT_EQ(c.python, "/opt/py/bin/python3.12");
  EXPECT_EQ(c.python_dir, pydir);
  EXPECT_TRUE(c.keep_build);
  EXPECT_FALSE(c.fork_server);

  // resolve(CompileOptions) alone reads the same variables.
  CompileOptions alone = resolve(CompileOptions{});
  EXPECT_EQ(alone.artifacts, c.artifacts);
  EXPECT_EQ(alone.workers, 3);
  EXPECT_EQ(alone.load_only, c.load_only);
  EXPECT_FALSE(alone.fork_server);
}

TEST_F(Settings, TheOtherPathsComeFromTheEnvironment) {
  env.set("GEMMTUNE_NVCC", "/opt/cuda/bin/nvcc");
  env.set("GEMMTUNE_CUTLASS_DIR", "/opt/cutlass");
  env.set("GEMMTUNE_CUTLASS_KERNEL_DIR", "/opt/kernels");
  CompileOptions c = resolve(CompileOptions{});
  EXPECT_EQ(c.nvcc, "/opt/cuda/bin/nvcc");
  EXPECT_EQ(c.cutlass_dir, "/opt/cutlass");
  EXPECT_EQ(c.cutlass_kernel_dir, "/opt/kernels");
}

TEST_F(Settings, PythonDirsVenvIsTheDefaultInterpreter) {
  const fs::path venv_python = tmp.path() / ".venv" / "bin" / "python";
  fs::create_directories(venv_python.parent_path());
  std::ofstream(venv_python) << "#!/bin/sh\n";
  fs::create_directories(tmp.path() / "python");
  env.set("GEMMTUNE_PYTHON_DIR", (tmp.path() / "python").string());
  CompileOptions c = resolve(CompileOptions{});
  EXPECT_EQ(c.python_dir, tmp.path() / "python");
  EXPECT_EQ(c.python, venv_python.string());
}

TEST_F(Settings, ExplicitValuesWinOverTheEnvironment) {
  env.set("GEMMTUNE_CACHE", "/env/tuning.sqlite");
  env.set("GEMMTUNE_ARTIFACTS", "/env/store");
  env.set("GEMMTUNE_COMPILE_WORKERS", "3");
  env.set("GEMMTUNE_NVCC_JOBS", "5");
  env.set("GEMMTUNE_COMPILE_TIMEOUT", "90");
  env.set("GEMMTUNE_LOAD_ONLY", "triton,cutlass");
  env.set("GEMMTUNE_PYTHON", "/env/python");
  env.set("GEMMTUNE_PYTHON_DIR", "/env/pydir");
  env.set("GEMMTUNE_NVCC", "/env/nvcc");
  env.set("GEMMTUNE_MAX_CONFIGS", "7");
  env.set("GEMMTUNE_LOG", "debug");

  EngineOptions in;
  in.cache_path = "/mine/tuning.sqlite";
  in.max_configs = 2;
  in.log_level = LogLevel::warning;
  in.compile.artifacts = "/mine/store";
  in.compile.workers = 11;
  in.compile.nvcc_jobs = 13;
  in.compile.timeout_s = 17;
  in.compile.load_only = {"cutlass"};
  in.compile.python = "/mine/python";
  in.compile.python_dir = "/mine/pydir";
  in.compile.nvcc = "/mine/nvcc";
  in.compile.fork_server = false;
  EngineOptions o = resolve(in);
  EXPECT_EQ(o.cache_path, "/mine/tuning.sqlite");
  EXPECT_EQ(o.max_configs, 2);
  EXPECT_EQ(o.log_level, LogLevel::warning);
  EXPECT_EQ(o.compile.artifacts, "/mine/store");
  EXPECT_EQ(o.compile.workers, 11);
  EXPECT_EQ(o.compile.nvcc_jobs, 13);
  EXPECT_DOUBLE_EQ(o.compile.timeout_s, 17);
  // GEMMTUNE_LOAD_ONLY adds to the list (without repeating a name).
  EXPECT_EQ(o.compile.load_only, (std::vector<std::string>{"cutlass", "triton"}));
  EXPECT_EQ(o.compile.python, "/mine/python");
  EXPECT_EQ(o.compile.python_dir, "/mine/pydir");
  EXPECT_EQ(o.compile.nvcc, "/mine/nvcc");
  EXPECT_FALSE(o.compile.fork_server);

  // Resolving twice changes nothing.
  EngineOptions twice = resolve(o);
  EXPECT_EQ(twice.compile.load_only, o.compile.load_only);
  EXPECT_EQ(twice.compile.workers, 11);
  EXPECT_EQ(twice.cache_path, o.cache_path);

  // A relative store is the one under the current directory (the compile workers, other
  // processes, refuse relative output folders).
  env.set("GEMMTUNE_ARTIFACTS", "rel/store");
  EXPECT_EQ(resolve(CompileOptions{}).artifacts, fs::current_path() / "rel" / "store");
  CompileOptions relative;
  relative.artifacts = "mine";
  EXPECT_EQ(resolve(relative).artifacts, fs::current_path() / "mine");

  // No cache: no cache path is made up.
  EngineOptions no_cache;
  no_cache.use_cache = false;
  EXPECT_TRUE(resolve(no_cache).cache_path.empty());
}

TEST_F(Settings, BadValuesNameTheVariable) {
  for (const char* bad : {"abc", "1e12", "-5", "0", "5s", "nan", "inf"}) {
    env.set("GEMMTUNE_COMPILE_TIMEOUT", bad);
    const std::string why = error_of([] { resolve(CompileOptions{}); });
    EXPECT_NE(why.find("GEMMTUNE_COMPILE_TIMEOUT"), std::string::npos) << bad << ": " << why;
    EXPECT_NE(why.find(bad), std::string::npos) << bad << ": " << why;
  }
  unsetenv("GEMMTUNE_COMPILE_TIMEOUT");

  env.set("GEMMTUNE_COMPILE_WORKERS", "many");
  EXPECT_NE(error_of([] { resolve(CompileOptions{}); }).find("GEMMTUNE_COMPILE_WORKERS"), std::string::npos);
  unsetenv("GEMMTUNE_COMPILE_WORKERS");
  env.set("GEMMTUNE_NVCC_JOBS", "-1");
  EXPECT_NE(error_of([] { resolve(CompileOptions{}); }).find("GEMMTUNE_NVCC_JOBS"), std::string::npos);
  unsetenv("GEMMTUNE_NVCC_JOBS");
  env.set("GEMMTUNE_MAX_CONFIGS", "x");
  EXPECT_NE(error_of([] { resolve(EngineOptions{}); }).find("GEMMTUNE_MAX_CONFIGS"), std::string::npos);
  unsetenv("GEMMTUNE_MAX_CONFIGS");
  for (const char* bad : {"x", "0", "-3", "2.5", "5000", "al"}) {
    env.set("GEMMTUNE_COMPILE_BUDGET", bad);
    const std::string why = error_of([] { resolve(EngineOptions{}); });
    EXPECT_NE(why.find("GEMMTUNE_COMPILE_BUDGET"), std::string::npos) << bad << ": " << why;
  }
  unsetenv("GEMMTUNE_COMPILE_BUDGET");

  env.set("GEMMTUNE_LOG", "loud");
  const std::string why = error_of([] { resolve(EngineOptions{}); });
  EXPECT_NE(why.find("GEMMTUNE_LOG"), std::string::npos) << why;
  EXPECT_NE(why.find("loud"), std::string::npos) << why;

  // An explicit timeout out of range is an Error too.
  unsetenv("GEMMTUNE_LOG");
  CompileOptions huge;
  huge.timeout_s = 1e12;
  EXPECT_NE(error_of([&] { resolve(huge); }).find("timeout"), std::string::npos);
}

TEST_F(Settings, CountsStayPositive) {
  env.set("GEMMTUNE_COMPILE_WORKERS", "0.5");
  env.set("GEMMTUNE_NVCC_JOBS", "0.25");
  CompileOptions c = resolve(CompileOptions{});
  EXPECT_GE(c.workers, 1);
  EXPECT_GE(c.nvcc_jobs, 1);
}

TEST_F(Settings, LogLevels) {
  for (auto [text, level] : std::vector<std::pair<std::string, LogLevel>>{
           {"quiet", LogLevel::quiet}, {"warning", LogLevel::warning}, {"info", LogLevel::info}, {"debug", LogLevel::debug}}) {
    env.set("GEMMTUNE_LOG", text);
    EXPECT_EQ(resolve(EngineOptions{}).log_level, level) << text;
  }
}

TEST_F(Settings, DefaultsWithoutTheEnvironment) {
  env.set("XDG_CACHE_HOME", tmp.path().string());
  EngineOptions o = resolve(EngineOptions{});
  EXPECT_EQ(o.cache_path, tmp.path() / "gemmtune" / "tuning.sqlite");
  EXPECT_EQ(o.max_configs, 0);  // each backend's own default
  EXPECT_EQ(o.log_level, LogLevel::info);
  const CompileOptions& c = o.compile;
  EXPECT_EQ(c.artifacts, tmp.path() / "gemmtune" / "artifacts");
  EXPECT_DOUBLE_EQ(c.timeout_s, 600);
  EXPECT_GE(c.workers, 1);
  EXPECT_LE(c.workers, 32);
  EXPECT_GE(c.nvcc_jobs, 1);
  EXPECT_TRUE(c.load_only.empty());
  EXPECT_FALSE(c.keep_build);
  EXPECT_TRUE(c.fork_server);
  EXPECT_EQ(c.python_dir, repo_root() / "python");
  const fs::path venv = repo_root() / ".venv" / "bin" / "python";
  EXPECT_EQ(c.python, fs::exists(venv) ? venv.string() : std::string("python3"));
  EXPECT_EQ(c.cutlass_kernel_dir, repo_root() / "src" / "backends" / "cutlass" / "kernel");

  // A relative XDG_CACHE_HOME is ignored (the XDG spec): $HOME/.cache then.
  env.set("XDG_CACHE_HOME", "relative/cache");
  const fs::path home = tmp.path() / "home";
  const char* old_home = std::getenv("HOME");
  const std::string saved = old_home ? old_home : "";
  setenv("HOME", home.c_str(), 1);
  const fs::path artifacts = resolve(CompileOptions{}).artifacts;
  if (old_home) setenv("HOME", saved.c_str(), 1);
  else unsetenv("HOME");
  EXPECT_EQ(artifacts, home / ".cache" / "gemmtune" / "artifacts");
}

TEST_F(Settings, FlagsOffWhenZeroOrEmpty) {
  env.set("GEMMTUNE_KEEP_BUILD", "0");
  env.set("GEMMTUNE_COMPILE_FORK_SERVER", "1");
  CompileOptions c = resolve(CompileOptions{});
  EXPECT_FALSE(c.keep_build);
  EXPECT_TRUE(c.fork_server);
  env.set("GEMMTUNE_DEBUG", "0");
  EXPECT_FALSE(debug_locations());
  env.set("GEMMTUNE_DEBUG", "1");
  EXPECT_TRUE(debug_locations());
}

// core/settings.cpp is the library's one reader of the environment.
TEST(SettingsSource, NoOtherLibrarySourceCallsGetenv) {
  const fs::path root = repo_root();
  ASSERT_TRUE(fs::exists(root / "src" / "core" / "settings.cpp")) << root;
  std::vector<std::string> offenders;
  size_t scanned = 0;
  for (const char* top : {"src", "include"}) {
    if (!fs::is_directory(root / top)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      if (!e.is_regular_file()) continue;
      const fs::path rel = fs::relative(e.path(), root);
      ++scanned;
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("getenv(") != std::string::npos && rel != fs::path("src/core/settings.cpp"))
        offenders.push_back(rel.string());
    }
  }
  EXPECT_GT(scanned, 20u);
  EXPECT_TRUE(offenders.empty()) << "getenv( outside src/core/settings.cpp: " << ::testing::PrintToString(offenders);
}

}  // namespace
}  // namespace gemmtune
