// The cutedsl backend's grouped GEMM (grouped.hpp).
//
// Candidates: grouped_configs(problem) (at most EngineOptions::max_configs, default 16). A
// candidate's id is its config id; with the problem it determines the artifact, so load(p, id)
// rebuilds it in another process. In load-only mode (a copied artifact store, no CuTe DSL here)
// the ranking and the cap run over the configs whose artifact is in the store (the GEMM
// backend's rule).
//
// jobs(): the kernel .so. prepare(built): load its runtime and the .so, ask its can_implement
// for this problem (no buffers yet: null pointers, the capacity at rows_per_group). run(): the
// arguments in problem terms, one call: the persistent kernel reads the split from `rows` on the
// GPU. The instance keeps no per-run state (no workspace), so runs on different streams may
// overlap; no programmatic dependent launch (the split may come from the previous kernel).
#include "backends/cutedsl/grouped.hpp"

#include <algorithm>
#include <limits>

#include "backends/cutedsl/cutedsl_backend.hpp"
#include "core/config_util.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace cutedsl {

GemmProblem group_gemm(const GroupedGemmProblem& p) {
  GemmProblem g = GemmProblem::linear(p.rows_bucket(), p.n, p.k, p.a, p.d);
  g.scale = p.scale, g.bias = p.bias, g.act = p.act, g.alpha = p.alpha;
  return g;
}

Verdict grouped_verdict(const GroupedGemmProblem& p) {
  if (p.a != DType::bf16 && p.a != DType::fp16 && !is_fp8(p.a))
    return Verdict::no(std::string("inputs ") + to_string(p.a) + ": the CuTe DSL grouped kernel takes bf16, fp16 or fp8");
  if (!is_16bit(p.d))
    return Verdict::no(std::string("output ") + to_string(p.d) + ": the CuTe DSL kernel writes 16-bit outputs (bf16 or fp16)");
  if (p.scale == ScaleMode::block)
    return Verdict::no("block scales: not in the CuTe DSL grouped kernel (the Triton grouped kernel has them)");
  if (is_fp8(p.a) && p.scale == ScaleMode::none) return Verdict::no("fp8 inputs need tensorwise or rowwise scales");
  // TMA: A's and B's rows are k elements, D's n; each a multiple of 16 bytes.
  const int64_t ab = int64_t(size_of(p.a)), d = int64_t(size_of(p.d));
  if (p.k * ab % 16 != 0)
    return Verdict::no("TMA needs 16-byte rows: k = " + std::to_string(p.k) + " " + to_string(p.a) + " elements (A, B) is " +
                       std::to_string(p.k * ab) + " bytes");
  if (p.n * d % 16 != 0)
    return Verdict::no("TMA needs 16-byte rows: n = " + std::to_string(p.n) + " " + to_string(p.d) + " elements (D) is " +
                       std::to_string(p.n * d) + " bytes");
  // The kernel indexes B's rows (groups x n, also the bias and rowwise sb) with int32.
  if (p.groups * p.n > std::numeric_limits<int32_t>::max()) return Verdict::no("groups * n must fit in int32");
  // The rest (dtype pairings, int32 extents) as the GEMM of one group.
  return problem_verdict(group_gemm(p));
}

Verdict grouped_check(const Config& c, const GroupedGemmProblem& p) {
  if (Verdict v = grouped_verdict(p); !v) return v;
  auto no = [&](const std::string& why) { return Verdict::no(c.id() + ": " + why); };
  if (c.swap_ab) return no("the grouped kernel has no swap-AB");
  if (c.cluster_m != 1) return no("the grouped kernel clusters along N only (1x1 or 1x2)");
  if (c.tile_n != 64 && c.tile_n != 128 && c.tile_n != 256) return no("tile N must be 64, 128 or 256");
  return check(c, group_gemm(p));  // tile M, cluster, registers, shared memory, stages
}

