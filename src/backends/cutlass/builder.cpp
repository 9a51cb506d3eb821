// The CUTLASS backend's compile side (see builder.hpp).
#include "backends/cutlass/builder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "compile/compile_util.hpp"
#include "core/paths.hpp"
#include "gemmtune/error.hpp"
#include "store/sha256.hpp"

extern char** environ;

namespace gemmtune::cutlass_backend {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

std::string env(const char* name) { return env_or_empty(name); }

// This file is src/backends/cutlass/builder.cpp (CMake passes absolute paths): the kernel
// headers sit next to it and the repository root is three levels up.
fs::path source_dir() { return fs::path(__FILE__).parent_path(); }
fs::path repo_root() { return source_dir().parent_path().parent_path().parent_path(); }

// CUTLASS's include directory under `dir` (a CUTLASS checkout / wheel's source dir, or the
// include dir itself), or empty.
fs::path cutlass_include_under(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "include" / "cutlass" / "version.h", ec)) return dir / "include";
  if (fs::exists(dir / "cutlass" / "version.h", ec)) return dir;
  return {};
}

// site-packages/cutlass_library/source of a virtual environment, or empty.
fs::path venv_cutlass(const fs::path& venv) {
  std::error_code ec;
  fs::path lib = venv / "lib";
  if (!fs::is_directory(lib, ec)) return {};
  for (const auto& e : fs::directory_iterator(lib, ec)) {
    fs::path src = e.path() / "site-packages" / "cutlass_library" / "source";
    if (e.path().filename().string().rfind("python", 0) == 0 && !cutlass_include_under(src).empty()) return src;
  }
  return {};
}

// The CUTLASS include dir, or empty with `why` saying where it looked.
fs::path find_cutlass(std::string& why) {
  if (std::string d = env("GEMMTUNE_CUTLASS_DIR"); !d.empty()) {
    fs::path inc = cutlass_include_under(d);
    if (inc.empty()) why = "GEMMTUNE_CUTLASS_DIR=" + d + " holds no include/cutlass/version.h";
    return inc;
  }
  for (const fs::path& venv : {fs::path(env("VIRTUAL_ENV")), repo_root() / ".venv"}) {
    if (venv.empty()) continue;
    if (fs::path src = venv_cutlass(venv); !src.empty()) return src / "include";
  }
  why = "no CUTLASS headers (pip install --no-deps -r python/requirements-cutlass.txt into " +
        (repo_root() / ".venv").string() + ", or set GEMMTUNE_CUTLASS_DIR)";
  return {};
}

fs::path find_nvcc() {
  std::error_code ec;
  if (std::string p = env("GEMMTUNE_NVCC"); !p.empty()) return p;
  for (const fs::path& home : {fs::path(env("CUDA_HOME")), fs::path("/usr/local/cuda")}) {
    if (home.empty()) continue;
    if (fs::exists(home / "bin" / "nvcc", ec)) return home / "bin" / "nvcc";
  }
  return {};
}

std::string cutlass_version_of(const fs::path& include) {
  auto text = slurp(include / "cutlass" / "version.h");
  if (!text) return "";
  auto num = [&](const char* name) {
    std::smatch m;
    std::regex re(std::string("#define\\s+") + name + "\\s+(\\d+)");
    return std::regex_search(*text, m, re) ? m[1].str() : std::string("?");
  };
  return num("CUTLASS_MAJOR") + "." + num("CUTLASS_MINOR") + "." + num("CUTLASS_PATCH");
}

// "13.0.88" from nvcc's "Cuda compilation tools, release 13.0, V13.0.88".
std::string nvcc_short_version(const std::string& text) {
  std::smatch m;
  static const std::regex re("V(\\d+\\.\\d+\\.\\d+)");
  return std::regex_search(text, m, re) ? m[1].str() : "unknown";
}

// The lines of nvcc's output that say what went wrong (errors first), at most ~3 KB.
std::string nvcc_message(const std::string& log) {
  std::istringstream in(log);
  std::string line, errors;
  while (std::getline(in, line))
    if (line.find("error") != std::string::npos && errors.size() < 3000) errors += line + "\n";
  std::string msg = errors.empty() ? log.substr(log.size() > 3000 ? log.size() - 3000 : 0) : errors;
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

}  // namespace

// ---- Toolchain ----------------------------------------------------------------------------------

std::vector<std::string> nvcc_flags() {
  // -cudart static (nvcc's default, said explicitly): the GPU machine has a driver but no CUDA
  // toolkit, so a .so needing libcudart.so.13 would not load there; the main binaries link the
  // static runtime for the same reason. Hidden visibility keeps each .so's runtime and template
  // symbols to itself (several are dlopen'ed into one process); only gt_cutlass_* are exported.
  // --strip-all drops the static symbol table (the dynamic one, with the entry points, stays):
  // 1.06 -> 0.75 MB per .so, which matters when a kernel pack is carried to another machine.
  return {"-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "--expt-relaxed-constexpr",
          "-DNDEBUG", "-shared", "-Xcompiler=-fPIC", "-Xcompiler=-fvisibility=hidden", "-cudart=static",
          "-Xlinker=--exclude-libs=ALL", "-Xlinker=--strip-all"};
}

