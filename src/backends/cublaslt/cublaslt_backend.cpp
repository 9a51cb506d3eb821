// The cublaslt backend: one candidate per algorithm of cuBLASLt's heuristic for a problem, and
// one that reproduces torch's own call (the baseline, is_default).
//
// Candidates: cublasLtMatmulAlgoGetHeuristic asked for kHeuristicCount results with at most
// 32 MiB of workspace and 16-byte base-pointer alignment (so A, B, C, D and bias must be
// 16-byte aligned: run() checks and throws otherwise). A candidate's id is the hex of its
// 64-byte cublasLtMatmulAlgo_t, which cuBLASLt documents as serializable within one library
// version (the version keys the cache).
//
// The torch baseline (docs/cublaslt.md): the heuristic asked the way PyTorch asks it for this
// problem (lt::torch_prefs: torch's workspace, 256-byte alignment as torch's allocator gives,
// one result; bias and scale placeholders 256-byte aligned), holding also the algo that the same
// call gives for 16-byte pointers. run() takes the first when every pointer it is given (A, B,
// C, D, bias, scales, where used) is 256-byte aligned and the second otherwise, so the
// baseline is safe for any pointers this backend accepts and is exactly torch's pick for
// torch-allocated tensors. A heuristic result with the baseline's algo is not listed again.
// Where the torch-style query finds nothing, heuristic result #0 is the default, as before.
//
// Threads and streams: run() may be called from several threads (a mutex guards the per-call
// descriptor pointers), but a candidate owns ONE workspace, so runs of the same candidate on
// different streams must not overlap in time (as with any cuBLASLt call sharing a workspace).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cublaslt/lt.hpp"
#include "backends/cublaslt/silu.hpp"
#include "core/cuda.hpp"

namespace gemmtune {
namespace {

constexpr const char* kName = "cublaslt";

void check_aligned(const void* ptr, const char* what) {
  if (reinterpret_cast<uintptr_t>(ptr) % lt::kAlignment != 0)
    GT_THROW(std::string("cublaslt: ") + what + " must be 16-byte aligned (candidates were chosen for it)");
}

// Heuristic results with state SUCCESS and within the workspace asked for, in cuBLASLt's order
// (best estimate first).
struct Heuristics {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::vector<cublasLtMatmulHeuristicResult_t> results;
};

Heuristics query(const lt::Handle& h, const lt::Plan& plan, const lt::Prefs& prefs) {
  lt::Preference pref(prefs);
  std::vector<cublasLtMatmulHeuristicResult_t> res(prefs.count);
  int returned = 0;
  Heuristics out;
  out.status = cublasLtMatmulAlgoGetHeuristic(h.get(), plan.desc.get(), plan.a->get(), plan.b->get(), plan.c->get(),
                                              plan.d->get(), pref.get(), prefs.count, res.data(), &returned);
  if (out.status != CUBLAS_STATUS_SUCCESS) return out;
  for (int i = 0; i < returned; ++i)
    if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= prefs.max_workspace)
      out.results.push_back(res[i]);
  return out;
}

bool aligned_to(const void* ptr, uint32_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// What the candidate runs: `algo` (for every pointer; a plain candidate), or for the torch
// baseline `algo` on 256-byte-aligned pointers and `fallback` on others.
struct Choice {
  cublasLtMatmulAlgo_t algo;
  cublasLtMatmulAlgo_t fallback;
  bool torch = false;
};

// One cuBLASLt algorithm for one problem (alpha and beta included: they are baked in).
class LtCandidate final : public detail::Candidate {
 public:
  LtCandidate(std::shared_ptr<lt::Handle> h, const GemmProblem& p, const Choice& choice, size_t workspace,
              bool is_default)
      : h_(std::move(h)), p_(p), choice_(choice), ws_bytes_(workspace), default_(is_default), name_(make_name()) {}

  std::string backend() const override { return kName; }
  std::string id() const override {
    return choice_.torch ? lt::torch_id(choice_.algo, choice_.fallback) : lt::algo_to_hex(choice_.algo);
  }
  std::string name() const override { return name_; }
  bool is_default() const override { return default_; }

  void prepare(std::span<const compile::Built>) override {
    std::lock_guard<std::mutex> lock(mu_);
    prepare_locked();
  }

  void run(const GemmArgs& g, cudaStream_t s) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ws_ready_) prepare_locked();
    check_aligned(g.a, "args.a");
    check_aligned(g.b, "args.b");
    check_aligned(g.d, "args.d");
    if (p_.uses_c()) check_aligned(g.c, "args.c");
    if (p_.bias) check_aligned(g.bias, "args.bias");
    plan_->bind(g);
    const void* c = p_.uses_c() ? g.c : g.d;  // beta = 0: C is not read
    const cublasLtMatmulAlgo_t& algo = algo_for(g);
    GT_CUBLAS(cublasLtMatmul(h_->get(), plan_->desc.get(), &p_.alpha, plan_->lt_a(g), plan_->a->get(), plan_->lt_b(g),
                             plan_->b->get(), &p_.beta, c, plan_->c->get(), g.d, plan_->d->get(), &algo, ws_.get(),
                             ws_.bytes(), s));
    if (p_.act == Activation::silu) lt::silu_inplace(g.d, p_.d.dtype, p_.d.layout, p_.m, p_.n, p_.ldd(), s);
  }

