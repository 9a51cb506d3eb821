// The nvcc toolchain of the CUTLASS backend (nvcc.hpp).
#include "compile/nvcc.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "compile/compile_util.hpp"
#include "compile/process.hpp"
#include "gemmtune/error.hpp"
#include "store/secure_fs.hpp"
#include "store/sha256.hpp"

namespace gemmtune::compile {
namespace fs = std::filesystem;
using nlohmann::json;

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

size_t nvcc_group_limit(double available_gb, size_t slots) {
  const double per_run = 0.75 * available_gb / double(std::max<size_t>(1, slots));
  const double g = 1.0 + (per_run - 3.2) / 0.6;
  return g < 1.0 ? 1 : g > 8.0 ? 8 : size_t(g);
}

namespace {

constexpr int kKeyFormat = 1;

// MemAvailable of /proc/meminfo in GB; 0 when unknown (then no groups).
double available_memory_gb() {
  std::ifstream in("/proc/meminfo");
  std::string name;
  double kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit)
    if (name == "MemAvailable:") return kb / (1024.0 * 1024.0);
  return 0;
}

// CUTLASS's include directory under `dir` (a CUTLASS checkout / wheel's source dir, or the
// include dir itself), or empty.
fs::path cutlass_include_under(const fs::path& dir) {
  std::error_code ec;
  if (dir.empty()) return {};
  if (fs::exists(dir / "include" / "cutlass" / "version.h", ec)) return dir / "include";
  if (fs::exists(dir / "cutlass" / "version.h", ec)) return dir;
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

class NvccToolchain final : public Toolchain {
 public:
  explicit NvccToolchain(const CompileOptions& o) : opt_(o) {}

  std::string name() const override { return "cutlass"; }

  Verdict probe() override {
    const fs::path include = cutlass_include_under(opt_.cutlass_dir);
    auto header = slurp(opt_.cutlass_kernel_dir / "sm90_gemm.cuh");
    auto grouped = slurp(opt_.cutlass_kernel_dir / "sm90_grouped.cuh");
    auto abi = slurp(opt_.cutlass_kernel_dir / "gt_cutlass_abi.h");
    std::error_code ec;
    if (opt_.nvcc.empty() || !fs::exists(opt_.nvcc, ec))
      return Verdict::no("no nvcc" + (opt_.nvcc.empty() ? std::string() : " at " + opt_.nvcc.string()) +
                         " (set compile.nvcc, $GEMMTUNE_NVCC or $CUDA_HOME)");
    if (include.empty())
      return Verdict::no(opt_.cutlass_dir.empty()
                             ? "no CUTLASS headers (pip install --no-deps -r python/requirements-cutlass.txt into the "
                               "repository's .venv, or set compile.cutlass_dir / $GEMMTUNE_CUTLASS_DIR)"
                             : "compile.cutlass_dir " + opt_.cutlass_dir.string() + " holds no include/cutlass/version.h");
    if (!header || !grouped || !abi)
      return Verdict::no("kernel headers not found in " + opt_.cutlass_kernel_dir.string() +
                         " (set compile.cutlass_kernel_dir / $GEMMTUNE_CUTLASS_KERNEL_DIR)");
    include_ = include;
    util_include_ = include.parent_path() / "tools" / "util" / "include";
    cutlass_version_ = cutlass_version_of(include);
    Sha256 h;
    h.update("sm90_gemm.cuh\n"), h.update(*header), h.update("\nsm90_grouped.cuh\n"), h.update(*grouped);
    h.update("\ngt_cutlass_abi.h\n"), h.update(*abi);
    kernel_digest_ = h.hex();
    flags_ = nvcc_flags();
    const fs::path dir = opt_.artifacts / "cutlass" / "tmp";
    securefs::make_private_dirs(dir);
    const fs::path log = dir / ("nvcc-version-" + std::to_string(getpid()) + ".txt");
    bool timed_out = false;
    const int rc = run_process({opt_.nvcc.string(), "--version"}, log, 30, &timed_out);
    nvcc_text_ = slurp(log).value_or("");
    fs::remove(log, ec);
    nvcc_version_ = nvcc_short_version(nvcc_text_);
    if (rc != 0) return Verdict::no(opt_.nvcc.string() + " --version failed (exit " + std::to_string(rc) + ")");
    return Verdict::yes();
  }

  json record() const override {
    return {{"format", kKeyFormat}, {"nvcc", nvcc_text_}, {"nvcc_version", nvcc_version_},
            {"cutlass", cutlass_version_}, {"kernel", kernel_digest_}, {"flags", flags_}};
  }
  void restore(const json& j) override {
    nvcc_text_ = j.at("nvcc").get<std::string>();
    nvcc_version_ = j.value("nvcc_version", nvcc_short_version(nvcc_text_));
    cutlass_version_ = j.at("cutlass").get<std::string>();
    kernel_digest_ = j.at("kernel").get<std::string>();
    flags_ = j.at("flags").get<std::vector<std::string>>();
  }

  std::string version() const override {
    return "cutlass=" + cutlass_version_ + " nvcc=" + nvcc_version_ + " kernel=" + kernel_digest_.substr(0, 12);
  }

  std::string key_material(const Job& job) const override {
    const json fingerprint{{"format", kKeyFormat},
                           {"nvcc", nvcc_text_},
                           {"cutlass", cutlass_version_},
                           {"kernel", kernel_digest_},
                           {"flags", flags_}};
    return fingerprint.dump() + "\n" + job.source;
  }

  // Measured on the 2-core machine (bench/results/2026-12-04-s19-compile-cutlass-groups.md): one
  // bf16 instance alone 22-27 s, 2 in one run 27.5 s, 4 39 s, 8 63 s, each kernel's SASS the
  // same as built alone. At most 8, and fewer where the memory would not hold the runs at once.
  size_t group_limit() const override { return nvcc_group_limit(available_memory_gb(), slots()); }
  size_t slots() const override { return size_t(std::max(1, opt_.nvcc_jobs)); }

  Output compile(const Job& job, const fs::path& tmp, double timeout_s) override {
    return std::move(compile_group({job}, tmp, timeout_s).front());
  }

  // One translation unit includes every member's source with GT_CUTLASS_MEMBER set to m0, m1, ...
  // (gt_cutlass_abi.h): nvcc -c builds it once; each member's .so is that object linked with the
  // member's selector, which exports its entry points under the ABI's names.
  std::vector<Output> compile_group(const std::vector<Job>& jobs, const fs::path& tmp, double timeout_s) override {
    GT_CHECK(!jobs.empty(), "cutlass: an empty group");
    std::string unit = "// A group of " + std::to_string(jobs.size()) + " CUTLASS instances (src/compile/nvcc.cpp).\n";
    for (size_t i = 0; i < jobs.size(); ++i) {
      const std::string m = "m" + std::to_string(i);
      write_atomically(tmp / (m + ".cu"), jobs[i].source, "cutlass");
      write_atomically(tmp / (m + "_select.cpp"),
                       "#include \"gt_cutlass_abi.h\"\nextern \"C\" {\nGT_CUTLASS_EXPORT_MEMBER(" + m + ")\n}\n",
                       "cutlass");
      unit += "#define GT_CUTLASS_MEMBER " + m + "\n#include \"" + m + ".cu\"\n#undef GT_CUTLASS_MEMBER\n";
    }
    write_atomically(tmp / "group.cu", unit, "cutlass");
    const std::string what = jobs.size() == 1 ? "cutlass: " + jobs[0].what
                                              : "cutlass: a group of " + std::to_string(jobs.size()) + " (" +
                                                    jobs[0].what + ", ...)";
    // nvcc's flags with -shared as -c for the object (the link flags are ignored there).
    std::vector<std::string> compile_flags = flags_;
    std::replace(compile_flags.begin(), compile_flags.end(), std::string("-shared"), std::string("-c"));
    double secs = 0, cpu = 0;  // nvcc's own wall and CPU time (children included), not the wait for a slot
    {
      Slot slot(*this);
      const auto t0 = std::chrono::steady_clock::now();
      run_nvcc(what, compile_flags, {(tmp / "group.cu").string(), "-o", (tmp / "group.o").string()}, tmp / "nvcc.log",
               timeout_s * double(jobs.size()), cpu);
      for (size_t i = 0; i < jobs.size(); ++i) {
        const std::string m = "m" + std::to_string(i);
        run_nvcc(what + ": linking " + m, flags_,
                 {(tmp / "group.o").string(), (tmp / (m + "_select.cpp")).string(), "-o", (tmp / (m + ".so")).string()},
                 tmp / (m + "_link.log"), timeout_s, cpu);
      }
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::vector<Output> outs(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto bytes = slurp(tmp / ("m" + std::to_string(i) + ".so"));
      GT_CHECK(bytes && !bytes->empty(), what + ": nvcc succeeded but wrote no shared object for " + jobs[i].what);
      Output& out = outs[i];
      out.bytes = std::move(*bytes);
      out.meta = jobs[i].meta;
      out.meta["toolchain"] = record();
      // This artifact's share of the run, and the run itself.
      out.seconds = secs / double(jobs.size());
      out.cpu_seconds = cpu / double(jobs.size());
      out.meta["nvcc_s"] = out.seconds;
      out.meta["cpu_s"] = out.cpu_seconds;
      out.meta["group"] = {{"size", jobs.size()}, {"nvcc_s", secs}, {"cpu_s", cpu}};
    }
    return outs;
  }

 private:
  // nvcc `flags` -I<kernel headers, CUTLASS's> `args` within timeout_s; adds its CPU seconds to
  // `cpu`; throws Error saying `what` failed or timed out, with nvcc's message.
  void run_nvcc(const std::string& what, const std::vector<std::string>& flags, const std::vector<std::string>& args,
                const fs::path& log, double timeout_s, double& cpu) const {
    std::vector<std::string> argv{opt_.nvcc.string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const fs::path& inc : {opt_.cutlass_kernel_dir, include_, util_include_}) argv.push_back("-I" + inc.string());
    argv.insert(argv.end(), args.begin(), args.end());
    bool timed_out = false;
    double used = 0;
    const int rc = run_process(argv, log, timeout_s, &timed_out, &used);
    cpu += used;
    if (timed_out) GT_THROW(what + ": nvcc timed out after " + std::to_string(int(timeout_s)) + " s (compile.timeout_s)");
    if (rc != 0)
      GT_THROW(what + ": nvcc failed (exit " + std::to_string(rc) + "): " + nvcc_message(slurp(log).value_or("")));
  }

  // One of at most options.nvcc_jobs nvcc processes at once (RAII).
  struct Slot {
    explicit Slot(NvccToolchain& t) : t(t) {
      std::unique_lock<std::mutex> lock(t.mu_);
      t.freed_.wait(lock, [&] { return t.running_ < std::max(1, t.opt_.nvcc_jobs); });
      ++t.running_;
    }
    ~Slot() {
      {
        std::lock_guard<std::mutex> lock(t.mu_);
        --t.running_;
      }
      t.freed_.notify_one();
    }
    NvccToolchain& t;
  };

  CompileOptions opt_;
  fs::path include_, util_include_;
  std::string nvcc_text_, nvcc_version_, cutlass_version_, kernel_digest_;
  std::vector<std::string> flags_;
  std::mutex mu_;
  std::condition_variable freed_;
  int running_ = 0;
};

}  // namespace

std::unique_ptr<Toolchain> make_nvcc_toolchain(const CompileOptions& options) {
  return std::make_unique<NvccToolchain>(options);
}

}  // namespace gemmtune::compile