std::string Toolchain::fingerprint() const {
  nlohmann::json j{{"format", kKeyFormat},
                   {"nvcc", nvcc_version_text},
                   {"cutlass", cutlass_version},
                   {"kernel", kernel_digest},
                   {"flags", flags}};
  return j.dump();
}

nlohmann::json Toolchain::to_json() const {
  return {{"format", kKeyFormat}, {"nvcc", nvcc_version_text}, {"nvcc_version", nvcc_version},
          {"cutlass", cutlass_version}, {"kernel", kernel_digest}, {"flags", flags}};
}

Toolchain Toolchain::from_json(const nlohmann::json& j) {
  Toolchain t;
  t.nvcc_version_text = j.at("nvcc").get<std::string>();
  t.nvcc_version = j.value("nvcc_version", nvcc_short_version(t.nvcc_version_text));
  t.cutlass_version = j.at("cutlass").get<std::string>();
  t.kernel_digest = j.at("kernel").get<std::string>();
  t.flags = j.at("flags").get<std::vector<std::string>>();
  t.load_only = true;
  return t;
}

// ---- Builder ------------------------------------------------------------------------------------

BuilderOptions BuilderOptions::defaults(std::function<void(const std::string&)> log) {
  BuilderOptions o;
  o.log = std::move(log);
  o.jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  if (std::string j = env("GEMMTUNE_NVCC_JOBS"); !j.empty()) o.jobs = std::max(1, std::atoi(j.c_str()));
  if (std::string t = env("GEMMTUNE_NVCC_TIMEOUT"); !t.empty() && std::atof(t.c_str()) > 0) o.timeout_s = std::atof(t.c_str());
  return o;
}

Builder::Builder(BuilderOptions options) : opt_(std::move(options)) {
  try {
    store_ = std::make_unique<ArtifactStore>(opt_.artifacts, opt_.log);
  } catch (const Error& e) {
    available_ = Verdict::no("no artifact store: " + e.message());
    return;
  }
  const fs::path record = store_->root() / "cutlass" / "toolchain.json";

  // Build mode: nvcc, CUTLASS and our kernel headers all present.
  std::string why_cutlass;
  fs::path include = find_cutlass(why_cutlass);
  fs::path nvcc = find_nvcc();
  fs::path kernel_dir = env("GEMMTUNE_CUTLASS_KERNEL_DIR").empty() ? source_dir() / "kernel"
                                                                   : fs::path(env("GEMMTUNE_CUTLASS_KERNEL_DIR"));
  auto header = slurp(kernel_dir / "sm90_gemm.cuh");
  auto abi = slurp(kernel_dir / "gt_cutlass_abi.h");
  std::string why;
  if (nvcc.empty()) why = "no nvcc (set GEMMTUNE_NVCC or CUDA_HOME)";
  else if (include.empty()) why = why_cutlass;
  else if (!header || !abi) why = "kernel headers not found in " + kernel_dir.string() + " (set GEMMTUNE_CUTLASS_KERNEL_DIR)";

  if (why.empty()) {
    Toolchain& t = toolchain_;
    t.nvcc = nvcc;
    t.cutlass_include = include;
    t.cutlass_util_include = include.parent_path() / "tools" / "util" / "include";
    t.cutlass_version = cutlass_version_of(include);
    t.kernel_dir = kernel_dir;
    Sha256 h;
    h.update("sm90_gemm.cuh\n"), h.update(*header), h.update("\ngt_cutlass_abi.h\n"), h.update(*abi);
    t.kernel_digest = h.hex();
    t.flags = nvcc_flags();
    try {
      fs::path dir = store_->root() / "cutlass" / "tmp";
      fs::create_directories(dir);
      fs::path log = dir / ("nvcc-version-" + std::to_string(getpid()) + ".txt");
      bool timed_out = false;
      int rc = run_process({nvcc.string(), "--version"}, log, 30, &timed_out);
      t.nvcc_version_text = slurp(log).value_or("");
      fs::remove(log);
      if (rc != 0) why = nvcc.string() + " --version failed (exit " + std::to_string(rc) + ")";
    } catch (const std::exception& e) {
      why = std::string("cannot run nvcc: ") + e.what();
    }
    t.nvcc_version = nvcc_short_version(t.nvcc_version_text);
    if (why.empty()) {
      // Record the toolchain next to the artifacts it keys (for load-only machines).
      try {
        std::string text = t.to_json().dump(2) + "\n";
        if (slurp(record).value_or("") != text) write_atomically(record, text, "cutlass");
      } catch (const std::exception& e) {
        if (opt_.log) opt_.log(std::string("cutlass: warning: cannot record the toolchain: ") + e.what());
      }
      available_ = Verdict::yes();
      return;
    }
  }

  // Load-only mode: a store made on another machine (a kernel pack) with its toolchain record.
  if (auto text = slurp(record)) {
    try {
      toolchain_ = Toolchain::from_json(nlohmann::json::parse(*text));
      available_ = Verdict::yes();
      return;
    } catch (const std::exception& e) {
      why += "; " + record.string() + " is unreadable: " + e.what();
    }
  }
  toolchain_ = Toolchain{};
  available_ = Verdict::no(why);
}