std::vector<Config> grouped_configs(const GroupedGemmProblem& p, int max_configs,
                                    const std::function<bool(const Config&)>& admit) {
  if (!grouped_verdict(p)) return {};
  auto cfg = [](int tm, int tn, int cn) { return Config{tm, tn, 1, cn}; };
  // Short groups (decode-like) waste most of a 128-row tile: 64-row tiles first. Long groups: the
  // large tiles of dense GEMMs, a 1x2 cluster sharing the A tile by multicast. fp8 keeps three
  // register tiles, so its tile N 256 configs fail check() and drop out.
  std::vector<Config> ranked;
  const int64_t rows = p.rows_bucket();
  if (rows <= 64)
    ranked = {cfg(64, 256, 1),  cfg(64, 128, 1),  cfg(64, 256, 2),  cfg(64, 128, 2),
              cfg(64, 64, 1),   cfg(128, 128, 1), cfg(128, 256, 1)};
  else if (rows <= 256)
    ranked = {cfg(128, 128, 1), cfg(128, 256, 1), cfg(64, 256, 1),  cfg(128, 256, 2),
              cfg(128, 128, 2), cfg(64, 128, 1),  cfg(128, 64, 1)};
  else
    ranked = {cfg(128, 256, 2), cfg(128, 128, 2), cfg(128, 256, 1), cfg(128, 128, 1),
              cfg(64, 256, 1),  cfg(128, 64, 2),  cfg(64, 128, 1),  cfg(128, 64, 1)};
  std::vector<Config> out;
  for (const Config& c : ranked) {
    // A tile N far wider than n only multiplies padding; a cluster along a single N tile only
    // idles its partner.
    if (c.tile_n > std::max<int64_t>(64, next_pow2(p.n))) continue;
    if (c.cluster_n > 1 && ceil_div(p.n, c.tile_n) < 2) continue;
    if (!grouped_check(c, p) || (admit && !admit(c))) continue;
    out.push_back(c);
  }
  if (max_configs > 0 && int(out.size()) > max_configs) out.resize(size_t(max_configs));
  return out;
}

nlohmann::json grouped_params(const Config& c, const GroupedGemmProblem& p) {
  return nlohmann::json{
      {"op", "grouped"},
      {"layout", to_string(p.layout)},
      {"ab_dtype", to_string(p.a)},
      {"d_dtype", to_string(p.d)},
      {"bias", p.bias},
      {"act", to_string(p.act)},
      {"scale", to_string(p.scale)},
      {"tile_m", c.tile_m},
      {"tile_n", c.tile_n},
      {"cluster_n", c.cluster_n},
      {"stages", c.stages},
  };
}

compile::Job grouped_job(const Config& c, const GroupedGemmProblem& p) {
  return {"cutedsl", "grouped " + c.id() + " (" + p.str() + ")", {}, grouped_params(c, p)};
}

std::shared_ptr<const GroupedLibrary> GroupedLibrary::open(const compile::Built& built, const std::string& expect_config) {
  return open_instance<GroupedLibrary>(built, expect_config, GT_CUTEDSL_GROUPED_ABI_VERSION, "cutedsl: grouped artifact",
                                       [](void* h, GroupedLibrary& lib) {
    constexpr const char* kWho = "cutedsl";
    const std::string& key = lib.key;
    lib.config = dlsym_as<gt_cutedsl_grouped_config_fn>(h, "gt_cutedsl_grouped_config", kWho, key);
    lib.can_implement = dlsym_as<gt_cutedsl_grouped_can_implement_fn>(h, "gt_cutedsl_grouped_can_implement", kWho, key);
    lib.run = dlsym_as<gt_cutedsl_grouped_run_fn>(h, "gt_cutedsl_grouped_run", kWho, key);
    lib.status_text = dlsym_as<gt_cutedsl_grouped_status_text_fn>(h, "gt_cutedsl_grouped_status_text", kWho, key);
    return dlsym_as<gt_cutedsl_grouped_abi_version_fn>(h, "gt_cutedsl_grouped_abi_version", kWho, key)();
  });
}

// ---- the backend --------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "cutedsl";
constexpr int kDefaultMaxConfigs = 16;

