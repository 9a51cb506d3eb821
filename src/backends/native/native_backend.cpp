// The "native" softmax backend: our own CUDA kernels (softmax.hpp), no compile step.
//
// Candidates: native_softmax_configs(problem) less the launches this device cannot make
// (native_softmax_device_check: kernel attributes vs device limits, function attributes,
// residency), each dropped before the race with its reason in the log; each config's name() is
// its id, so that load(problem, id) rebuilds it from the cache (NativeSoftmaxConfig::parse).
// prepare() repeats the device check (a loaded id was never checked here). Available on sm_90
// (what the library is built for).
#include "backends/backend.hpp"
#include "backends/native/softmax.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

constexpr const char* kName = "native";

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
  Verdict available() const override {
    if (dev_.index < 0) return Verdict::no("no CUDA device (the native kernels are built into the library: nothing to precompile)");
    if (dev_.cc_major != 9 || dev_.cc_minor != 0)
      return Verdict::no("the native kernels are built for sm_90a; this device is sm_" + std::to_string(dev_.cc_major) +
                         std::to_string(dev_.cc_minor));
    return Verdict::yes();
  }
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

std::unique_ptr<SoftmaxBackend> make_native_softmax_backend(const BackendContext& ctx) {
  return std::make_unique<NativeSoftmaxBackend>(ctx);
}

}  // namespace gemmtune
