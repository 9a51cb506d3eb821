// The cutlass backend (see cutlass_backend.hpp).
//
// Candidates: configs_for(problem) on the engine's device (at most EngineOptions::max_configs,
// default 16). A candidate's id is its config id ("co128x128x64c2x1"); with the problem it
// determines the instance, so load(problem, id) rebuilds it in another process. In load-only
// mode (a copied artifact store, no nvcc here) the ranking and the cap run over the configs
// whose instance is in the store.
//
// jobs(): the instance. prepare(built): load the .so, ask its can_implement for this problem
// (shapes and leading dimensions), allocate the workspace it asks for. run(): fill the arguments,
// call the entry point; a non-OK status throws Error with the instance's own status text.
// Threads: run() may be called from several threads; the arguments live on the stack, and the
// workspace (0 bytes for the persistent data-parallel scheduler) is shared, so runs of one
// candidate on different streams must not overlap when it is not empty.
#include "backends/cutlass/cutlass_backend.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backends/kernel_library.hpp"
#include "core/cuda.hpp"
#include "compile/artifact_cache.hpp"
#include "gemmtune/error.hpp"
#include "store/shared_object.hpp"

namespace gemmtune {
namespace cutlass_backend {

// ---- Library ------------------------------------------------------------------------------------

namespace {

std::mutex g_libs_mu;
std::map<std::string, std::shared_ptr<const Library>> g_libs;  // by artifact key

constexpr const char* kWho = "cutlass";  // names the backend in loader errors

}  // namespace

std::shared_ptr<const Library> Library::open(const Artifact& artifact, const std::string& expect_config) {
  std::lock_guard<std::mutex> lock(g_libs_mu);
  if (auto it = g_libs.find(artifact.key); it != g_libs.end()) return it->second;
  void* h = dlopen_bytes(kWho, artifact.key, *artifact.bytes);
  auto lib = std::make_shared<Library>();
  lib->key = artifact.key;
  auto abi = dlsym_as<gt_cutlass_abi_version_fn>(h, "gt_cutlass_abi_version", kWho, artifact.key);
  lib->config = dlsym_as<gt_cutlass_config_fn>(h, "gt_cutlass_config", kWho, artifact.key);
  lib->can_implement = dlsym_as<gt_cutlass_can_implement_fn>(h, "gt_cutlass_can_implement", kWho, artifact.key);
  lib->workspace = dlsym_as<gt_cutlass_workspace_fn>(h, "gt_cutlass_workspace", kWho, artifact.key);
  lib->run = dlsym_as<gt_cutlass_run_fn>(h, "gt_cutlass_run", kWho, artifact.key);
  lib->status_text = dlsym_as<gt_cutlass_status_text_fn>(h, "gt_cutlass_status_text", kWho, artifact.key);
  check_abi_version("cutlass: artifact", artifact.key, abi(), GT_CUTLASS_ABI_VERSION);
  check_config("cutlass: artifact", artifact.key, lib->config(), expect_config);
  g_libs[artifact.key] = lib;
  return lib;
}

compile::Job instance_job(const Config& config, const std::string& text, std::string source) {
  compile::Job j;
  j.toolchain = "cutlass";
  j.what = config.id() + " (" + text + ")";
  j.source = std::move(source);
  j.meta = {{"backend", "cutlass"}, {"instance", text}, {"config", config.id()}};
  // Instances of one dtype, layout and epilogue share most of their template instantiation.
  j.family = text.substr(0, text.rfind(" cfg="));
  return j;
}

compile::Job job(const InstanceSpec& spec) { return instance_job(spec.config, spec.text(), spec.source()); }

// ---- the backend --------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "cutlass";

constexpr int kDefaultMaxConfigs = 16;

class CutlassCandidate final : public detail::CandidateFor<GemmOp> {
 public:
  CutlassCandidate(const DeviceInfo& dev, const GemmProblem& p, const Config& c)
      : dev_(dev), p_(p), config_(c), spec_(InstanceSpec::of(c, p)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return config_.id(); }
  std::string name() const override { return config_.name(); }

