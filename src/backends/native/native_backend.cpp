// The "native" backends: our own CUDA kernels, built into the library (no compile step).
//
// GEMM (decode_gemm.hpp): the decode kernels for m <= 64 in the nn.Linear layout; candidates
// are decode_configs(problem) less those this device cannot launch (decode_device_check), each
// dropped with its reason in the log; the config's name() is its id.
//
// Softmax (softmax.hpp): candidates: native_softmax_configs(problem) less the launches this device cannot make
// (native_softmax_device_check: kernel attributes vs device limits, function attributes,
// residency), each dropped before the race with its reason in the log; each config's name() is
// its id, so that load(problem, id) rebuilds it from the cache (NativeSoftmaxConfig::parse).
// prepare() repeats the device check (a loaded id was never checked here). Available on sm_90
// (what the library is built for).
#include "backends/backend.hpp"
#include "backends/native/decode_gemm.hpp"
#include "backends/native/softmax.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

constexpr const char* kName = "native";

Verdict native_available(const DeviceInfo& dev) {
  if (dev.index < 0) return Verdict::no("no CUDA device (the native kernels are built into the library: nothing to precompile)");
  if (dev.cc_major != 9 || dev.cc_minor != 0)
    return Verdict::no("the native kernels are built for sm_90a; this device is sm_" + std::to_string(dev.cc_major) +
                       std::to_string(dev.cc_minor));
  return Verdict::yes();
}

class NativeGemmCandidate final : public detail::CandidateFor<GemmOp> {
 public:
  NativeGemmCandidate(const GemmProblem& p, const native::DecodeConfig& c) : p_(p), cfg_(c) {}
  std::string backend() const override { return kName; }
  std::string id() const override { return cfg_.name(); }
  std::string name() const override { return cfg_.name(); }
  void prepare(std::span<const compile::Built>) override {
    const std::string why = native::decode_device_check(cfg_, p_);
    GT_CHECK(why.empty(), "native: " + cfg_.name() + " cannot be launched for " + p_.str() + " on this device: " + why);
  }
  void run(const GemmArgs& a, cudaStream_t s) override { native::run_decode_gemm(cfg_, p_, a, s); }
  bool can_overlap() const override { return true; }
  void run_overlapped(const GemmArgs& a, cudaStream_t s) override { native::run_decode_gemm(cfg_, p_, a, s, true); }

 private:
  GemmProblem p_;
  native::DecodeConfig cfg_;
};

class NativeGemmBackend final : public Backend {
 public:
  explicit NativeGemmBackend(const BackendContext& ctx) : dev_(ctx.device), log_(ctx.log), max_configs_(ctx.max_configs) {}
  std::string name() const override { return kName; }
  std::string version() const override { return std::string("native ") + native::kNativeGemmVersion; }
  Verdict available() const override { return native_available(dev_); }
  Verdict supports(const GemmProblem& p) const override {
    const std::string why = native::decode_unsupported(p);
    return why.empty() ? Verdict::yes() : Verdict::no(why);
  }
  std::vector<std::unique_ptr<Cand>> candidates(const GemmProblem& p) override {
    std::vector<std::unique_ptr<Cand>> out;
    for (const auto& c : native::decode_configs(p, dev_.sm_count, max_configs_)) {
      if (std::string why = native::decode_device_check(c, p); !why.empty()) {
        log_.debug("native: " + p.str() + ": " + c.name() + " skipped: " + why);
        continue;
      }
      out.push_back(std::make_unique<NativeGemmCandidate>(p, c));
    }
    GT_CHECK(!out.empty(), "native: no decode config can be launched for " + p.str() + " on this device");
    return out;
  }
  std::unique_ptr<Cand> load(const GemmProblem& p, const std::string& id) override {
    const native::DecodeConfig c = native::DecodeConfig::parse(id);
    const std::string why = c.cannot_run(p);
    GT_CHECK(why.empty(), "native: config " + id + " cannot run " + p.str() + ": " + why);
    return std::make_unique<NativeGemmCandidate>(p, c);
  }

 private:
  DeviceInfo dev_;
  Log log_;
  int max_configs_;
};

class NativeSoftmaxCandidate final : public detail::CandidateFor<SoftmaxOp> {
 public:
  NativeSoftmaxCandidate(const SoftmaxProblem& p, const native::NativeSoftmaxConfig& c) : p_(p), cfg_(c) {}
  std::string backend() const override { return kName; }
  std::string id() const override { return cfg_.name(); }
  std::string name() const override { return cfg_.name(); }
  void prepare(std::span<const compile::Built>) override {
    const std::string why = native::native_softmax_device_check(cfg_, p_);
    GT_CHECK(why.empty(), "native: " + cfg_.name() + " cannot be launched for " + p_.str() + " on this device: " + why);
  }
  void run(const SoftmaxArgs& a, cudaStream_t s) override { native::run_native_softmax(cfg_, p_, a.x, a.y, s); }

 private:
  SoftmaxProblem p_;
  native::NativeSoftmaxConfig cfg_;
};

class NativeSoftmaxBackend final : public SoftmaxBackend {
 public:
  explicit NativeSoftmaxBackend(const BackendContext& ctx) : dev_(ctx.device), log_(ctx.log) {}
  std::string name() const override { return kName; }
  std::string version() const override { return std::string("native ") + native::kNativeSoftmaxVersion; }
  Verdict available() const override { return native_available(dev_); }
  Verdict supports(const SoftmaxProblem& p) const override {
    try {
      p.validate();
    } catch (const Error& e) {
      return Verdict::no(e.message());
    }
    return Verdict::yes();
  }
  std::vector<std::unique_ptr<Cand>> candidates(const SoftmaxProblem& p) override {
    std::vector<std::unique_ptr<Cand>> out;
    for (const auto& c : native::native_softmax_configs(p, dev_.sm_count)) {
      // A launch this device cannot make would only fail in the race: dropped here, with why.
      if (std::string why = native::native_softmax_device_check(c, p); !why.empty()) {
        log_.debug("native: " + p.str() + ": " + c.name() + " skipped: " + why);
        continue;
      }
      out.push_back(std::make_unique<NativeSoftmaxCandidate>(p, c));
    }
    return out;
  }
  std::unique_ptr<Cand> load(const SoftmaxProblem& p, const std::string& id) override {
    const native::NativeSoftmaxConfig c = native::NativeSoftmaxConfig::parse(id);
    const std::string why = c.cannot_run(p);
    GT_CHECK(why.empty(), "native: config " + id + " cannot run " + p.str() + ": " + why);
    return std::make_unique<NativeSoftmaxCandidate>(p, c);
  }

 private:
  DeviceInfo dev_;
  Log log_;
};

}  // namespace

std::unique_ptr<Backend> make_native_gemm_backend(const BackendContext& ctx) {
  return std::make_unique<NativeGemmBackend>(ctx);
}

std::unique_ptr<SoftmaxBackend> make_native_softmax_backend(const BackendContext& ctx) {
  return std::make_unique<NativeSoftmaxBackend>(ctx);
}

}  // namespace gemmtune