  // For ids from the cache: builds the plan and asks cublasLtMatmulAlgoCheck whether the algo
  // (both, for the torch baseline) runs for this problem on this device, and with how much
  // workspace. Throws Error if not.
  void check() {
    std::lock_guard<std::mutex> lock(mu_);
    ensure_plan();
    size_t need;
    if (choice_.torch) {
      // The main algo was chosen for 256-byte bias / scale pointers: check it with such.
      lt::Plan aligned(p_, lt::kTorchAlignment);
      need = check_one(choice_.algo, aligned);
      if (!lt::same_algo(choice_.algo, choice_.fallback)) need = std::max(need, check_one(choice_.fallback, *plan_));
    } else {
      need = check_one(choice_.algo, *plan_);
    }
    ws_bytes_ = need;
  }

 private:
  // The torch baseline's algo for these pointers (plain candidates: their one algo).
  const cublasLtMatmulAlgo_t& algo_for(const GemmArgs& g) const {
    if (!choice_.torch) return choice_.algo;
    const uint32_t k = lt::kTorchAlignment;
    const bool scaled = p_.scale != ScaleMode::none;  // as Plan::bind: scale pointers are set
    bool aligned = aligned_to(g.a, k) && aligned_to(g.b, k) && aligned_to(g.d, k) &&
                   (!p_.uses_c() || aligned_to(g.c, k)) && (!p_.bias || aligned_to(g.bias, k)) &&
                   (!scaled || (aligned_to(g.scale_a, k) && aligned_to(g.scale_b, k)));
    return aligned ? choice_.algo : choice_.fallback;
  }

  size_t check_one(const cublasLtMatmulAlgo_t& algo, const lt::Plan& plan) {
    cublasLtMatmulHeuristicResult_t r{};
    cublasStatus_t st = cublasLtMatmulAlgoCheck(h_->get(), plan.desc.get(), plan.a->get(), plan.b->get(),
                                                 plan.c->get(), plan.d->get(), &algo, &r);
    if (st != CUBLAS_STATUS_SUCCESS)
      GT_THROW("cublaslt: candidate " + id() + " is not usable for " + p_.str() + ": " + lt::status_text(st));
    if (r.workspaceSize > lt::kMaxWorkspace)
      GT_THROW("cublaslt: candidate " + id() + " needs " + std::to_string(r.workspaceSize) +
               " bytes of workspace (limit 32 MiB)");
    return r.workspaceSize;
  }

  std::string make_name() const {
    std::string n;
    if (choice_.torch) {
      n = std::string("torch ") + lt::torch_path_text(lt::torch_path(p_)) + ": " + lt::describe_algo(choice_.algo);
      if (!lt::same_algo(choice_.algo, choice_.fallback))
        n += " (pointers under 256 B aligned: " + lt::describe_algo(choice_.fallback) + ")";
    } else {
      n = lt::describe_algo(choice_.algo);
    }
    return n + (p_.act == Activation::silu ? " +silu pass" : "");
  }

  void ensure_plan() {
    if (!plan_) plan_ = std::make_unique<lt::Plan>(p_);
  }
  void prepare_locked() {
    ensure_plan();
    if (!ws_ready_) {
      ws_ = DeviceBuffer(ws_bytes_);
      ws_ready_ = true;
    }
  }

  std::shared_ptr<lt::Handle> h_;
  GemmProblem p_;
  Choice choice_;
  size_t ws_bytes_;
  bool default_;
  std::string name_;
  std::mutex mu_;
  std::unique_ptr<lt::Plan> plan_;  // descriptor + layouts, made once
  DeviceBuffer ws_;
  bool ws_ready_ = false;
};

Choice plain(const cublasLtMatmulAlgo_t& algo) { return Choice{algo, algo, false}; }

class CublasLtBackend final : public Backend {
 public:
  explicit CublasLtBackend(const BackendContext& ctx) : dev_(ctx.device) {
    if (!cuda_device_present(&unavailable_)) return;
    try {
      handle_ = std::make_shared<lt::Handle>();
    } catch (const Error& e) {
      unavailable_ = "cublasLtCreate failed: " + e.message();
      return;
    }
    // cuBLASLt initialises itself lazily on its first heuristic query / algo check (~70 ms
    // measured on the H200). Pay that here, once per engine, so that a cache hit in select()
    // stays well under a millisecond even for a process's first problem.
    try {
      auto p = GemmProblem::linear(128, 128, 128);
      lt::Plan warm(p);
      lt::Prefs one = lt::gemmtune_prefs();
      one.count = 1;
      Heuristics h = query(*handle_, warm, one);
      if (!h.results.empty()) LtCandidate(handle_, p, plain(h.results[0].algo), 0, false).check();
    } catch (const Error& e) {
      ctx.log.warn("cublaslt: warm-up failed (first cache hit will be slower): " + e.message());
    }
  }

