// The triton backend: our Triton templates (python/gemmtune/kernels/triton_gemm.py), compiled
// ahead of time by Python compile workers, loaded and launched from C++ with the driver API.
//
// Candidates: configs_for(problem) (configs.hpp); a candidate's id is its config id, so
// load(problem, id) rebuilds it without a heuristic, and its prepare() is then an artifact
// store hit. prepare() = compile (store hit, or a worker compiles and the cubin is published)
// + cuModuleLoadData + kernel attributes + scratch and split-k workspace; it is thread-safe
// across candidates (each candidate has its own lock; compiles run in parallel workers).
//
// Launch ABI (docs/triton-backend.md): the GEMM kernels take
//   a, b, c, d, bias, scale_a, scale_b, workspace, M, N, K, lda, ldb, ldc, ldd, alpha, beta,
// splitk_reduce takes workspace, c, d, bias, scale_a, scale_b, M, N, ldc, ldd, alpha, beta,
// and both then Triton's hidden global_scratch and profile_scratch pointers.
//
// One compiler (worker pool + artifact store) serves the whole process: the first backend
// created starts it, reading $GEMMTUNE_PYTHON, $GEMMTUNE_PYTHON_DIR, $GEMMTUNE_ARTIFACTS,
// $GEMMTUNE_COMPILE_WORKERS, $GEMMTUNE_COMPILE_TIMEOUT and $GEMMTUNE_COMPILE_FORK_SERVER then.
// Its fork server (Python + Triton imported once; docs/compile-worker.md) starts in the
// background while the engine starts. candidates() (a tune is about to compile) forks the
// compile workers from it in the background, one per artifact missing from the store up to the
// pool's size (milliseconds each: no Python start, no Triton import, no lazy set-up); a process
// that only answers from the tuning cache (load()) starts no more than the server.
//
// Threads and streams: run() may be called from several threads, but a candidate owns ONE
// scratch and workspace buffer, so runs of one candidate on different streams must not overlap.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>

#include "backends/backend.hpp"
#include "backends/lazy_candidate.hpp"
#include "backends/triton/compiler.hpp"
#include "backends/triton/configs.hpp"
#include "backends/triton/launch.hpp"
#include "compile/log_hub.hpp"
#include "core/cuda.hpp"
#include "core/driver.hpp"

namespace gemmtune {
namespace {

using nlohmann::json;
using triton::CompiledArtifact;
using triton::Config;
using triton::Grid;
using triton::LoadedKernel;
using triton::Scratch;

constexpr const char* kName = "triton";
constexpr int kDefaultSms = 132;              // H100 / H200 SXM, when the device reports none

// ---- one process-wide compiler --------------------------------------------------------------

// Forwards the compiler's warnings to every live backend's log.
LogHub& log_hub() {
  static LogHub* hub = new LogHub;  // never destroyed: the compiler may log during exit
  return *hub;
}

std::shared_ptr<triton::Compiler> shared_compiler() {
  static std::mutex mu;
  static std::shared_ptr<triton::Compiler> compiler;
  std::lock_guard<std::mutex> lock(mu);
  if (!compiler)
    compiler = std::make_shared<triton::Compiler>(
        triton::CompilerOptions::defaults([](const std::string& m) { log_hub()(m); }));
  return compiler;
}

// ---- the launch ABI --------------------------------------------------------------------------

// Runtime arguments of each kernel before the two hidden scratch pointers.
constexpr int64_t kGemmArgs = 17, kReduceArgs = 12;

void check_aligned(const void* ptr, const char* what) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
    GT_THROW(std::string("triton: ") + what + " must be 16-byte aligned (the kernels were compiled for it)");
}

CUdeviceptr dptr(const void* p) { return CUdeviceptr(reinterpret_cast<uintptr_t>(p)); }

// ---- the candidate ----------------------------------------------------------------------------

class TritonCandidate final : public LazyCandidate<GemmOp> {
 public:
  TritonCandidate(std::shared_ptr<triton::Compiler> compiler, const GemmProblem& p, const Config& c, int device,
                  int num_sms)
      : compiler_(std::move(compiler)), p_(p), cfg_(c), device_(device), sms_(num_sms) {}

  std::string backend() const override { return kName; }
  std::string id() const override { return cfg_.id(); }
  std::string name() const override { return cfg_.name(); }

