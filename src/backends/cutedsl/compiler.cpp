// CuTe DSL compile side: availability (full / load-only), keys, store-or-compile (compiler.hpp).
#include "backends/cutedsl/compiler.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>

#include "compile/compile_util.hpp"
#include "compile/source_hash.hpp"
#include "core/paths.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cutedsl {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The files whose bytes determine an artifact (relative to the python dir): the kernel, its
// compile and link step, the shim template and the C ABI. (worker.py only transports.)
constexpr const char* kSources[] = {"gemmtune/cutedsl/gemm_sm90.py", "gemmtune/cutedsl/compile.py",
                                    "gemmtune/cutedsl/shim_template.cpp", "gemmtune/cutedsl/runtime.cpp",
                                    "gemmtune/cutedsl/gt_cutedsl_abi.h", "gemmtune/cutedsl/shim_common.h"};

}  // namespace

CompilerOptions CompilerOptions::defaults(std::function<void(const std::string&)> log) {
  CompilerOptions o;
  o.pool = WorkerPoolOptions::defaults();
  o.pool.env["GEMMTUNE_WORKER_BACKENDS"] = "cutedsl";
  o.pool.log = log;
  o.python_dir = gemmtune::python_dir();
  o.timeout_s = compile_timeout_s(o.timeout_s);
  o.load_only = env_or_empty("GEMMTUNE_CUTEDSL_LOAD_ONLY") == "1";
  o.log = std::move(log);
  return o;
}

Compiler::Compiler(CompilerOptions options)
    : opt_(std::move(options)),
      pool_(std::make_unique<WorkerPool>(opt_.pool)),
      store_(std::make_unique<ArtifactStore>(opt_.artifacts, opt_.log)) {}

// ---- availability -------------------------------------------------------------------------------

Verdict Compiler::available() {
  std::lock_guard<std::mutex> lock(mu_);
  if (available_) return *available_;
  auto no = [&](std::string why) {
    available_ = Verdict::no(std::move(why));
    return *available_;
  };
  SourcesHash sources = hash_sources(opt_.python_dir, kSources);
  if (sources.missing) return no("kernel sources not found: " + sources.missing->string() + " (set GEMMTUNE_PYTHON_DIR)");
  sources_hash_ = sources.hex;
  const fs::path record = store_->root() / "cutedsl" / "toolchain.json";

  // Full mode: a worker with the DSL.
  std::string why;
  if (opt_.load_only) {
    why = "GEMMTUNE_CUTEDSL_LOAD_ONLY=1";
  } else {
    try {
      json ready = pool_->ready();
      const json versions = ready.value("versions", json::object());
      if (ready.value("worker", 0) != kWorkerProtocol) {
        why = "the compile worker speaks protocol " + ready.value("worker", json(nullptr)).dump() + ", expected " +
              std::to_string(kWorkerProtocol);
      } else if (!versions.contains("cutedsl_toolchain") || !versions["cutedsl_toolchain"].is_string()) {
        why = "no CuTe DSL in the compile worker's Python (" + opt_.pool.command.at(0) + "): " +
              ready.value("missing", json::object()).value("cutedsl", std::string("not reported"));
      } else {
        toolchain_ = versions["cutedsl_toolchain"].get<std::string>();
        try {  // record the toolchain next to the artifacts it keys, for load-only machines
          std::string text = json{{"toolchain", toolchain_}}.dump(2) + "\n";
          if (slurp(record).value_or("") != text) write_atomically(record, text, "cutedsl");
        } catch (const std::exception& e) {
          if (opt_.log) opt_.log(std::string("cutedsl: warning: cannot record the toolchain: ") + e.what());
        }
        available_ = Verdict::yes();
        return *available_;
      }
    } catch (const Error& e) {
      why = e.message();
    } catch (const json::exception& e) {
      why = std::string("the compile worker's ready line is malformed: ") + e.what();
    }
  }
  // Load-only mode: artifacts compiled elsewhere, with their toolchain record.
  if (auto text = slurp(record)) {
    try {
      toolchain_ = json::parse(*text).at("toolchain").get<std::string>();
      load_only_ = true;
      available_ = Verdict::yes();
      return *available_;
    } catch (const std::exception& e) {
      return no(why + "; and " + record.string() + " is unreadable: " + e.what());
    }
  }
  return no(why + "; and no precompiled artifacts (" + record.string() + " is absent)");
}

bool Compiler::load_only() {
  available();
  std::lock_guard<std::mutex> lock(mu_);
  return load_only_;
}

std::string Compiler::toolchain() {
  if (!available()) return {};
  std::lock_guard<std::mutex> lock(mu_);
  return toolchain_;
}

std::string Compiler::sources_digest() {
  available();
  std::lock_guard<std::mutex> lock(mu_);
  return sources_hash_.substr(0, 12);
}

std::string Compiler::version() {
  if (!available()) return "unavailable";
  std::lock_guard<std::mutex> lock(mu_);
  return toolchain_ + " src=" + sources_hash_.substr(0, 12);
}

std::string Compiler::key(const json& params) {
  Verdict v = available();
  GT_CHECK(v, "cutedsl: not available: " + v.reason);
  std::lock_guard<std::mutex> lock(mu_);
  return ArtifactStore::make_key("gemmtune-cutedsl-artifact " + std::to_string(kKeyFormat) + "\nprotocol " +
                                 std::to_string(kWorkerProtocol) + "\ntoolchain " + toolchain_ + "\nsources " +
                                 sources_hash_ + "\nparams " + params.dump() + "\n");
}

