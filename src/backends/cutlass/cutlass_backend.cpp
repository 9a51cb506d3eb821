// The cutlass backend (see cutlass_backend.hpp).
//
// Candidates: configs_for(problem) on the engine's device (at most $GEMMTUNE_CUTLASS_MAX_CONFIGS,
// default 16). A candidate's id is its config id ("co128x128x64c2x1"); with the problem it
// determines the instance, so load(problem, id) rebuilds it in another process. In load-only
// mode (a copied artifact store, no nvcc here) only configs already in the store are candidates.
//
// prepare(): build or store hit, load the .so, ask its can_implement for this problem (shapes and
// leading dimensions), allocate the workspace it asks for. run(): fill the arguments, call the
// entry point; a non-OK status throws Error with the instance's own status text.
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
#include "backends/lazy_candidate.hpp"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"
#include "compile/precompile_items.hpp"
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

int default_max_configs() {
  const char* v = std::getenv("GEMMTUNE_CUTLASS_MAX_CONFIGS");
  int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 16;
}

// ---- precompile ---------------------------------------------------------------------------------

std::vector<PrecompileItem> precompile(Builder& builder, const std::vector<GemmProblem>& problems, int sm_count,
                                       int max_configs, int threads,
                                       const std::function<void(const PrecompileItem&)>& progress,
                                       const std::vector<Config>& only) {
  std::vector<PrecompileItem> items;
  std::vector<InstanceSpec> specs;
  std::set<std::string> seen;
  for (const GemmProblem& p : problems) {
    if (Verdict v = problem_verdict(p); !v) {
      PrecompileItem it;
      it.problem = p.str();
      it.error = "does not support: " + v.reason;
      it.skipped = true;
      items.push_back(std::move(it));
      continue;
    }
    for (const Config& c : only.empty() ? configs_for(p, sm_count, max_configs) : only) {
      if (Verdict v = check(c, p); !v) {
        PrecompileItem it;
        it.problem = p.str(), it.config = c;
        it.error = "cannot run this problem: " + v.reason;
        items.push_back(std::move(it));
        continue;
      }
      InstanceSpec s = InstanceSpec::of(c, p);
      std::string key = builder.key(s);
      if (!seen.insert(key).second) continue;
      PrecompileItem it;
      it.problem = p.str(), it.config = c, it.instance = s.text(), it.key = key;
      items.push_back(std::move(it));
      specs.push_back(std::move(s));
    }
  }
  // items without a key (unsupported problems, configs that cannot run) are done; the rest map 1:1 onto specs in order.
  build_keyed_items(items, threads, progress, [&](size_t j, PrecompileItem& it) {
    Built b = builder.build(specs[j]);
    it.store_hit = b.store_hit;
    it.seconds = b.compile_s;
  });
  return items;
}

// ---- the backend --------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "cutlass";

class CutlassCandidate final : public LazyCandidate<GemmOp> {
 public:
  CutlassCandidate(std::shared_ptr<Builder> builder, const DeviceInfo& dev, const GemmProblem& p, const Config& c)
      : builder_(std::move(builder)), dev_(dev), p_(p), spec_(InstanceSpec::of(c, p)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return spec_.config.id(); }
  std::string name() const override { return spec_.config.name(); }

  void run(const GemmArgs& g, cudaStream_t s) override {
    if (!lib_) prepare();
    GtCutlassArgs a = args(g);
    if (int st = lib_->run(&a, ws_.get(), s); st != GT_CUTLASS_OK)
      GT_THROW("cutlass: " + id() + ": " + lib_->status_text(st));
  }

