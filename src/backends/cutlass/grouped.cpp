// The cutlass backend's grouped GEMM (grouped.hpp).
//
// A candidate's id is its config id; with the problem it determines the instance, so load(p, id)
// rebuilds it in another process. prepare(built): load the .so, ask its can_implement, allocate
// its workspace (the per-group arrays its setup kernel writes, then CUTLASS's). run(): the
// arguments in problem terms (m = the capacity), one call: the instance launches its setup
// kernel and the grouped GEMM on the stream. Runs of one candidate on two streams at once must
// not overlap (one workspace).
#include "backends/cutlass/grouped.hpp"

#include <algorithm>
#include <cstdio>

#include "backends/cutlass/cutlass_backend.hpp"
#include "compile/artifact_cache.hpp"
#include "core/cuda.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace cutlass_backend {

Verdict grouped_verdict(const GroupedGemmProblem& p) {
  if (p.a != DType::bf16 && p.a != DType::fp16)
    return Verdict::no("CUTLASS grouped kernels take bf16 or fp16 (fp8 grouped: the Triton kernel)");
  if (p.d != p.a) return Verdict::no("CUTLASS grouped kernels write D in A's dtype");
  if (p.scale != ScaleMode::none || p.bias || p.act != Activation::none)
    return Verdict::no("CUTLASS grouped kernels have no scales, bias or activation (the Triton kernel has)");
  if (p.n % 8 != 0 || p.k % 8 != 0)
    return Verdict::no("TMA needs 16-byte rows: n and k must be multiples of 8 (n = " + std::to_string(p.n) +
                       ", k = " + std::to_string(p.k) + ")");
  if (p.n > 0x7fffffff || p.k > 0x7fffffff) return Verdict::no("n and k must fit in 32 bits");
  return Verdict::yes();
}

Verdict grouped_check(const Config& c, const GroupedGemmProblem& p) {
  if (Verdict v = grouped_verdict(p); !v) return v;
  if (c.swap_ab) return Verdict::no("grouped instances have no swap-AB");
  if (!(c.swizzle == 1 || c.swizzle == 2 || c.swizzle == 4 || c.swizzle == 8) ||
      (c.raster == Raster::heuristic && c.swizzle != 1))
    return Verdict::no("swizzle must be 1, 2, 4 or 8, and 1 with the default tile order");
  if (c.tile_k != 64) return Verdict::no("tile K must be 64");
  if (c.tile_m != 64 && c.tile_m != 128 && c.tile_m != 256) return Verdict::no("tile M must be 64, 128 or 256");
  if (c.tile_n != 64 && c.tile_n != 128 && c.tile_n != 256) return Verdict::no("tile N must be 64, 128 or 256");
  const bool coop = c.schedule == Schedule::cooperative;
  if (coop && c.tile_m < 128) return Verdict::no("cooperative needs tile M >= 128");
  if (!coop && c.tile_m > 128) return Verdict::no("ping-pong needs tile M <= 128");
  if (c.tile_m * c.tile_n / (coop ? 256 : 128) > 128) return Verdict::no("more than 128 accumulators per thread");
  if (!((c.cluster_m == 1 || c.cluster_m == 2) && (c.cluster_n == 1 || c.cluster_n == 2) && c.cluster_m * c.cluster_n <= 2))
    return Verdict::no("cluster must be 1x1, 2x1 or 1x2");
  return Verdict::yes();
}

std::vector<Config> grouped_configs(const GroupedGemmProblem& p) {
  if (!grouped_verdict(p)) return {};
  auto cfg = [](Schedule s, int tm, int tn, int cm, int cn) {
    Config c;
    c.schedule = s, c.tile_m = tm, c.tile_n = tn, c.tile_k = 64, c.cluster_m = cm, c.cluster_n = cn;
    return c;
  };
  const Schedule co = Schedule::cooperative, pp = Schedule::pingpong;
  // Short groups (decode-like) waste most of a 128-row tile: 64-row ping-pong first. Long groups:
  // the large cooperative tiles of dense GEMMs, clusters sharing B (2x1) or A (1x2) by multicast.
  std::vector<Config> out;
  const int64_t rows = p.rows_bucket();
  if (rows <= 64)
    out = {cfg(pp, 64, 256, 1, 1), cfg(pp, 64, 128, 1, 1), cfg(pp, 64, 256, 2, 1), cfg(pp, 64, 128, 2, 1),
           cfg(pp, 128, 128, 1, 1), cfg(co, 128, 256, 1, 1)};
  else if (rows <= 256)
    out = {cfg(pp, 128, 128, 1, 1), cfg(co, 128, 256, 1, 1), cfg(pp, 64, 256, 1, 1), cfg(co, 128, 128, 1, 1),
           cfg(co, 128, 256, 2, 1), cfg(pp, 64, 128, 1, 1)};
  else
    out = {cfg(co, 128, 256, 2, 1), cfg(co, 128, 256, 1, 1), cfg(co, 256, 128, 1, 1), cfg(co, 256, 128, 1, 2),
           cfg(pp, 128, 128, 1, 1), cfg(co, 128, 128, 1, 1), cfg(pp, 64, 256, 1, 1), cfg(co, 128, 256, 1, 2)};
  std::erase_if(out, [&](const Config& c) { return !grouped_check(c, p); });
  return out;
}

