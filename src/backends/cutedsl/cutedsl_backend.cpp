// The cutedsl backend (see cutedsl_backend.hpp).
//
// Candidates: configs_for(problem) on the engine's device (at most $GEMMTUNE_CUTEDSL_MAX_CONFIGS,
// default 16). A candidate's id is its config id ("128x128c2x1"); with the problem it determines
// the artifact, so load(problem, id) rebuilds it in another process. In load-only mode (a copied
// artifact store, no CuTe DSL here) only configs whose artifact is in the store are candidates.
//
// prepare(): compile (store hit or a worker), load the .so, ask its can_implement for this
// problem. run(): fill the arguments, call the entry point; a non-OK status throws Error with the
// instance's status text. Threads: run() keeps its arguments on the stack and the instance keeps
// no per-run state, so runs on different streams may overlap.
#include "backends/cutedsl/cutedsl_backend.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backends/kernel_library.hpp"
#include "backends/lazy_candidate.hpp"
#include "core/parallel.hpp"
#include "gemmtune/error.hpp"
#include "store/shared_object.hpp"

namespace gemmtune {
namespace cutedsl {
using nlohmann::json;

// ---- Library ------------------------------------------------------------------------------------

namespace {

std::mutex g_libs_mu;
std::map<std::string, std::shared_ptr<const Library>> g_libs;  // by artifact key

constexpr const char* kWho = "cutedsl";  // names the backend in loader errors

}  // namespace

void load_runtime(const Compiled& compiled) {
  static std::mutex mu;
  static std::set<std::string> runtimes;  // keys of the runtime libraries loaded (never unloaded)
  std::lock_guard<std::mutex> lock(mu);
  if (runtimes.count(compiled.runtime.key)) return;
  GT_CHECK(compiled.runtime.bytes,
           "cutedsl: artifact " + compiled.artifact.key.substr(0, 16) + " comes without its runtime");
  dlopen_bytes(kWho, compiled.runtime.key, *compiled.runtime.bytes);
  runtimes.insert(compiled.runtime.key);
}

std::shared_ptr<const Library> Library::open(const Compiled& compiled, const std::string& expect_config) {
  const Artifact& artifact = compiled.artifact;
  std::lock_guard<std::mutex> lock(g_libs_mu);
  load_runtime(compiled);
  if (auto it = g_libs.find(artifact.key); it != g_libs.end()) {
    check_config("cutedsl: artifact", artifact.key, it->second->config(), expect_config);
    return it->second;
  }
  void* h = dlopen_bytes(kWho, artifact.key, *artifact.bytes);
  auto lib = std::make_shared<Library>();
  lib->key = artifact.key;
  auto abi = dlsym_as<gt_cutedsl_abi_version_fn>(h, "gt_cutedsl_abi_version", kWho, artifact.key);
  lib->config = dlsym_as<gt_cutedsl_config_fn>(h, "gt_cutedsl_config", kWho, artifact.key);
  lib->can_implement = dlsym_as<gt_cutedsl_can_implement_fn>(h, "gt_cutedsl_can_implement", kWho, artifact.key);
  lib->run = dlsym_as<gt_cutedsl_run_fn>(h, "gt_cutedsl_run", kWho, artifact.key);
  lib->status_text = dlsym_as<gt_cutedsl_status_text_fn>(h, "gt_cutedsl_status_text", kWho, artifact.key);
  check_abi_version("cutedsl: artifact", artifact.key, abi(), GT_CUTEDSL_ABI_VERSION);
  check_config("cutedsl: artifact", artifact.key, lib->config(), expect_config);
  g_libs[artifact.key] = lib;
  return lib;
}

// ---- shared pieces ------------------------------------------------------------------------------

// Forwards the compiler's warnings to every live backend's log.
LogHub& log_hub() {
  static LogHub* hub = new LogHub;  // never destroyed: the compiler may log during exit
  return *hub;
}

std::shared_ptr<Compiler> shared_compiler() {
  static std::mutex mu;
  static std::shared_ptr<Compiler> compiler;
  std::lock_guard<std::mutex> lock(mu);
  if (!compiler)
    compiler = std::make_shared<Compiler>(CompilerOptions::defaults([](const std::string& m) { log_hub()(m); }));
  return compiler;
}

BackendCompiler::BackendCompiler(const BackendContext& ctx, const std::function<void()>& before)
    : log_id_(log_hub().add(ctx.log)) {
  const DeviceInfo& dev = ctx.device;
  if (dev.index >= 0 && !(dev.cc_major == 9 && dev.cc_minor == 0)) {
    broken_ = "kernels are compiled for sm_90a (Hopper); this device is " + dev.name + " (cc " +
              std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor) + ")";
    return;
  }
  try {
    if (before) before();
    compiler_ = shared_compiler();
  } catch (const Error& e) {  // e.g. kernel sources missing, no home directory for the artifact store
    broken_ = e.message();
    return;
  }
  auto probe = [c = compiler_] { return c->available(); };
  try {
    warm_ = std::async(std::launch::async, probe).share();
  } catch (const std::system_error&) {
    warm_ = std::async(std::launch::deferred, probe).share();
  }
}

BackendCompiler::~BackendCompiler() {
  if (warm_.valid()) warm_.wait();
  log_hub().remove(log_id_);
}

Verdict BackendCompiler::available() const {
  if (!compiler_) return Verdict::no(broken_);
  return warm_.get();
}

int default_max_configs() {
  const char* v = std::getenv("GEMMTUNE_CUTEDSL_MAX_CONFIGS");
  int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 16;
}

// ---- precompile ---------------------------------------------------------------------------------

std::vector<PrecompileItem> precompile(Compiler& compiler, const std::vector<GemmProblem>& problems, int sm_count,
                                       int max_configs, int threads,
                                       const std::function<void(const PrecompileItem&)>& progress,
                                       const std::vector<Config>& only) {
  Verdict av = compiler.available();
  GT_CHECK(av, "cutedsl: not available: " + av.reason);
  std::vector<PrecompileItem> items;
  std::vector<json> todo_params;
  std::set<std::string> seen;
  for (const GemmProblem& p : problems) {
    if (Verdict v = problem_verdict(p); !v) {
      PrecompileItem it;
      it.problem = p.str(), it.error = "does not support: " + v.reason, it.skipped = true;
      items.push_back(std::move(it));
      continue;
    }
    for (const Config& c : only.empty() ? configs_for(p, sm_count, max_configs) : only) {
      PrecompileItem it;
      it.problem = p.str(), it.config = c;
      if (Verdict v = check(c, p); !v) {
        it.error = "cannot run this problem: " + v.reason;
        items.push_back(std::move(it));
        continue;
      }
      json prm = params(c, p);
      std::string key = compiler.key(prm);
      if (!seen.insert(key).second) continue;
      it.params = prm.dump(), it.key = key;
      items.push_back(std::move(it));
      todo_params.push_back(std::move(prm));
    }
  }
  compile_items<PrecompileItem>(compiler, items, todo_params, threads, progress);
  return items;
}

// ---- the backend --------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "cutedsl";
constexpr int kDefaultSms = 132;  // H100 / H200 SXM, when the device reports none

class CutedslCandidate final : public LazyCandidate<GemmOp> {
 public:
  CutedslCandidate(std::shared_ptr<Compiler> compiler, const DeviceInfo& dev, const GemmProblem& p, const Config& c)
      : compiler_(std::move(compiler)), dev_(dev), p_(p), c_(c), params_(params(c, p)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return c_.id(); }
  std::string name() const override { return c_.name(); }