  std::string name() const override { return kName; }
  std::string version() const override { return "cublasLt " + std::to_string(cublasLtGetVersion()); }
  Verdict available() const override { return handle_ ? Verdict::yes() : Verdict::no(unavailable_); }

  // Static rules first (no GPU needed); with a GPU, also whether cuBLASLt's heuristic has any
  // algorithm, so that candidates() works for every problem said yes to. Probes are memoized.
  Verdict supports(const GemmProblem& p) const override {
    Verdict v = lt::static_verdict(p, dev_);
    if (!v || !handle_) return v;
    std::string key = p.canonical();
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = probed_.find(key); it != probed_.end()) return it->second;
    if (probed_.size() >= 256) probed_.clear();
    return probed_[key] = probe(p);
  }

  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    require(p);
    lt::Plan plan(p);
    Heuristics h = query(*handle_, plan, lt::gemmtune_prefs());
    if (h.status != CUBLAS_STATUS_SUCCESS)
      GT_THROW("cublaslt: heuristic query failed for " + p.str() + ": " + lt::status_text(h.status));
    GT_CHECK(!h.results.empty(), "cublaslt: the heuristic returned no algorithm for " + p.str());

    // torch's call: 256-byte pointers, and the same call for 16-byte ones (the fallback; where
    // it finds nothing, gemmtune's own result #0, which needs 16 bytes only).
    lt::Plan tplan(p, lt::kTorchAlignment);  // bias / scale placeholders aligned as torch's tensors
    Heuristics t = query(*handle_, tplan, lt::torch_prefs(p, dev_.cc_major));
    std::optional<Choice> base;
    size_t base_ws = 0;
    if (t.status == CUBLAS_STATUS_SUCCESS && !t.results.empty()) {
      Heuristics f = query(*handle_, plan, lt::torch_prefs(p, dev_.cc_major, lt::kAlignment));
      const auto& fb = f.status == CUBLAS_STATUS_SUCCESS && !f.results.empty() ? f.results[0] : h.results[0];
      base = Choice{t.results[0].algo, fb.algo, true};
      base_ws = std::max(t.results[0].workspaceSize, fb.workspaceSize);
    }

    std::vector<cublasLtMatmulAlgo_t> algos;
    for (const auto& r : h.results) algos.push_back(r.algo);
    std::vector<std::unique_ptr<detail::Candidate>> out;
    if (base) out.push_back(std::make_unique<LtCandidate>(handle_, p, *base, base_ws, true));
    for (size_t i : lt::plain_candidates(algos, base ? &base->algo : nullptr))
      out.push_back(std::make_unique<LtCandidate>(handle_, p, plain(h.results[i].algo), h.results[i].workspaceSize,
                                                   out.empty()));
    return out;
  }

  // Cheap (no heuristic query): parse, build the plan, cublasLtMatmulAlgoCheck.
  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    require(p);
    Choice choice;
    if (lt::is_torch_id(id)) {
      lt::parse_torch_id(id, choice.algo, choice.fallback);
      choice.torch = true;
    } else {
      choice = plain(lt::algo_from_hex(id));
    }
    // A cached torch baseline is still the baseline: is_default stays with it.
    auto cand = std::make_unique<LtCandidate>(handle_, p, choice, 0, choice.torch);
    cand->check();
    return cand;
  }

  bool reproduces_torch(const std::string& id) const override { return lt::is_torch_id(id); }

 private:
  void require(const GemmProblem& p) const {
    GT_CHECK(handle_, "cublaslt: not available: " + unavailable_);
    Verdict v = lt::static_verdict(p, dev_);
    GT_CHECK(v, "cublaslt: does not support " + p.str() + ": " + v.reason);
  }

  Verdict probe(const GemmProblem& p) const {
    try {
      lt::Plan plan(p);
      lt::Prefs one = lt::gemmtune_prefs();
      one.count = 1;
      Heuristics h = query(*handle_, plan, one);
      if (h.status != CUBLAS_STATUS_SUCCESS)
        return Verdict::no("cuBLASLt has no algorithm for this problem (" + lt::status_text(h.status) + ")");
      if (h.results.empty())
        return Verdict::no(
            "cuBLASLt has no algorithm for this problem within 32 MiB of workspace and 16-byte alignment");
      return Verdict::yes();
    } catch (const Error& e) {
      return Verdict::no("cuBLASLt rejected the problem: " + e.message());
    }
  }

  DeviceInfo dev_;
  std::shared_ptr<lt::Handle> handle_;
  std::string unavailable_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Verdict> probed_;  // canonical() -> heuristic verdict
};

}  // namespace

std::unique_ptr<Backend> make_cublaslt_backend(const BackendContext& ctx) {
  return std::make_unique<CublasLtBackend>(ctx);
}

}  // namespace gemmtune