std::vector<Config> with_grouped_tile_orders(std::vector<Config> ranked, const GroupedGemmProblem& p) {
  if (p.rows_bucket() < kOrderedRowsPerGroup) return ranked;
  const size_t n = std::min<size_t>(ranked.size(), kOrderedConfigs);
  for (size_t i = 0; i < n; ++i)
    for (Raster r : {Raster::along_m, Raster::along_n}) {
      Config v = ranked[i];
      v.raster = r, v.swizzle = 8;
      ranked.push_back(v);
    }
  return ranked;
}

GroupedInstanceSpec GroupedInstanceSpec::of(const Config& c, const GroupedGemmProblem& p) {
  GroupedInstanceSpec s;
  s.a = p.a;
  s.layout = p.layout;
  s.config = c.compiled();
  return s;
}

std::string GroupedInstanceSpec::text() const {
  return std::string("grouped a=") + to_string(a) + " layout=" + to_string(layout) + " cfg=" + config.id();
}

std::string GroupedInstanceSpec::source() const {
  const Config& c = config;
  char buf[1536];
  const int n = std::snprintf(
      buf, sizeof buf,
      "// Generated by gemmtune (src/backends/cutlass/grouped.cpp): one CUTLASS grouped instance, in\n"
      "// namespace GT_CUTLASS_MEMBER (src/compile/nvcc.cpp defines it).\n"
      "// %s\n"
      "#include \"sm90_grouped.cuh\"\n"
      "namespace GT_CUTLASS_MEMBER {\n"
      "namespace gk = gemmtune::cutlass_kernel;\n"
      "using Instance = gk::Sm90Grouped<gk::Dt::%s, %d, %d, %d, %d, %d, gk::Sched::%s, %s>;\n"
      "GT_CUTLASS_DEFINE_ENTRY_POINTS(Instance, \"%s\")\n"
      "}  // namespace GT_CUTLASS_MEMBER\n",
      text().c_str(), a == DType::fp16 ? "fp16" : "bf16", c.tile_m, c.tile_n, c.tile_k, c.cluster_m, c.cluster_n,
      c.schedule == Schedule::cooperative ? "cooperative" : "pingpong",
      layout == GroupedLayout::masked ? "true" : "false", text().c_str());
  GT_CHECK(n > 0 && size_t(n) < sizeof buf, "cutlass: the generated source of " + text() + " does not fit its buffer");
  return buf;
}

compile::Job grouped_job(const GroupedInstanceSpec& spec) {
  return instance_job(spec.config, spec.text(), spec.source());
}

namespace {

constexpr const char* kName = "cutlass";

class CutlassGroupedCandidate final : public detail::CandidateFor<GroupedOp> {
 public:
  CutlassGroupedCandidate(const DeviceInfo& dev, const GroupedGemmProblem& p, const Config& c)
      : dev_(dev), p_(p), config_(c), spec_(GroupedInstanceSpec::of(c, p)) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return config_.id(); }
  std::string name() const override { return "grouped " + config_.name(); }
  std::vector<compile::Job> jobs() const override { return {grouped_job(spec_)}; }

  void prepare(std::span<const compile::Built> built) override {
    GT_CHECK(built.size() == 1, "cutlass: grouped " + id() + ": prepare expects one artifact");
    auto lib = Library::open(built[0].artifact, spec_.text());
    GroupedGemmArgs none;
    none.capacity = std::max<int64_t>(1, p_.rows_per_group) * (p_.layout == GroupedLayout::masked ? 1 : p_.groups);
    GtCutlassArgs a = args(none);
    if (int st = lib->can_implement(&a); st != GT_CUTLASS_OK)
      GT_THROW("cutlass: grouped " + id() + " cannot run " + p_.str() + ": " + lib->status_text(st));
    GT_CUDA(cudaSetDevice(dev_.index < 0 ? 0 : dev_.index));
    ws_ = DeviceBuffer(lib->workspace(&a));
    lib_ = std::move(lib);
  }