class CutedslGroupedCandidate final : public detail::CandidateFor<GroupedOp> {
 public:
  CutedslGroupedCandidate(const DeviceInfo& dev, const GroupedGemmProblem& p, const Config& c)
      : dev_(dev), p_(p), c_(c), params_(grouped_params(c, p)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return c_.id(); }
  std::string name() const override { return "grouped " + c_.name(); }
  std::vector<compile::Job> jobs() const override { return {grouped_job(c_, p_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "cutedsl: grouped " + id() + ": prepare expects one artifact");
    auto lib = GroupedLibrary::open(built[0], params_.dump());
    GroupedGemmArgs none;  // sizes only: the capacity of a balanced split at rows_per_group
    none.capacity = std::max<int64_t>(1, p_.rows_per_group) * (p_.layout == GroupedLayout::masked ? 1 : p_.groups);
    GtCutedslGroupedArgs a = args(none);
    if (int st = lib->can_implement(&a); st != GT_CUTEDSL_OK)
      GT_THROW("cutedsl: grouped " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    lib_ = std::move(lib);
  }

  void run(const GroupedGemmArgs& g, cudaStream_t s) override {
    GT_CHECK(lib_, "cutedsl: grouped " + id() + ": run before prepare");
    GtCutedslGroupedArgs a = args(g);
    if (int st = lib_->run(&a, s); st != GT_CUTEDSL_OK) GT_THROW("cutedsl: grouped " + id() + ": " + lib_->status_text(st));
  }

 private:
  // Problem terms (gt_cutedsl_abi.h); flags 0: no overlapped launch.
  GtCutedslGroupedArgs args(const GroupedGemmArgs& g) const {
    GtCutedslGroupedArgs a{};
    a.abi_version = GT_CUTEDSL_GROUPED_ABI_VERSION;
    a.device = dev_.index < 0 ? 0 : dev_.index;
    a.sm_count = dev_.sm_count;
    a.groups = p_.groups, a.n = p_.n, a.k = p_.k;
    a.capacity = g.capacity;
    a.a = g.a, a.b = g.b, a.d = g.d, a.rows = g.rows;
    a.bias = g.bias, a.scale_a = g.scale_a, a.scale_b = g.scale_b;
    a.alpha = p_.alpha;
    return a;
  }

  DeviceInfo dev_;
  GroupedGemmProblem p_;
  Config c_;
  nlohmann::json params_;
  std::shared_ptr<const GroupedLibrary> lib_;
};

class CutedslGroupedBackend final : public GroupedBackend {
 public:
  explicit CutedslGroupedBackend(const BackendContext& ctx)
      : link_(ctx, "cutedsl"), max_configs_(ctx.max_configs > 0 ? ctx.max_configs : kDefaultMaxConfigs) {}

  std::string name() const override { return kName; }
  std::string version() const override {
    return available() ? link_.version() + " src=" + link_.sources_digest() : "unavailable";
  }
  Verdict available() const override { return link_.available(); }

  Verdict supports(const GroupedGemmProblem& p) const override {
    if (Verdict v = grouped_verdict(p); !v) return v;
    if (grouped_configs(p, max_configs_).empty()) return Verdict::no("no CuTe DSL grouped config fits this problem");
    // Load-only: "supported" means "has candidates" (a read of the store's file names).
    if (available() && link_.load_only() && configs(p).empty())
      return Verdict::no("load-only (the cutedsl toolchain does not compile here) and the artifact store holds none of this problem's grouped artifacts");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<Cand>> candidates(const GroupedGemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<Cand>> out;
    for (const Config& c : configs(p)) out.push_back(std::make_unique<CutedslGroupedCandidate>(dev(), p, c));
    if (out.empty()) GT_THROW("cutedsl: no grouped instance of " + p.str() + " can be built or loaded here");
    return out;
  }

  std::unique_ptr<Cand> load(const GroupedGemmProblem& p, const std::string& id) override {
    require(p);
    const Config c = Config::parse(id);
    if (Verdict v = grouped_check(c, p); !v) GT_THROW("cutedsl: grouped candidate " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<CutedslGroupedCandidate>(dev(), p, c);
  }

 private:
  const DeviceInfo& dev() const { return link_.ctx.device; }
  // The ranked configs for `p` within the compile budget; in load-only mode ranked over those
  // whose artifact is in the store.
  std::vector<Config> configs(const GroupedGemmProblem& p) const {
    auto jobs_of = [&](const Config& c) { return std::vector<compile::Job>{grouped_job(c, p)}; };
    if (!link_.load_only()) return link_.within_compile_budget(grouped_configs(p, max_configs_), jobs_of);
    return grouped_configs(p, max_configs_, [&](const Config& c) { return link_.stored(jobs_of(c)); });
  }

  void require(const GroupedGemmProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "cutedsl: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "cutedsl: does not support " + p.str() + ": " + v.reason);
  }

  ToolchainLink link_;
  int max_configs_;
};

}  // namespace
}  // namespace cutedsl

std::unique_ptr<GroupedBackend> make_cutedsl_grouped_backend(const BackendContext& ctx) {
  return std::make_unique<cutedsl::CutedslGroupedBackend>(ctx);
}

}  // namespace gemmtune
