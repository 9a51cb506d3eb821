// Triton compile side: availability probe, artifact keys, store-or-compile, precompile.
#include "backends/triton/compiler.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>

#include "compile/compile_util.hpp"
#include "compile/source_hash.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::triton {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The Python files whose bytes determine a compiled kernel (relative to the python dir).
constexpr const char* kTemplate = "gemmtune/kernels/triton_gemm.py";
constexpr const char* kSources[] = {kTemplate, "gemmtune/triton_compile.py", "gemmtune/worker.py"};

}  // namespace

CompilerOptions CompilerOptions::defaults(std::function<void(const std::string&)> log) {
  CompilerOptions o;
  o.pool = WorkerPoolOptions::defaults();
  o.pool.log = log;
  // Workers forked from one warmed-up fork server (docs/compile-worker.md);
  // GEMMTUNE_COMPILE_FORK_SERVER=0 spawns each one instead.
  const char* fs_env = std::getenv("GEMMTUNE_COMPILE_FORK_SERVER");
  o.pool.fork_server = !(fs_env && std::string(fs_env) == "0");
  o.python_dir = gemmtune::python_dir();
  o.timeout_s = compile_timeout_s(o.timeout_s);
  o.log = std::move(log);
  return o;
}

Compiler::Compiler(CompilerOptions options)
    : opt_(std::move(options)),
      pool_(std::make_unique<WorkerPool>(opt_.pool)),
      store_(std::make_unique<ArtifactStore>(opt_.artifacts, opt_.log)) {}

// ---- availability -----------------------------------------------------------------------------

Verdict Compiler::available() {
  std::lock_guard<std::mutex> lock(mu_);
  if (available_) return *available_;
  auto no = [&](std::string why) {
    available_ = Verdict::no(std::move(why));
    return *available_;
  };
  // Only the template is required; another source that cannot be read is hashed as "(absent)".
  SourcesHash sources =
      hash_sources(opt_.python_dir, kSources, [](std::string_view rel) { return rel == kTemplate; });
  if (sources.missing)
    return no("Triton templates not found at " + sources.missing->string() + " (set GEMMTUNE_PYTHON_DIR)");
  sources_hash_ = sources.hex;
  json ready;
  try {
    ready = pool_->ready();
  } catch (const Error& e) {
    return no(e.message());
  }
  try {
    return accept_ready(ready);
  } catch (const json::exception& e) {
    return no(std::string("the compile worker's ready line is malformed: ") + e.what());
  }
}

// Under mu_: checks the ready line's protocol and Triton version.
Verdict Compiler::accept_ready(const json& ready) {
  auto no = [&](std::string why) {
    available_ = Verdict::no(std::move(why));
    return *available_;
  };
  if (ready.value("worker", 0) != kWorkerProtocol)
    return no("the compile worker speaks protocol " + ready.value("worker", json(nullptr)).dump() + ", expected " +
              std::to_string(kWorkerProtocol));
  const json versions = ready.value("versions", json::object());
  if (!versions.contains("triton") || !versions["triton"].is_string()) {
    std::string why = ready.value("missing", json::object()).value("triton", std::string("not reported"));
    return no("no triton in the compile worker's Python: " + why);
  }
  triton_version_ = versions["triton"].get<std::string>();
  available_ = Verdict::yes();
  return *available_;
}

std::string Compiler::triton_version() {
  return available() ? triton_version_ : std::string();
}

std::string Compiler::sources_digest() {
  available();
  std::lock_guard<std::mutex> lock(mu_);
  return sources_hash_.substr(0, 12);
}

std::string Compiler::key(const json& params) {
  Verdict v = available();
  GT_CHECK(v, "triton: not available: " + v.reason);
  std::string material = "gemmtune-triton-artifact 1\nprotocol " + std::to_string(kWorkerProtocol) + "\ntriton " +
                         triton_version_ + "\ntarget cuda sm_90a\nsources " + sources_hash_ + "\nparams " +
                         params.dump() + "\n";
  return ArtifactStore::make_key(material);
}

// ---- compile ----------------------------------------------------------------------------------

