// The one reader of the GEMMTUNE_* environment (settings.hpp).
#include "core/settings.hpp"

#include <dlfcn.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "gemmtune/error.hpp"

#ifndef GEMMTUNE_PYTHON_DIR
#define GEMMTUNE_PYTHON_DIR ""
#endif
#ifndef GEMMTUNE_SOURCE_DIR
#define GEMMTUNE_SOURCE_DIR ""
#endif
#ifndef GEMMTUNE_BUILD_DIR
#define GEMMTUNE_BUILD_DIR ""
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

// The file this code is linked into: libgemmtune_c.so, or the executable (the CLI, a test).
fs::path own_binary() {
  std::error_code ec;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_binary), &info) && info.dli_fname &&
      std::string_view(info.dli_fname).find('/') != std::string_view::npos) {
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p;
  }
  fs::path exe = fs::canonical("/proc/self/exe", ec);  // the main program (dladdr gives argv[0])
  return ec ? fs::path() : exe;
}

// Where this copy's own files are (computed once): an installed copy's Python package (with the
// CUTLASS kernel headers inside it), or, only for a binary still inside the build tree it was
// built in, the source tree's. D20: an installed binary never trusts build-tree paths.
struct Home {
  fs::path python_dir;          // holds gemmtune/worker.py
  fs::path cutlass_kernel_dir;  // holds sm90_gemm.cuh
  fs::path source_venv;         // <source>/.venv (build tree only)
};

Home locate_home() {
  Home h;
  const fs::path bin = own_binary();
  if (const fs::path python = installed_python_dir(bin.parent_path()); !python.empty()) {
    h.python_dir = python;
    h.cutlass_kernel_dir = python / "gemmtune" / "cutlass_kernel";
    return h;
  }
  if (runs_from_build_tree(bin, GEMMTUNE_BUILD_DIR)) {
    h.python_dir = GEMMTUNE_PYTHON_DIR;
    h.cutlass_kernel_dir = fs::path(GEMMTUNE_SOURCE_DIR) / "src" / "backends" / "cutlass" / "kernel";
    h.source_venv = fs::path(GEMMTUNE_SOURCE_DIR) / ".venv";
  }
  return h;
}

const Home& home() {
  static const Home h = locate_home();
  return h;
}

}  // namespace

bool writable_by_others(const fs::path& path) {
  std::error_code ec;
  for (fs::path p = fs::absolute(path, ec); !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) return true;
    if (p == p.parent_path()) break;
  }
  return false;
}

fs::path installed_python_dir(const fs::path& binary_dir) {
  if (binary_dir.empty()) return {};
  std::error_code ec;
  const fs::path candidates[] = {binary_dir / ".." / "share" / "gemmtune" / "python",  // cmake --install
                                 binary_dir / "..",                                    // wheel: gemmtune/libgemmtune_c.so
                                 binary_dir / ".." / ".."};                            // wheel: gemmtune/_bin/gemmtune
  for (const fs::path& c : candidates)
    if (fs::is_regular_file(c / "gemmtune" / "worker.py", ec) && !writable_by_others(c)) return fs::canonical(c, ec);
  return {};
}

bool runs_from_build_tree(const fs::path& binary, const fs::path& build_dir) {
  if (binary.empty() || build_dir.empty()) return false;
  std::error_code ec;
  const fs::path build = fs::canonical(build_dir, ec);
  if (ec) return false;
  const fs::path rel = binary.lexically_relative(build);
  return !rel.empty() && *rel.begin() != "..";
}

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

std::vector<fs::path> executable_path() {
  std::vector<fs::path> out;
  std::stringstream in(env("PATH"));
  for (std::string dir; std::getline(in, dir, ':');)
    if (!dir.empty()) out.push_back(dir);
  return out;
}

CompileOptions resolve(CompileOptions o) {
  if (o.artifacts.empty()) o.artifacts = user_cache_path("GEMMTUNE_ARTIFACTS", "artifacts");
  // A relative store (`--artifacts store`) means the one under the current directory: made
  // absolute here, once, because the compile workers (other processes) write into it.
  if (std::error_code ec; o.artifacts.is_relative()) {
    fs::path abs = fs::absolute(o.artifacts, ec);
    GT_CHECK_INVALID(!ec, "compile.artifacts: '" + o.artifacts.string() + "' cannot be made absolute: " + ec.message());
    o.artifacts = abs;
  }
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
  if (o.python_dir.empty()) o.python_dir = home().python_dir;
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
    // site-packages/cutlass_library/source of $VIRTUAL_ENV or (from the build tree) <repo>/.venv,
    // where `pip install --no-deps nvidia-cutlass` puts the headers.
    std::error_code ec;
    for (const fs::path& venv : {fs::path(env("VIRTUAL_ENV")), home().source_venv}) {
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
  if (o.cutlass_kernel_dir.empty()) o.cutlass_kernel_dir = home().cutlass_kernel_dir;
  o.keep_build = o.keep_build || env_flag("GEMMTUNE_KEEP_BUILD");
  o.fork_server = o.fork_server && env("GEMMTUNE_COMPILE_FORK_SERVER") != "0";
  return o;
}

EngineOptions resolve(EngineOptions o) {
  if (o.use_cache && o.cache_path.empty()) o.cache_path = user_cache_path("GEMMTUNE_CACHE", "tuning.sqlite");
  if (o.max_configs <= 0) o.max_configs = int(env_number("GEMMTUNE_MAX_CONFIGS", 0));
  if (o.compile_budget == 0) {
    // The best 8 by the cost model kept every pick of the s4 suite within 0.6% of the full
    // list's (bench/results/2026-12-02-s9-compile-budget.md).
    const std::string v = env("GEMMTUNE_COMPILE_BUDGET");
    const double x = v.empty() || v == "all" ? 0 : env_number("GEMMTUNE_COMPILE_BUDGET", 0);
    GT_CHECK_INVALID(v.empty() || v == "all" || (x == std::floor(x) && x <= 4096),
                     "$GEMMTUNE_COMPILE_BUDGET: '" + v + "' is not 'all' or a whole number of candidates in [1, 4096]");
    o.compile_budget = v.empty() ? 8 : v == "all" ? -1 : int(x);
  }
  if (o.compile_budget < 0) o.compile_budget = -1;
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
  if (o.isolation.mode == Isolation::process) {
    const std::string v = env("GEMMTUNE_ISOLATION");
    if (v == "in-process" || v == "in_process") o.isolation.mode = Isolation::in_process;
    else GT_CHECK_INVALID(v.empty() || v == "process", "$GEMMTUNE_ISOLATION: '" + v + "' is not one of process, in-process");
  }
  if (o.isolation.helper.empty()) o.isolation.helper = env("GEMMTUNE_TUNER");
  if (o.isolation.candidate_timeout_s <= 0) o.isolation.candidate_timeout_s = env_number("GEMMTUNE_CANDIDATE_TIMEOUT", 30);
  return o;
}

}  // namespace gemmtune