  std::vector<compile::Job> jobs() const override { return {job(spec_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "cutlass: " + id() + ": prepare expects one artifact");
    auto lib = Library::open(built[0].artifact, spec_.text());
    GtCutlassArgs a = args({});
    if (int st = lib->can_implement(&a); st != GT_CUTLASS_OK)
      GT_THROW("cutlass: " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    ws_ = DeviceBuffer(lib->workspace(&a));
    lib_ = std::move(lib);
  }

  void run(const GemmArgs& g, cudaStream_t s) override { launch(g, s, 0); }

  // CUTLASS's SM90 kernels wait (griddepcontrol.wait) before their first global access
  // (CUTLASS_ENABLE_GDC_FOR_SM90, sm90_gemm.cuh).
  bool can_overlap() const override { return true; }
  void run_overlapped(const GemmArgs& g, cudaStream_t s) override { launch(g, s, GT_CUTLASS_OVERLAP_PREVIOUS); }

 private:
  void launch(const GemmArgs& g, cudaStream_t s, int32_t flags) {
    GT_CHECK(lib_, "cutlass: " + id() + ": run before prepare");
    GtCutlassArgs a = args(g);
    a.flags = flags;
    if (int st = lib_->run(&a, ws_.get(), s); st != GT_CUTLASS_OK)
      GT_THROW("cutlass: " + id() + ": " + lib_->status_text(st));
  }

  GtCutlassArgs args(const GemmArgs& g) const {
    GtCutlassArgs a = gemm_abi_args<GtCutlassArgs>(GT_CUTLASS_ABI_VERSION, dev_, p_, g);
    a.raster = int32_t(config_.raster), a.swizzle = config_.swizzle;
    return a;
  }

  DeviceInfo dev_;
  GemmProblem p_;
  Config config_;     // with its run-time tile order
  InstanceSpec spec_; // the compiled instance (shared by the tile orders of one config)
  std::shared_ptr<const Library> lib_;
  DeviceBuffer ws_;
};

class CutlassBackend final : public Backend {
 public:
  explicit CutlassBackend(const BackendContext& ctx)
      : link_(ctx, "cutlass"), max_configs_(ctx.max_configs > 0 ? ctx.max_configs : kDefaultMaxConfigs) {}

  std::string name() const override { return kName; }
  std::string version() const override { return available() ? link_.version() : "unavailable"; }
  Verdict available() const override { return link_.available(); }
  // In load-only mode (a kernel pack, no nvcc here) a problem none of whose instances is in the
  // store is not supported: nothing could run it, and callers treat "supported" as "has
  // candidates". (A read of the store's file names; no compile.)
  Verdict supports(const GemmProblem& p) const override {
    if (Verdict v = problem_verdict(p); !v) return v;
    if (link_.load_only() && configs(p).empty())
      return Verdict::no("load-only (the cutlass toolchain does not compile here) and the artifact store holds none of this problem's instances");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    std::vector<std::unique_ptr<detail::Candidate>> out;
    for (const Config& c : configs(p)) out.push_back(std::make_unique<CutlassCandidate>(dev(), p, c));
    if (out.empty() && link_.load_only())
      GT_THROW("load-only (the cutlass toolchain does not compile here) and the artifact store holds none of this problem's instances");
    return out;
  }

  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    Verdict v = available();
    GT_CHECK(v, "cutlass: not available: " + v.reason);
    Config c = Config::parse(id);
    if (Verdict ok = check(c, p); !ok) GT_THROW("cutlass: candidate " + id + " cannot run " + p.str() + ": " + ok.reason);
    return std::make_unique<CutlassCandidate>(dev(), p, c);
  }

 private:
  const DeviceInfo& dev() const { return link_.ctx.device; }
  // The ranked configs for `p` within the compile budget, then their tile-order variants (no
  // compile: with_tile_orders). In load-only mode the ranking and the cap run over the configs
  // whose artifact is in the store: a pack built for other shapes of this instance class (or
  // with fixed test configs) holds instances that can run `p` but that the unrestricted top
  // `max_configs` for `p` may not include; intersecting that top list with the store would
  // offer none of them. Where the pack holds the whole top list, the result is that list.
  std::vector<Config> configs(const GemmProblem& p) const {
    if (!link_.load_only())
      return with_tile_orders(
          link_.within_compile_budget(configs_for(p, dev().sm_count, max_configs_),
                                      [&](const Config& c) { return std::vector<compile::Job>{job(InstanceSpec::of(c, p))}; }),
          p);
    return with_tile_orders(configs_for(p, dev().sm_count, max_configs_,
                                        [&](const Config& c) { return link_.stored({job(InstanceSpec::of(c, p))}); }),
                            p);
  }

  ToolchainLink link_;
  int max_configs_;
};

}  // namespace
}  // namespace cutlass_backend

std::unique_ptr<Backend> make_cutlass_backend(const BackendContext& ctx) {
  return std::make_unique<cutlass_backend::CutlassBackend>(ctx);
}

}  // namespace gemmtune