  void run(const GroupedGemmArgs& g, cudaStream_t s) override {
    GT_CHECK(lib_, "cutlass: grouped " + id() + ": run before prepare");
    GtCutlassArgs a = args(g);
    if (int st = lib_->run(&a, ws_.get(), s); st != GT_CUTLASS_OK)
      GT_THROW("cutlass: grouped " + id() + ": " + lib_->status_text(st));
  }

 private:
  // Problem terms (gt_cutlass_abi.h): m is the capacity; packed operands.
  GtCutlassArgs args(const GroupedGemmArgs& g) const {
    GtCutlassArgs a{};
    a.abi_version = GT_CUTLASS_ABI_VERSION;
    a.device = dev_.index < 0 ? 0 : dev_.index;
    a.sm_count = dev_.sm_count;
    a.raster = int32_t(config_.raster), a.swizzle = config_.swizzle;
    a.m = g.capacity, a.n = p_.n, a.k = p_.k;
    a.a = g.a, a.b = g.b, a.d = g.d;
    a.lda = p_.k, a.ldb = p_.k, a.ldc = p_.n, a.ldd = p_.n;
    a.alpha = p_.alpha, a.beta = 0.0f;
    a.groups = int32_t(p_.groups);
    a.rows = g.rows;
    return a;
  }

  DeviceInfo dev_;
  GroupedGemmProblem p_;
  Config config_;
  GroupedInstanceSpec spec_;
  std::shared_ptr<const Library> lib_;
  DeviceBuffer ws_;
};

class CutlassGroupedBackend final : public GroupedBackend {
 public:
  explicit CutlassGroupedBackend(const BackendContext& ctx) : link_(ctx, "cutlass") {}

  std::string name() const override { return kName; }
  std::string version() const override { return available() ? link_.version() : "unavailable"; }
  Verdict available() const override { return link_.available(); }
  Verdict supports(const GroupedGemmProblem& p) const override {
    if (Verdict v = grouped_verdict(p); !v) return v;
    if (link_.load_only() && configs(p).empty())
      return Verdict::no("load-only (the cutlass toolchain does not compile here) and the artifact store holds none of this problem's grouped instances");
    return Verdict::yes();
  }
  std::vector<std::unique_ptr<Cand>> candidates(const GroupedGemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<Cand>> out;
    for (const Config& c : configs(p)) out.push_back(std::make_unique<CutlassGroupedCandidate>(link_.ctx.device, p, c));
    if (out.empty()) GT_THROW("cutlass: no grouped instance of " + p.str() + " can be built or loaded here");
    return out;
  }
  std::unique_ptr<Cand> load(const GroupedGemmProblem& p, const std::string& id) override {
    require(p);
    const Config c = Config::parse(id);
    if (Verdict v = grouped_check(c, p); !v) GT_THROW("cutlass: grouped candidate " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<CutlassGroupedCandidate>(link_.ctx.device, p, c);
  }

 private:
  void require(const GroupedGemmProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "cutlass: not available: " + v.reason);
    v = grouped_verdict(p);
    GT_CHECK(v, "cutlass: does not support " + p.str() + ": " + v.reason);
  }
  // The ranked configs within the compile budget (load-only: those in the store), then their
  // tile-order variants (no compile).
  std::vector<Config> configs(const GroupedGemmProblem& p) const {
    auto jobs_of = [&](const Config& c) { return std::vector<compile::Job>{grouped_job(GroupedInstanceSpec::of(c, p))}; };
    std::vector<Config> all = grouped_configs(p);
    if (!link_.load_only()) return with_grouped_tile_orders(link_.within_compile_budget(std::move(all), jobs_of), p);
    std::erase_if(all, [&](const Config& c) { return !link_.stored(jobs_of(c)); });
    return with_grouped_tile_orders(std::move(all), p);
  }

  ToolchainLink link_;
};

}  // namespace
}  // namespace cutlass_backend

std::unique_ptr<GroupedBackend> make_cutlass_grouped_backend(const BackendContext& ctx) {
  return std::make_unique<cutlass_backend::CutlassGroupedBackend>(ctx);
}

}  // namespace gemmtune