std::string Compiler::runtime_key(const std::string& soname) {
  return ArtifactStore::make_key("gemmtune-cutedsl-runtime " + std::to_string(kKeyFormat) + "\n" + soname + "\n");
}

bool Compiler::cached(const json& params) {
  if (!available()) return false;
  auto a = store_->get(key(params));
  if (!a) return false;
  const std::string rk = a->meta.value("runtime_key", std::string());
  std::error_code ec;
  return !rk.empty() && fs::exists(store_->bin_path(rk), ec) && fs::exists(store_->json_path(rk), ec);
}

Compiled Compiler::with_runtime(Artifact kernel, bool hit, double compile_s) {
  const std::string rk = kernel.meta.value("runtime_key", std::string());
  const std::string soname = kernel.meta.value("runtime_soname", std::string());
  GT_CHECK(!rk.empty() && rk == runtime_key(soname),
           "cutedsl: artifact " + kernel.key.substr(0, 16) + " does not name its runtime library");
  auto rt = store_->get(rk);
  GT_CHECK(rt.has_value(), "cutedsl: the artifact store " + store_->root().string() + " lacks the runtime library " +
                               soname + " that artifact " + kernel.key.substr(0, 16) + " needs");
  return Compiled{std::move(kernel), std::move(*rt), compile_s, hit};
}

// ---- compile ------------------------------------------------------------------------------------

int Compiler::prestart(const std::vector<json>& params) {
  if (!available() || load_only()) return 0;
  std::set<std::string> misses;
  for (const json& p : params)
    if (!cached(p)) misses.insert(key(p));
  if (!misses.empty()) pool_->prestart(misses.size());
  return int(misses.size());
}

Compiled Compiler::compile(const json& params) {
  Verdict v = available();
  GT_CHECK(v, "cutedsl: not available: " + v.reason);
  const std::string k = key(params);
  if (auto a = store_->get(k)) return with_runtime(std::move(*a), true, 0.0);
  if (load_only())
    GT_THROW("cutedsl: " + params.dump() + " is not in the artifact store " + store_->root().string() +
             " and this machine cannot compile (load-only: no CuTe DSL here)");

  return flights_.run(k, [&] { return compile_miss(k, params); });
}

Compiled Compiler::compile_miss(const std::string& key, const json& params) {
  const fs::path tmp = store_->root() / "cutedsl" / "tmp";
  fs::create_directories(tmp);
  TempDir dir(tmp, "compile-", "cutedsl");
  json request = {{"op", "compile"}, {"backend", "cutedsl"}, {"params", params}, {"out_dir", dir.path().string()}};
  auto t0 = std::chrono::steady_clock::now();
  json r = pool_->request(std::move(request), opt_.timeout_s);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    check_worker_answer(r, "cutedsl", params.dump(), opt_.log);
    GT_CHECK(r.contains("artifact") && r["artifact"].is_string() && r.contains("meta") && r["meta"].is_object(),
             "cutedsl: the compile worker's answer lacks artifact or meta: " + first_line(r.dump()));
    const fs::path file = r["artifact"].get<std::string>();
    auto bytes = slurp(file);
    GT_CHECK(bytes && !bytes->empty(), "cutedsl: the compile worker's artifact " + file.string() + " is missing or empty");
    const json& meta_in = r["meta"];
    // The .so must report exactly the config asked for (Library::open checks it again).
    GT_CHECK(meta_in.value("config", std::string()) == params.dump(),
             "cutedsl: the worker compiled '" + meta_in.value("config", std::string()) + "', asked for '" +
                 params.dump() + "'");
    const double compile_s = r.value("compile_s", wall);
    // The runtime library: published once per toolchain (its bytes are the same every time).
    GT_CHECK(r.contains("runtime") && r["runtime"].is_object(), "cutedsl: the compile worker's answer lacks runtime");
    const std::string soname = r["runtime"].value("soname", std::string());
    const fs::path rt_file = r["runtime"].value("path", std::string());
    GT_CHECK(soname.rfind("libgt_cutedsl_rt_", 0) == 0 && fs::path(rt_file).filename() == soname,
             "cutedsl: the compile worker's runtime library is malformed: " + first_line(r["runtime"].dump()));
    const std::string rk = runtime_key(soname);
    if (!store_->get(rk)) {
      auto rt_bytes = slurp(rt_file);
      GT_CHECK(rt_bytes && !rt_bytes->empty(), "cutedsl: the runtime library " + rt_file.string() + " is missing or empty");
      store_->put(rk, std::move(*rt_bytes), json{{"backend", "cutedsl"}, {"runtime_soname", soname}, {"toolchain", toolchain()}});
    }
    json meta = {{"backend", "cutedsl"},
                 {"runtime_soname", soname},
                 {"runtime_key", rk},
                 {"params", params},
                 {"config", params.dump()},
                 {"toolchain", toolchain()},
                 {"sources", sources_digest()},
                 {"compile_s", compile_s},
                 {"times", r.value("times", json::object())},
                 {"stages", meta_in.value("stages", 0)}};
    return with_runtime(store_->put(key, std::move(*bytes), std::move(meta)), false, compile_s);
  } catch (const json::exception& e) {
    GT_THROW(std::string("cutedsl: the compile worker's answer is malformed: ") + e.what());
  }
}

}  // namespace gemmtune::cutedsl
