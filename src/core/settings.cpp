// The one reader of the GEMMTUNE_* environment (settings.hpp).
#include "core/settings.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

#include "gemmtune/error.hpp"

#ifndef GEMMTUNE_PYTHON_DIR
#define GEMMTUNE_PYTHON_DIR ""
#endif
#ifndef GEMMTUNE_SOURCE_DIR
#define GEMMTUNE_SOURCE_DIR ""
#endif

namespace gemmtune {
namespace fs = std::filesystem;
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// $name as a number > 0, or `fallback` when unset or empty; Error when it is something else.
double env_number(const char* name, double fallback) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  GT_CHECK_INVALID(errno == 0 && end && *end == '\0' && x > 0 && x < 1e9,
           std::string("$") + name + ": '" + v + "' is not a positive number below 1e9");
  return x;
}

bool env_flag(const char* name) {
  const std::string v = env(name);
  return !v.empty() && v != "0";
}

std::vector<std::string> env_list(const char* name) {
  std::vector<std::string> out;
  std::stringstream in(env(name));
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string home_dir() {
  if (std::string home = env("HOME"); !home.empty()) return home;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir) return found->pw_dir;
  return "";
}

int cores() { return int(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

fs::path user_cache_path(const char* override_var, const char* leaf) {
  if (std::string p = env(override_var); !p.empty()) return p;
  if (fs::path xdg = env("XDG_CACHE_HOME"); xdg.is_absolute()) return xdg / "gemmtune" / leaf;
  const std::string home = home_dir();
  GT_CHECK(!home.empty(), std::string("none of ") + override_var + ", XDG_CACHE_HOME, HOME is set: no place for " + leaf);
  return fs::path(home) / ".cache" / "gemmtune" / leaf;
}

fs::path store_key_path() {
  if (std::string p = env("GEMMTUNE_STORE_KEY"); !p.empty()) return p;
  if (fs::path xdg = env("XDG_CONFIG_HOME"); xdg.is_absolute()) return xdg / "gemmtune" / "store.key";
  const std::string home = home_dir();
  GT_CHECK(!home.empty(), "none of GEMMTUNE_STORE_KEY, XDG_CONFIG_HOME, HOME is set: no place for the store key");
  return fs::path(home) / ".config" / "gemmtune" / "store.key";
}

std::string inherited_pythonpath() { return env("PYTHONPATH"); }

bool debug_locations() { return env_flag("GEMMTUNE_DEBUG"); }

CompileOptions resolve(CompileOptions o) {
  if (o.artifacts.empty()) o.artifacts = user_cache_path("GEMMTUNE_ARTIFACTS", "artifacts");
  if (o.store_key.empty()) {
    try {
      o.store_key = store_key_path();
    } catch (const Error&) {  // no home: the store says so when it needs the key
    }
  }
  if (o.workers <= 0) o.workers = std::max(1, int(env_number("GEMMTUNE_COMPILE_WORKERS", std::min(cores(), 32))));
  if (o.nvcc_jobs <= 0) o.nvcc_jobs = std::max(1, int(env_number("GEMMTUNE_NVCC_JOBS", cores())));
  if (o.timeout_s <= 0) o.timeout_s = env_number("GEMMTUNE_COMPILE_TIMEOUT", 600);
  GT_CHECK_INVALID(o.timeout_s < 1e9, "compile.timeout_s: " + std::to_string(o.timeout_s) + " is not below 1e9 s");
  for (const std::string& t : env_list("GEMMTUNE_LOAD_ONLY"))
    if (std::find(o.load_only.begin(), o.load_only.end(), t) == o.load_only.end()) o.load_only.push_back(t);
  if (o.python_dir.empty()) o.python_dir = env("GEMMTUNE_PYTHON_DIR");
  if (o.python_dir.empty()) o.python_dir = GEMMTUNE_PYTHON_DIR;
  if (o.python.empty()) o.python = env("GEMMTUNE_PYTHON");
  if (o.python.empty()) {
    std::error_code ec;
    const fs::path venv = o.python_dir.parent_path() / ".venv" / "bin" / "python";
    o.python = !o.python_dir.empty() && fs::exists(venv, ec) ? venv.string() : "python3";
  }
  if (o.nvcc.empty()) o.nvcc = env("GEMMTUNE_NVCC");
  if (o.nvcc.empty()) {
    std::error_code ec;
    for (const fs::path& home : {fs::path(env("CUDA_HOME")), fs::path("/usr/local/cuda")})
      if (!home.empty() && fs::exists(home / "bin" / "nvcc", ec)) {
        o.nvcc = home / "bin" / "nvcc";
        break;
      }
  }
  if (o.cutlass_dir.empty()) o.cutlass_dir = env("GEMMTUNE_CUTLASS_DIR");
  if (o.cutlass_dir.empty()) {
    // site-packages/cutlass_library/source of $VIRTUAL_ENV or <repo>/.venv, where
    // `pip install --no-deps nvidia-cutlass` puts the headers.
    std::error_code ec;
    for (const fs::path& venv : {fs::path(env("VIRTUAL_ENV")), fs::path(GEMMTUNE_SOURCE_DIR) / ".venv"}) {
      if (venv.empty() || !fs::is_directory(venv / "lib", ec)) continue;
      for (const auto& e : fs::directory_iterator(venv / "lib", ec)) {
        const fs::path src = e.path() / "site-packages" / "cutlass_library" / "source";
        if (e.path().filename().string().rfind("python", 0) == 0 && fs::exists(src / "include" / "cutlass" / "version.h", ec)) {
          o.cutlass_dir = src;
          break;
        }
      }
      if (!o.cutlass_dir.empty()) break;
    }
  }
  if (o.cutlass_kernel_dir.empty()) o.cutlass_kernel_dir = env("GEMMTUNE_CUTLASS_KERNEL_DIR");
  if (o.cutlass_kernel_dir.empty()) o.cutlass_kernel_dir = fs::path(GEMMTUNE_SOURCE_DIR) / "src" / "backends" / "cutlass" / "kernel";
  o.keep_build = o.keep_build || env_flag("GEMMTUNE_KEEP_BUILD");
  o.fork_server = o.fork_server && env("GEMMTUNE_COMPILE_FORK_SERVER") != "0";
  return o;
}

EngineOptions resolve(EngineOptions o) {
  if (o.use_cache && o.cache_path.empty()) o.cache_path = user_cache_path("GEMMTUNE_CACHE", "tuning.sqlite");
  if (o.max_configs <= 0) o.max_configs = int(env_number("GEMMTUNE_MAX_CONFIGS", 0));
  if (o.log_level == LogLevel::info) {
    const std::string v = env("GEMMTUNE_LOG");
    if (v == "quiet") o.log_level = LogLevel::quiet;
    else if (v == "warning") o.log_level = LogLevel::warning;
    else if (v == "debug") o.log_level = LogLevel::debug;
    else GT_CHECK_INVALID(v.empty() || v == "info", "$GEMMTUNE_LOG: '" + v + "' is not one of quiet, warning, info, debug");
  }
  if (o.remote_cache.empty()) o.remote_cache = env("GEMMTUNE_REMOTE_CACHE");
  if (o.remote_timeout_ms <= 0) o.remote_timeout_ms = env_number("GEMMTUNE_REMOTE_TIMEOUT_MS", 50);
  GT_CHECK_INVALID(o.remote_timeout_ms <= 60'000,
                   "remote_timeout_ms: " + std::to_string(o.remote_timeout_ms) + " is above 60000 ms");
  o.compile = resolve(std::move(o.compile));
  return o;
}

}  // namespace gemmtune
