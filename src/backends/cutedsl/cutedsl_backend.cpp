// The cutedsl backend (see cutedsl_backend.hpp).
//
// Candidates: configs_for(problem) on the engine's device (at most EngineOptions::max_configs,
// default 16). A candidate's id is its config id ("128x128c2x1"); with the problem it determines
// the artifact, so load(problem, id) rebuilds it in another process. In load-only mode (a copied
// artifact store, no CuTe DSL here) the ranking and the cap run over the configs whose artifact
// is in the store (the CUTLASS backend's rule).
//
// jobs(): the kernel .so. prepare(built): load its runtime and the .so, ask its can_implement
// for this problem. run(): fill the arguments, call the entry point; a non-OK status throws Error with the
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
#include <mutex>
#include <set>

#include "backends/kernel_library.hpp"
#include "gemmtune/error.hpp"
#include "store/shared_object.hpp"

namespace gemmtune {
namespace cutedsl {
using nlohmann::json;

// ---- Library ------------------------------------------------------------------------------------

namespace {

constexpr const char* kWho = "cutedsl";  // names the backend in loader errors

}  // namespace

void load_runtime(const compile::Built& built) {
  static std::mutex mu;
  static std::set<std::string> runtimes;  // keys of the runtime libraries loaded (never unloaded)
  GT_CHECK(built.deps.size() == 1 && built.deps[0].bytes,
           "cutedsl: artifact " + built.artifact.key.substr(0, 16) + " comes without its runtime");
  const Artifact& rt = built.deps[0];
  std::lock_guard<std::mutex> lock(mu);
  if (runtimes.count(rt.key)) return;
  dlopen_bytes(kWho, rt.key, *rt.bytes);
  runtimes.insert(rt.key);
}

std::shared_ptr<const Library> Library::open(const compile::Built& built, const std::string& expect_config) {
  return open_instance<Library>(built, expect_config, GT_CUTEDSL_ABI_VERSION, "cutedsl: artifact",
                                [](void* h, Library& lib) {
    const std::string& key = lib.key;
    lib.config = dlsym_as<gt_cutedsl_config_fn>(h, "gt_cutedsl_config", kWho, key);
    lib.can_implement = dlsym_as<gt_cutedsl_can_implement_fn>(h, "gt_cutedsl_can_implement", kWho, key);
    lib.run = dlsym_as<gt_cutedsl_run_fn>(h, "gt_cutedsl_run", kWho, key);
    lib.status_text = dlsym_as<gt_cutedsl_status_text_fn>(h, "gt_cutedsl_status_text", kWho, key);
    return dlsym_as<gt_cutedsl_abi_version_fn>(h, "gt_cutedsl_abi_version", kWho, key)();
  });
}

compile::Job job(const Config& c, const GemmProblem& p) {
  return {"cutedsl", c.id() + " (" + p.str() + ")", {}, params(c, p)};
}

// ---- the backend --------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "cutedsl";
constexpr int kDefaultSms = 132;  // H100 / H200 SXM, when the device reports none

constexpr int kDefaultMaxConfigs = 16;

class CutedslCandidate final : public detail::CandidateFor<GemmOp> {
 public:
  CutedslCandidate(const DeviceInfo& dev, const GemmProblem& p, const Config& c)
      : dev_(dev), p_(p), c_(c), params_(params(c, p)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return c_.id(); }
  std::string name() const override { return c_.name(); }

  std::vector<compile::Job> jobs() const override { return {job(c_, p_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "cutedsl: " + id() + ": prepare expects one artifact");
    auto lib = Library::open(built[0], params_.dump());
    GtCutedslArgs a = args({});
    if (int st = lib->can_implement(&a); st != GT_CUTEDSL_OK)
      GT_THROW("cutedsl: " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    lib_ = std::move(lib);
  }

  void run(const GemmArgs& g, cudaStream_t s) override { launch(g, s, 0); }

  // The kernel loads its weights' first k-tiles before griddepcontrol.wait (gemm_sm90.py).
  bool can_overlap() const override { return true; }
  void run_overlapped(const GemmArgs& g, cudaStream_t s) override { launch(g, s, GT_CUTEDSL_OVERLAP_PREVIOUS); }

 private:
  GtCutedslArgs args(const GemmArgs& g) const {
    return gemm_abi_args<GtCutedslArgs>(GT_CUTEDSL_ABI_VERSION, dev_, p_, g);
  }

  void launch(const GemmArgs& g, cudaStream_t s, int32_t flags) {
    GT_CHECK(lib_, "cutedsl: " + id() + ": run before prepare");
    GtCutedslArgs a = args(g);
    a.flags = flags;
    if (int st = lib_->run(&a, s); st != GT_CUTEDSL_OK) GT_THROW("cutedsl: " + id() + ": " + lib_->status_text(st));
  }

  DeviceInfo dev_;
  GemmProblem p_;
  Config c_;
  json params_;
  std::shared_ptr<const Library> lib_;
};

class CutedslBackend final : public Backend {
 public:
  explicit CutedslBackend(const BackendContext& ctx)
      : link_(ctx, "cutedsl"),
        sms_(ctx.device.sm_count > 0 ? ctx.device.sm_count : kDefaultSms),
        max_configs_(ctx.max_configs > 0 ? ctx.max_configs : kDefaultMaxConfigs) {}

  std::string name() const override { return kName; }
  std::string version() const override {
    return available() ? link_.version() + " src=" + link_.sources_digest() : "unavailable";
  }
  Verdict available() const override { return link_.available(); }

  Verdict supports(const GemmProblem& p) const override {
    if (Verdict v = problem_verdict(p); !v) return v;
    if (configs_for(p, sms_, max_configs_).empty()) return Verdict::no("no CuTe DSL config fits this problem");
    // Load-only: "supported" means "has candidates" (a read of the store's file names).
    if (available() && link_.load_only() && configs(p).empty())
      return Verdict::no("load-only (the cutedsl toolchain does not compile here) and the artifact store holds none of this problem's artifacts");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<detail::Candidate>> out;
    for (const Config& c : configs(p)) out.push_back(std::make_unique<CutedslCandidate>(dev(), p, c));
    if (out.empty())
      GT_THROW("cutedsl: load-only (the cutedsl toolchain does not compile here) and the artifact store holds none of this problem's artifacts");
    return out;
  }

  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    require(p);
    Config c = Config::parse(id);
    if (Verdict v = check(c, p); !v) GT_THROW("cutedsl: candidate " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<CutedslCandidate>(dev(), p, c);
  }

 private:
  const DeviceInfo& dev() const { return link_.ctx.device; }
  // The ranked configs for `p` within the compile budget; in load-only mode ranked over those
  // whose artifact is in the store.
  std::vector<Config> configs(const GemmProblem& p) const {
    if (!link_.load_only())
      return link_.within_compile_budget(configs_for(p, sms_, max_configs_),
                                         [&](const Config& c) { return std::vector<compile::Job>{job(c, p)}; });
    return configs_for(p, sms_, max_configs_, [&](const Config& c) { return link_.stored({job(c, p)}); });
  }

  void require(const GemmProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "cutedsl: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "cutedsl: does not support " + p.str() + ": " + v.reason);
  }

  ToolchainLink link_;
  int sms_, max_configs_;
};

}  // namespace
}  // namespace cutedsl

std::unique_ptr<Backend> make_cutedsl_backend(const BackendContext& ctx) {
  return std::make_unique<cutedsl::CutedslBackend>(ctx);
}

}  // namespace gemmtune