  void run(const GemmArgs& g, cudaStream_t s) override {
    std::lock_guard<std::mutex> lock(mu_);
    prepare_locked();
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

 private:
  void prepare_locked() override {
    if (ready_) return;
    std::vector<CompiledArtifact> arts;
    arts.push_back(compiler_->compile(triton::gemm_params(cfg_, p_, sms_)));
    if (cfg_.split_k > 1) arts.push_back(compiler_->compile(triton::reduce_params(cfg_, p_)));
    compile_s_ = 0;
    for (auto& a : arts) compile_s_ += a.compile_s;
    GT_CUDA(cudaSetDevice(device_));  // makes the device's primary context current on this thread
    gemm_ = triton::load_kernel(arts[0], triton::gemm_grid(cfg_, p_, sms_), kGemmArgs, kName, triton::kMaxSharedBytes);
    if (cfg_.split_k > 1) {
      reduce_ = triton::load_kernel(arts[1], triton::reduce_grid(p_), kReduceArgs, kName, triton::kMaxSharedBytes);
      workspace_.allocate(triton::workspace_bytes(cfg_, p_), 16);
    }
    ready_ = true;
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

  std::shared_ptr<triton::Compiler> compiler_;
  GemmProblem p_;
  Config cfg_;
  int device_, sms_;
  bool ready_ = false;
  LoadedKernel gemm_, reduce_;
  Scratch workspace_;  // split-k partials [split_k, m, n] fp32
};

// ---- the backend ------------------------------------------------------------------------------

class TritonBackend final : public Backend {
 public:
  explicit TritonBackend(const BackendContext& ctx)
      : dev_(ctx.device), sms_(ctx.device.sm_count > 0 ? ctx.device.sm_count : kDefaultSms),
        log_id_(log_hub().add(ctx.log)) {
    try {
      compiler_ = shared_compiler();
    } catch (const Error& e) {  // e.g. no home directory for the artifact store
      broken_ = e.message();
      return;
    }
    // Start the fork server (importing Triton takes up to a second) while the engine starts.
    auto probe = [c = compiler_] { return c->available(); };
    try {
      warm_ = std::async(std::launch::async, probe).share();
    } catch (const std::system_error&) {  // no thread to spare: probe on first use
      warm_ = std::async(std::launch::deferred, probe).share();
    }
  }
  ~TritonBackend() override {
    if (warm_.valid()) warm_.wait();
    log_hub().remove(log_id_);
  }

  std::string name() const override { return kName; }
  // Triton's version and a digest of our Python sources: both change what a config compiles to.
  std::string version() const override {
    if (!compiler_) return "triton (unavailable)";
    return "triton " + compiler_->triton_version() + " (templates " + compiler_->sources_digest() + ")";
  }

  Verdict available() const override {
    if (Verdict v = triton::device_verdict(dev_); !v) return v;
    if (!compiler_) return Verdict::no(broken_);
    return warm_.get();
  }

  Verdict supports(const GemmProblem& p) const override {
    if (Verdict v = triton::problem_verdict(p); !v) return v;
    if (triton::configs_for(p, sms_).empty()) return Verdict::no("no Triton config fits this problem");
    return Verdict::yes();
  }

  // Needs no GPU and does not wait for a worker: compiling happens in each candidate's
  // prepare(). Once available() has answered yes, starts workers in the background for the
  // candidates' artifacts that are not in the store yet.
  std::vector<std::unique_ptr<detail::Candidate>> candidates(const GemmProblem& p) override {
    require(p);
    std::vector<std::unique_ptr<detail::Candidate>> out;
    std::vector<json> params;
    for (const Config& c : triton::configs_for(p, sms_)) {
      out.push_back(std::make_unique<TritonCandidate>(compiler_, p, c, dev_.index, sms_));
      params.push_back(triton::gemm_params(c, p, sms_));
      if (c.split_k > 1) params.push_back(triton::reduce_params(c, p));
    }
    prestart(params);
    return out;
  }

  std::unique_ptr<detail::Candidate> load(const GemmProblem& p, const std::string& id) override {
    require(p);
    Config c = Config::parse(id);
    Verdict v = triton::check(c, p, sms_);
    GT_CHECK(v, "triton: config " + id + " cannot run " + p.str() + ": " + v.reason);
    return std::make_unique<TritonCandidate>(compiler_, p, c, dev_.index, sms_);
  }

 private:
  // Only when the availability probe has already answered yes: never waits for a worker here.
  void prestart(const std::vector<json>& params) {
    if (!warm_.valid() || warm_.wait_for(std::chrono::seconds(0)) != std::future_status::ready || !warm_.get())
      return;
    try {
      compiler_->prestart(params);
    } catch (const Error&) {  // only an optimisation: compiles start workers on demand anyway
    }
  }

  void require(const GemmProblem& p) const {
    GT_CHECK(compiler_, "triton: not available: " + broken_);
    Verdict v = supports(p);
    GT_CHECK(v, "triton: does not support " + p.str() + ": " + v.reason);
  }

  DeviceInfo dev_;
  int sms_;
  int log_id_;
  std::shared_ptr<triton::Compiler> compiler_;  // null when it could not be created
  std::string broken_;                          // why not
  std::shared_future<Verdict> warm_;
};

}  // namespace

std::unique_ptr<Backend> make_triton_backend(const BackendContext& ctx) {
  return std::make_unique<TritonBackend>(ctx);
}

// The process-wide compiler, shared with the Triton softmax backend (triton_softmax.cpp).
namespace triton {
std::shared_ptr<Compiler> process_compiler() { return shared_compiler(); }
}  // namespace triton

}  // namespace gemmtune
