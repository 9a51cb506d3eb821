// The triton backend: our Triton templates (python/gemmtune/kernels/triton_gemm.py), compiled
// ahead of time by Python compile workers, loaded and launched from C++ with the driver API.
//
// Candidates: configs_for(problem) (configs.hpp); a candidate's id is its config id, so
// load(problem, id) rebuilds it without a heuristic, and its prepare() is then an artifact
// store hit. jobs(): the GEMM cubin, and the split-k reduce's where split_k > 1 (toolchain
// "triton", src/compile/python_worker.hpp). prepare(built) = cuModuleLoadData + kernel
// attributes + scratch and split-k workspace.
//
// Launch ABI (docs/triton-backend.md): the GEMM kernels take
//   a, b, c, d, bias, scale_a, scale_b, workspace, M, N, K, lda, ldb, ldc, ldd, alpha, beta,
// splitk_reduce takes workspace, c, d, bias, scale_a, scale_b, M, N, ldc, ldd, alpha, beta,
// and both then Triton's hidden global_scratch and profile_scratch pointers.
//
// Threads and streams: a candidate owns ONE scratch and workspace buffer, so runs of one
// candidate on different streams must not overlap.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <map>

#include "backends/backend.hpp"
#include "backends/triton/configs.hpp"
#include "backends/triton/launch.hpp"
#include "core/cuda.hpp"
#include "core/driver.hpp"

namespace gemmtune {
namespace {

using nlohmann::json;
using triton::Config;
using triton::Grid;
using triton::LoadedKernel;
using triton::Scratch;

constexpr const char* kName = "triton";
constexpr int kDefaultSms = 132;              // H100 / H200 SXM, when the device reports none

// ---- the launch ABI --------------------------------------------------------------------------

// Runtime arguments of each kernel before the two hidden scratch pointers.
constexpr int64_t kGemmArgs = 17, kReduceArgs = 12;

void check_aligned(const void* ptr, const char* what) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    GT_THROW(std::string("triton: ") + what + " must be 16-byte aligned (the kernels were compiled for it)");
}

CUdeviceptr dptr(const void* p) { return CUdeviceptr(reinterpret_cast<uintptr_t>(p)); }

// ---- the candidate ----------------------------------------------------------------------------

// The compile jobs of config `c` for `p`: the GEMM kernel, and the split-k reduce.
std::vector<compile::Job> triton_jobs(const Config& c, const GemmProblem& p, int sms) {
  std::vector<compile::Job> out{{"triton", c.id() + " gemm", {}, triton::gemm_params(c, p, sms)}};
  if (c.split_k > 1) out.push_back({"triton", c.id() + " reduce", {}, triton::reduce_params(c, p)});
  return out;
}

class TritonCandidate final : public detail::CandidateFor<GemmOp> {
 public:
  TritonCandidate(const GemmProblem& p, const Config& c, int device, int num_sms)
      : p_(p), cfg_(c), device_(device), sms_(num_sms) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return cfg_.id(); }
  std::string name() const override { return cfg_.name(); }

  std::vector<compile::Job> jobs() const override { return triton_jobs(cfg_, p_, sms_); }

  void prepare(std::span<const compile::Built> arts) override {
    GT_CHECK(arts.size() == (cfg_.split_k > 1 ? 2u : 1u), "triton: " + id() + ": wrong number of artifacts");
    GT_CUDA(cudaSetDevice(device_));  // makes the device's primary context current on this thread
    gemm_ = triton::load_kernel(arts[0].artifact, triton::gemm_grid(cfg_, p_, sms_), kGemmArgs, kName,
                                triton::kMaxSharedBytes);
    if (cfg_.split_k > 1) {
      reduce_ = triton::load_kernel(arts[1].artifact, triton::reduce_grid(p_), kReduceArgs, kName, triton::kMaxSharedBytes);
      workspace_.allocate(triton::workspace_bytes(cfg_, p_), 16);
    }
  }

  void run(const GemmArgs& g, cudaStream_t s) override { launch(g, s); }

  // No programmatic dependent launch (can_overlap() false: overlap_previous runs it plainly),
  // though the kernels would be correct with one (each waits, griddepcontrol.wait, before its
  // first memory access): measured in llama3 decoder chains, launching the Triton kernel
  // overlapped was never faster and up to 6% slower for the whole chain (llama3-8b m = 8: the
  // 448 CTAs of a one-wave gate_up kernel placed beside the previous kernel's, unevenly; H100).
  // Its kernels still let the next kernel launch early (griddepcontrol.launch_dependents).