 private:
  void prepare_locked() override {
    if (lib_) return;
    Built b = builder_->build(spec_);
    compile_s_ = b.compile_s;
    auto lib = Library::open(b.artifact, spec_.text());
    GtCutlassArgs a = args({});
    if (int st = lib->can_implement(&a); st != GT_CUTLASS_OK)
      GT_THROW("cutlass: " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    ws_ = DeviceBuffer(lib->workspace(&a));
    lib_ = std::move(lib);
  }

  GtCutlassArgs args(const GemmArgs& g) const {
    return gemm_abi_args<GtCutlassArgs>(GT_CUTLASS_ABI_VERSION, dev_, p_, g);
  }

  std::shared_ptr<Builder> builder_;
  DeviceInfo dev_;
  GemmProblem p_;
  InstanceSpec spec_;
  std::shared_ptr<const Library> lib_;
  DeviceBuffer ws_;
};

class CutlassBackend final : public Backend {
 public:
  explicit CutlassBackend(const BackendContext& ctx) : dev_(ctx.device) {
    try {
      builder_ = std::make_shared<Builder>(BuilderOptions::defaults(ctx.log));
      if (Verdict v = builder_->available(); !v) unavailable_ = v.reason;
    } catch (const std::exception& e) {
      unavailable_ = std::string("cannot set up the builder: ") + e.what();
    }
    if (unavailable_.empty() && dev_.index >= 0 && !(dev_.cc_major == 9 && dev_.cc_minor == 0))
      unavailable_ = "kernels are built for sm_90a (Hopper); this device is " + dev_.name + " (cc " +
                     std::to_string(dev_.cc_major) + "." + std::to_string(dev_.cc_minor) + ")";
  }

  std::string name() const override { return kName; }
  std::string version() const override { return builder_ ? builder_->version() : "unavailable"; }
  Verdict available() const override { return unavailable_.empty() ? Verdict::yes() : Verdict::no(unavailable_); }
  // In load-only mode (a kernel pack, no nvcc here) a problem none of whose instances is in the
  // store is not supported: nothing could run it, and callers treat "supported" as "has
  // candidates".
  Verdict supports(const GemmProblem& p) const override {
    if (Verdict v = problem_verdict(p); !v) return v;
    if (builder_ && builder_->load_only() && configs(p).empty())
      return Verdict::no("load-only (no nvcc or CUTLASS here) and the artifact store " +
                         builder_->store().root().string() + " holds none of this problem's instances");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    std::vector<std::unique_ptr<detail::Candidate>> out;
    for (const Config& c : configs(p)) out.push_back(std::make_unique<CutlassCandidate>(builder_, dev_, p, c));
    if (out.empty() && builder_->load_only())
      GT_THROW("load-only (no nvcc or CUTLASS here) and the artifact store holds none of this problem's instances");
    return out;
  }

  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    GT_CHECK(unavailable_.empty(), "cutlass: not available: " + unavailable_);
    Config c = Config::parse(id);
    if (Verdict v = check(c, p); !v) GT_THROW("cutlass: candidate " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<CutlassCandidate>(builder_, dev_, p, c);
  }

 private:
  // The ranked configs for `p`. In load-only mode the ranking and the cap run over the configs
  // whose artifact is in the store: a pack built for other shapes of this instance class (or
  // with fixed test configs) holds instances that can run `p` but that the unrestricted top
  // `max_configs` for `p` may not include; intersecting that top list with the store would
  // offer none of them. Where the pack holds the whole top list, the result is that list.
  std::vector<Config> configs(const GemmProblem& p) const {
    if (!builder_->load_only()) return configs_for(p, dev_.sm_count, default_max_configs());
    return configs_for(p, dev_.sm_count, default_max_configs(),
                       [&](const Config& c) { return builder_->cached(InstanceSpec::of(c, p)); });
  }

  DeviceInfo dev_;
  std::shared_ptr<Builder> builder_;
  std::string unavailable_;
};

}  // namespace
}  // namespace cutlass_backend

std::unique_ptr<Backend> make_cutlass_backend(const BackendContext& ctx) {
  return std::make_unique<cutlass_backend::CutlassBackend>(ctx);
}

}  // namespace gemmtune