std::string Builder::version() const {
  return "cutlass=" + toolchain_.cutlass_version + " nvcc=" + toolchain_.nvcc_version +
         " kernel=" + toolchain_.kernel_digest.substr(0, 12);
}

std::string Builder::key(const InstanceSpec& spec) const {
  return ArtifactStore::make_key(toolchain_.fingerprint() + "\n" + spec.source());
}

bool Builder::cached(const InstanceSpec& spec) { return available_ && store_->get(key(spec)).has_value(); }

Built Builder::build(const InstanceSpec& spec) {
  GT_CHECK(available_, "cutlass: not available: " + available_.reason);
  const std::string k = key(spec);
  if (auto a = store_->get(k)) return Built{std::move(*a), 0, true};
  if (toolchain_.load_only)
    GT_THROW("cutlass: " + spec.config.id() + " (" + spec.text() +
             ") is not in the artifact store and this machine cannot compile (load-only: no nvcc or CUTLASS)");

  return flights_.run(k, [&] { return compile_miss(k, spec); });
}

void Builder::acquire_job() {
  std::unique_lock<std::mutex> lock(mu_);
  job_freed_.wait(lock, [&] { return jobs_running_ < std::max(1, opt_.jobs); });
  ++jobs_running_;
}

void Builder::release_job() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --jobs_running_;
  }
  job_freed_.notify_one();
}

Built Builder::compile_miss(const std::string& key, const InstanceSpec& spec) {
  static std::atomic<int> counter{0};
  const Toolchain& t = toolchain_;
  fs::path dir = store_->root() / "cutlass" / "tmp" /
                 (key.substr(0, 16) + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      const char* keep = std::getenv("GEMMTUNE_CUTLASS_KEEP_BUILD");
      if (!(keep && *keep && std::string(keep) != "0")) fs::remove_all(dir, ec);
    }
  } cleanup{dir};

  write_atomically(dir / "kernel.cu", spec.source(), "cutlass");
  std::vector<std::string> argv{t.nvcc.string()};
  argv.insert(argv.end(), t.flags.begin(), t.flags.end());
  for (const fs::path& inc : {t.kernel_dir, t.cutlass_include, t.cutlass_util_include}) argv.push_back("-I" + inc.string());
  argv.push_back((dir / "kernel.cu").string());
  argv.push_back("-o");
  argv.push_back((dir / "kernel.so").string());

  acquire_job();
  auto t0 = Clock::now();
  bool timed_out = false;
  int rc = -1;
  try {
    rc = run_process(argv, dir / "nvcc.log", opt_.timeout_s, &timed_out);
  } catch (...) {
    release_job();
    throw;
  }
  release_job();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string what = "cutlass: " + spec.config.id() + " (" + spec.text() + ")";
  if (timed_out)
    GT_THROW(what + ": nvcc timed out after " + std::to_string(int(opt_.timeout_s)) + " s (GEMMTUNE_NVCC_TIMEOUT)");
  if (rc != 0)
    GT_THROW(what + ": nvcc failed (exit " + std::to_string(rc) + "): " +
             nvcc_message(slurp(dir / "nvcc.log").value_or("")));
  auto bytes = slurp(dir / "kernel.so");
  GT_CHECK(bytes && !bytes->empty(), what + ": nvcc succeeded but wrote no shared object");

  nlohmann::json meta{{"backend", "cutlass"},
                      {"instance", spec.text()},
                      {"config", spec.config.id()},
                      {"toolchain", t.to_json()},
                      {"nvcc_s", secs}};
  if (opt_.log) opt_.log("cutlass: built " + spec.config.id() + " in " + std::to_string(secs).substr(0, 5) + " s");
  return Built{store_->put(key, std::move(*bytes), std::move(meta)), secs, false};
}

// ---- processes ----------------------------------------------------------------------------------

int run_process(const std::vector<std::string>& argv, const fs::path& log_file, double timeout_s, bool* timed_out) {
  if (timed_out) *timed_out = false;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // Its own process group, so that a timeout kills nvcc's children (cicc, ptxas) too.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) GT_THROW("cannot start " + argv[0] + ": " + std::strerror(err));

  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) GT_THROW("waitpid failed for " + argv[0] + ": " + std::strerror(errno));
    if (Clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (timed_out) *timed_out = true;
      return 128 + SIGKILL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace gemmtune::cutlass_backend