int Compiler::prestart(const std::vector<json>& params) {
  if (!available()) return 0;
  std::set<std::string> misses;
  for (const json& p : params) {
    std::string k = key(p);
    std::error_code ec;
    if (!fs::exists(store_->bin_path(k), ec) || !fs::exists(store_->json_path(k), ec)) misses.insert(k);
  }
  if (!misses.empty()) pool_->prestart(misses.size());
  return int(misses.size());
}

CompiledArtifact Compiler::from_artifact(Artifact a, bool hit) {
  const json& m = a.meta;
  bool ok = m.contains("function") && m["function"].is_string() && m.contains("launch") &&
            m["launch"].is_object() && m["launch"].contains("shared") && m["launch"].contains("num_warps");
  GT_CHECK(ok, "triton: artifact " + a.key + " lacks its launch metadata");
  CompiledArtifact out;
  out.kernel = m.value("kernel", std::string());
  out.function = m["function"].get<std::string>();
  out.launch = m["launch"];
  out.compile_s = hit ? 0.0 : m.value("compile_s", 0.0);
  out.store_hit = hit;
  out.artifact = std::move(a);
  return out;
}

CompiledArtifact Compiler::compile(const json& params) {
  const std::string k = key(params);
  if (auto a = store_->get(k)) return from_artifact(std::move(*a), true);

  return flights_.run(k, [&] { return compile_miss(k, params); });
}

CompiledArtifact Compiler::compile_miss(const std::string& key, const json& params) {
  TempDir dir(fs::temp_directory_path(), "gemmtune-compile-", "triton");
  const std::string kernel = params.value("kernel", std::string());
  json request = {{"op", "compile"}, {"backend", "triton"}, {"kernel", kernel},
                  {"params", params},  {"out_dir", dir.path().string()}};
  auto t0 = std::chrono::steady_clock::now();
  json r = pool_->request(std::move(request), opt_.timeout_s);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    return accept_answer(key, params, r, wall);
  } catch (const json::exception& e) {
    GT_THROW(std::string("triton: the compile worker's answer is malformed: ") + e.what());
  }
}

CompiledArtifact Compiler::accept_answer(const std::string& key, const json& params, const json& r, double wall) {
  const std::string kernel = params.value("kernel", std::string());
  check_worker_answer(r, "triton", kernel + " " + params.dump(), opt_.log);
  bool ok = r.contains("artifact") && r["artifact"].is_string() && r.contains("name") && r["name"].is_string() &&
            r.contains("meta") && r["meta"].is_object();
  GT_CHECK(ok, "triton: the compile worker's answer lacks artifact, name or meta: " + first_line(r.dump()));
  fs::path file = r["artifact"].get<std::string>();
  auto bytes = slurp(file);
  GT_CHECK(bytes && !bytes->empty(), "triton: the compile worker's artifact " + file.string() + " is missing or empty");
  double compile_s = r.value("compile_s", wall);
  json meta = {{"backend", "triton"},         {"kernel", kernel},     {"function", r["name"]},
               {"launch", r["meta"]},         {"compile_s", compile_s}, {"triton", triton_version_},
               {"sources", sources_hash_},    {"params", params}};
  CompiledArtifact out = from_artifact(store_->put(key, std::move(*bytes), std::move(meta)), false);
  out.compile_s = compile_s;
  return out;
}

// ---- precompile -------------------------------------------------------------------------------

std::vector<Precompiled> precompile(Compiler& compiler, const GemmProblem& problem, const std::vector<Config>& configs,
                                    int num_sms) {
  std::vector<std::future<Precompiled>> jobs;
  for (const Config& c : configs) {
    jobs.push_back(std::async(std::launch::async, [&compiler, &problem, c, num_sms] {
      Precompiled out{c, {}, {}};
      try {
        out.artifacts.push_back(compiler.compile(gemm_params(c, problem, num_sms)));
        if (c.split_k > 1) out.artifacts.push_back(compiler.compile(reduce_params(c, problem)));
      } catch (const Error& e) {
        out.artifacts.clear();
        out.error = e.message();
      }
      return out;
    }));
  }
  std::vector<Precompiled> out;
  for (auto& j : jobs) out.push_back(j.get());
  return out;
}

}  // namespace gemmtune::triton