  void run(const GemmArgs& g, cudaStream_t s) override {
    if (!lib_) prepare();
    GtCutedslArgs a = args(g);
    if (int st = lib_->run(&a, s); st != GT_CUTEDSL_OK) GT_THROW("cutedsl: " + id() + ": " + lib_->status_text(st));
  }

 private:
  void prepare_locked() override {
    if (lib_) return;
    Compiled built = compiler_->compile(params_);
    compile_s_ = built.compile_s;
    auto lib = Library::open(built, params_.dump());
    GtCutedslArgs a = args({});
    if (int st = lib->can_implement(&a); st != GT_CUTEDSL_OK)
      GT_THROW("cutedsl: " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    lib_ = std::move(lib);
  }

  GtCutedslArgs args(const GemmArgs& g) const {
    return gemm_abi_args<GtCutedslArgs>(GT_CUTEDSL_ABI_VERSION, dev_, p_, g);
  }

  std::shared_ptr<Compiler> compiler_;
  DeviceInfo dev_;
  GemmProblem p_;
  Config c_;
  json params_;
  std::shared_ptr<const Library> lib_;
};

class CutedslBackend final : public Backend {
 public:
  explicit CutedslBackend(const BackendContext& ctx)
      : dev_(ctx.device), sms_(ctx.device.sm_count > 0 ? ctx.device.sm_count : kDefaultSms), link_(ctx) {}

  std::string name() const override { return kName; }
  std::string version() const override { return compiler() ? compiler()->version() : "unavailable"; }
  Verdict available() const override { return link_.available(); }

  // In load-only mode a problem none of whose artifacts is in the store is not supported:
  // nothing could run it, and callers treat "supported" as "has candidates".
  Verdict supports(const GemmProblem& p) const override {
    if (Verdict v = problem_verdict(p); !v) return v;
    if (configs_for(p, sms_, default_max_configs()).empty()) return Verdict::no("no CuTe DSL config fits this problem");
    if (compiler() && available() && compiler()->load_only() && configs(p).empty())
      return Verdict::no("load-only (no CuTe DSL here) and the artifact store " + compiler()->store().root().string() +
                         " holds none of this problem's artifacts");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<detail::Candidate>> out;
    std::vector<json> prm;
    for (const Config& c : configs(p)) {
      out.push_back(std::make_unique<CutedslCandidate>(compiler(), dev_, p, c));
      prm.push_back(params(c, p));
    }
    if (out.empty() && compiler()->load_only())
      GT_THROW("cutedsl: load-only (no CuTe DSL here) and the artifact store holds none of this problem's artifacts");
    try {
      compiler()->prestart(prm);
    } catch (const Error&) {  // only an optimisation: compiles start workers on demand anyway
    }
    return out;
  }

  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    require(p);
    Config c = Config::parse(id);
    if (Verdict v = check(c, p); !v) GT_THROW("cutedsl: candidate " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<CutedslCandidate>(compiler(), dev_, p, c);
  }

 private:
  const std::shared_ptr<Compiler>& compiler() const { return link_.get(); }  // null when unusable
  // The ranked configs for `p`; in load-only mode only those whose artifact is in the store.
  std::vector<Config> configs(const GemmProblem& p) const {
    std::vector<Config> out;
    const bool load_only = compiler()->load_only();
    for (const Config& c : configs_for(p, sms_, default_max_configs()))
      if (!load_only || compiler()->cached(params(c, p))) out.push_back(c);
    return out;
  }

  void require(const GemmProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "cutedsl: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "cutedsl: does not support " + p.str() + ": " + v.reason);
  }

  DeviceInfo dev_;
  int sms_;
  BackendCompiler link_;
  };

}  // namespace
}  // namespace cutedsl

std::unique_ptr<Backend> make_cutedsl_backend(const BackendContext& ctx) {
  return std::make_unique<cutedsl::CutedslBackend>(ctx);
}

}  // namespace gemmtune