 private:
  void launch(const GemmArgs& g, cudaStream_t s) {
    GT_CHECK(gemm_.fn, "triton: " + id() + ": run before prepare");
    triton::ensure_context(device_);
    check_args(g);
    CUdeviceptr a = dptr(g.a), b = dptr(g.b), c = p_.uses_c() ? dptr(g.c) : 0, d = dptr(g.d);
    CUdeviceptr bias = p_.bias ? dptr(g.bias) : 0;
    bool scaled = p_.scale != ScaleMode::none;
    CUdeviceptr sa = scaled ? dptr(g.scale_a) : 0, sb = scaled ? dptr(g.scale_b) : 0, ws = workspace_.ptr;
    int32_t M = int32_t(p_.m), N = int32_t(p_.n), K = int32_t(p_.k);
    int32_t lda = int32_t(p_.lda()), ldb = int32_t(p_.ldb()), ldd = int32_t(p_.ldd());
    int32_t ldc = p_.uses_c() ? int32_t(p_.ldc()) : ldd;
    float alpha = p_.alpha, beta = p_.beta;
    gemm_.launch({&a, &b, &c, &d, &bias, &sa, &sb, &ws, &M, &N, &K, &lda, &ldb, &ldc, &ldd, &alpha, &beta}, s);
    if (cfg_.split_k > 1)
      reduce_.launch({&ws, &c, &d, &bias, &sa, &sb, &M, &N, &ldc, &ldd, &alpha, &beta}, s);
  }

  void check_args(const GemmArgs& g) const {
    check_aligned(g.a, "args.a");
    check_aligned(g.b, "args.b");
    check_aligned(g.d, "args.d");
    if (p_.uses_c()) check_aligned(g.c, "args.c");
    if (p_.bias) check_aligned(g.bias, "args.bias");
    if (p_.scale != ScaleMode::none) {
      check_aligned(g.scale_a, "args.scale_a");
      check_aligned(g.scale_b, "args.scale_b");
    }
  }

  GemmProblem p_;
  Config cfg_;
  int device_, sms_;
  LoadedKernel gemm_, reduce_;
  Scratch workspace_;  // split-k partials [split_k, m, n] fp32
};

// ---- the backend ------------------------------------------------------------------------------

class TritonBackend final : public Backend {
 public:
  explicit TritonBackend(const BackendContext& ctx)
      : link_(ctx, "triton"), sms_(ctx.device.sm_count > 0 ? ctx.device.sm_count : kDefaultSms) {}

  std::string name() const override { return kName; }
  // Triton's version and a digest of our Python sources: both change what a config compiles to.
  std::string version() const override {
    if (!available()) return "triton (unavailable)";
    return "triton " + link_.version() + " (templates " + link_.sources_digest() + ")";
  }

  Verdict available() const override {
    if (Verdict v = triton::device_verdict(link_.ctx.device); !v) return v;
    return link_.available();
  }

  Verdict supports(const GemmProblem& p) const override {
    if (Verdict v = triton::problem_verdict(p); !v) return v;
    if (triton::configs_for(p, sms_).empty()) return Verdict::no("no Triton config fits this problem");
    // Load-only: "supported" means "has candidates" (a read of the store's file names).
    if (link_.load_only() && stored_configs(p).empty())
      return Verdict::no("load-only (the triton toolchain does not compile here) and the artifact store holds none of "
                         "this problem's kernels");
    return Verdict::yes();
  }

  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<detail::Candidate>> out;
    for (const Config& c : stored_configs(p))
      out.push_back(std::make_unique<TritonCandidate>(p, c, link_.ctx.device.index, sms_));
    if (out.empty()) GT_THROW("load-only and the artifact store holds none of this problem's Triton kernels");
    return out;
  }

  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    require(p);
    Config c = Config::parse(id);
    Verdict v = triton::check(c, p, sms_);
    GT_CHECK(v, "triton: config " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<TritonCandidate>(p, c, link_.ctx.device.index, sms_);
  }

 private:
  // The configs for p; in load-only mode those whose kernels are all in the store.
  std::vector<Config> stored_configs(const GemmProblem& p) const {
    std::vector<Config> out;
    const bool load_only = link_.load_only();
    for (const Config& c : triton::configs_for(p, sms_))
      if (!load_only || link_.stored(triton_jobs(c, p, sms_))) out.push_back(c);
    return out;
  }

  void require(const GemmProblem& p) const {
    Verdict v = available();
    GT_CHECK(v, "triton: not available: " + v.reason);
    v = supports(p);
    GT_CHECK(v, "triton: does not support " + p.str() + ": " + v.reason);
  }

  ToolchainLink link_;
  int sms_;
};

}  // namespace

std::unique_ptr<Backend> make_triton_backend(const BackendContext& ctx) {
  return std::make_unique<TritonBackend>(ctx);
}

}  // namespace gemmtune
