// backend_names, backend_status (include/gemmtune/backends.hpp) and the registry's name check.
#include "gemmtune/backends.hpp"

#include <mutex>

#include "compile/artifact_cache.hpp"
#include "compile/python_worker.hpp"
#include "core/settings.hpp"
#include "engine/registry.hpp"

namespace gemmtune {

namespace {
struct Extra {
  std::string name;
  GemmBackendFactory make;
};
std::mutex extras_mu;
std::vector<Extra>& extras() {
  static std::vector<Extra> list;
  return list;
}
}  // namespace

void register_extra_backend(const std::string& name, GemmBackendFactory make) {
  GT_CHECK(make != nullptr && !name.empty(), "register_extra_backend: a name and a factory are required");
  std::lock_guard lock(extras_mu);
  for (auto& r : kGemmBackends) GT_CHECK(name != r.name, "register_extra_backend: '" + name + "' is a built-in backend");
  for (Extra& e : extras())
    if (e.name == name) {
      e.make = make;
      return;
    }
  extras().push_back({name, make});
}

std::vector<std::string> extra_backend_names() {
  std::lock_guard lock(extras_mu);
  std::vector<std::string> out;
  for (const Extra& e : extras()) out.push_back(e.name);
  return out;
}

std::unique_ptr<BackendFor<GemmOp>> make_extra_backend(const std::string& name, const BackendContext& ctx) {
  GemmBackendFactory make = nullptr;
  {
    std::lock_guard lock(extras_mu);
    for (const Extra& e : extras())
      if (e.name == name) make = e.make;
  }
  GT_CHECK(make, "make_extra_backend: no backend '" + name + "' is registered");
  return make(ctx);
}

void check_backend_names(const std::vector<std::string>& names) {
  std::vector<std::string> known = backend_names("gemm");
  for (const std::string& n : backend_names("softmax"))
    if (std::find(known.begin(), known.end(), n) == known.end()) known.push_back(n);
  for (const std::string& n : extra_backend_names()) known.push_back(n);
  std::string text;
  for (auto& k : known) text += text.empty() ? k : ", " + k;
  for (const std::string& want : names)
    GT_CHECK_INVALID(std::find(known.begin(), known.end(), want) != known.end(),
                     "backends: unknown backend '" + want + "' (known: " + text + ")");
}

EngineSetup::EngineSetup(const EngineOptions& options) {
  check_backend_names(options.backends);
  opt = resolve(options);
  log = Log(opt.log, opt.log_level);
  artifacts = std::make_unique<compile::ArtifactCache>(opt.compile, compile::make_toolchains(opt.compile, log), log);
  artifacts->start_probes();  // a Python worker start takes about a second: overlap it
}

std::vector<std::string> backend_names(const std::string& op) {
  std::vector<std::string> out;
  if (op == GemmOp::name)
    for (auto& r : kGemmBackends) out.push_back(r.name);
  else if (op == SoftmaxOp::name)
    for (auto& r : kSoftmaxBackends) out.push_back(r.name);
  else if (op == GroupedOp::name)
    for (auto& r : kGroupedBackends) out.push_back(r.name);
  else
    GT_THROW("op: unknown op '" + op + "' (gemm, softmax, grouped)");
  return out;
}

namespace {
template <class Op>
void add_status(std::vector<BackendStatus>& out, const std::vector<std::unique_ptr<BackendFor<Op>>>& backends) {
  for (auto& b : backends) {
    BackendStatus s;
    s.op = Op::name, s.name = b->name();
    Verdict v = b->available();
    s.available = v.ok;
    if (v) s.version = b->version();
    else s.reason = v.reason;
    out.push_back(std::move(s));
  }
}
}  // namespace

std::vector<BackendStatus> backend_status(const EngineOptions& options, const DeviceInfo& target) {
  const EngineSetup setup(options);
  const BackendContext ctx = setup.context(target);
  std::vector<BackendStatus> out;
  add_status(out, make_backends<GemmOp>(setup.opt.backends, ctx));
  add_status(out, make_backends<SoftmaxOp>(setup.opt.backends, ctx));
  add_status(out, make_backends<GroupedOp>(setup.opt.backends, ctx));
  return out;
}

}  // namespace gemmtune
