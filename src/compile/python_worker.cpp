// The Python compile-worker toolchains (python_worker.hpp).
#include "compile/python_worker.hpp"

#include <chrono>
#include <mutex>
#include <optional>

#include "compile/compile_util.hpp"
#include "compile/nvcc.hpp"
#include "compile/source_hash.hpp"
#include "compile/worker_pool.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::compile {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What differs between the two worker-backed compilers.
struct Spec {
  std::string name;                  // "triton", "cutedsl": the request's backend
  std::vector<const char*> sources;  // hashed into every key, relative to the python dir
  const char* required = nullptr;    // only this source must exist (null: every one)
  const char* version_field;         // the ready line's versions.<field>
  const char* missing_field;         // the ready line's missing.<field>
  const char* missing_what;          // "triton", "CuTe DSL"
  bool fork_server;
  std::map<std::string, std::string> env;
};

class PythonWorkerToolchain : public Toolchain {
 public:
  PythonWorkerToolchain(Spec spec, const CompileOptions& o, Log log)
      : spec_(std::move(spec)), opt_(o), log_(std::move(log)) {}

  std::string name() const override { return spec_.name; }

  Verdict probe() override {
    if (Verdict v = hash(); !v) return v;
    json ready;
    try {
      ready = pool().ready();
    } catch (const Error& e) {
      return Verdict::no(e.message());
    }
    try {
      if (ready.value("worker", 0) != kWorkerProtocol)
        return Verdict::no("the compile worker speaks protocol " + ready.value("worker", json(nullptr)).dump() +
                           ", expected " + std::to_string(kWorkerProtocol));
      const json versions = ready.value("versions", json::object());
      if (!versions.contains(spec_.version_field) || !versions[spec_.version_field].is_string())
        return Verdict::no(std::string("no ") + spec_.missing_what + " in the compile worker's Python (" + opt_.python +
                           "): " + ready.value("missing", json::object()).value(spec_.missing_field, std::string("not reported")));
      version_ = versions[spec_.version_field].get<std::string>();
    } catch (const json::exception& e) {
      return Verdict::no(std::string("the compile worker's ready line is malformed: ") + e.what());
    }
    return Verdict::yes();
  }

  json record() const override { return {{record_field(), version_}}; }
  void restore(const json& j) override {
    if (Verdict v = hash(); !v) GT_THROW(v.reason);
    version_ = j.at(record_field()).get<std::string>();
  }

  std::string version() const override { return version_; }
  // The first 12 hex digits of the sources' hash (the backends' version text shows them).
  std::string sources_digest() const override { return sources_.substr(0, 12); }

  std::string key_material(const Job& job) const override {
    return "gemmtune-" + spec_.name + "-artifact 1\nprotocol " + std::to_string(kWorkerProtocol) + "\n" +
           version_lines() + "sources " + sources_ + "\nparams " + job.params.dump() + "\n";
  }

  void warm(size_t misses) override { pool().prestart(misses); }

  Output compile(const Job& job, const fs::path& tmp, double timeout_s) override {
    json request = {{"op", "compile"}, {"backend", spec_.name}, {"params", job.params}, {"out_dir", tmp.string()}};
    if (job.params.contains("kernel") && job.params["kernel"].is_string()) request["kernel"] = job.params["kernel"];
    const auto t0 = std::chrono::steady_clock::now();
    json r = pool().request(std::move(request), timeout_s);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    try {
      check_worker_answer(r, spec_.name, job.what, log_.warnings());
      GT_CHECK(r.contains("artifact") && r["artifact"].is_string() && r.contains("meta") && r["meta"].is_object(),
               spec_.name + ": the compile worker's answer lacks artifact or meta: " + first_line(r.dump()));
      const fs::path file = r["artifact"].get<std::string>();
      auto bytes = slurp(file);
      GT_CHECK(bytes && !bytes->empty(),
               spec_.name + ": the compile worker's artifact " + file.string() + " is missing or empty");
      Output out;
      out.bytes = std::move(*bytes);
      out.seconds = r.value("compile_s", wall);
      out.cpu_seconds = r.value("cpu_s", -1.0);  // measured by the pool (WorkerPool::request)
      accept(r, job, out);
      return out;
    } catch (const json::exception& e) {
      GT_THROW(spec_.name + ": the compile worker's answer is malformed: " + e.what());
    }
  }

 protected:
  virtual const char* record_field() const = 0;
  virtual std::string version_lines() const = 0;
  // Fills out.meta (and extras) from the worker's ok answer `r`.
  virtual void accept(const json& r, const Job& job, Output& out) const = 0;

  const Spec spec_;
  const CompileOptions opt_;
  Log log_;
  std::string version_, sources_;

 private:
  Verdict hash() {
    SourcesHash h = hash_sources(opt_.python_dir, spec_.sources, [&](std::string_view rel) {
      return !spec_.required || rel == spec_.required;
    });
    if (h.missing)
      return Verdict::no(spec_.name + " kernel sources not found: " + h.missing->string() +
                         " (set compile.python_dir / $GEMMTUNE_PYTHON_DIR)");
    sources_ = h.hex;
    return Verdict::yes();
  }

  WorkerPool& pool() {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_) {
      WorkerPoolOptions w = WorkerPoolOptions::for_python(opt_);
      for (const auto& [k, v] : spec_.env) w.env[k] = v;
      w.fork_server = spec_.fork_server;
      w.log = log_.debugs();  // worker starts, reaps, a dropped fork server: diagnostics
      pool_ = std::make_unique<WorkerPool>(std::move(w));
    }
    return *pool_;
  }

  std::mutex pool_mu_;
  std::unique_ptr<WorkerPool> pool_;
};

class TritonToolchain final : public PythonWorkerToolchain {
 public:
  TritonToolchain(const CompileOptions& o, Log log)
      : PythonWorkerToolchain(Spec{"triton",
                                   {"gemmtune/kernels/triton_gemm.py", "gemmtune/triton_compile.py", "gemmtune/worker.py"},
                                   "gemmtune/kernels/triton_gemm.py",
                                   "triton",
                                   "triton",
                                   "triton",
                                   o.fork_server,
                                   {}},
                              o, std::move(log)) {}

 protected:
  const char* record_field() const override { return "triton"; }
  std::string version_lines() const override { return "triton " + version_ + "\ntarget cuda sm_90a\n"; }
  void accept(const json& r, const Job& job, Output& out) const override {
    GT_CHECK(r.contains("name") && r["name"].is_string(),
             "triton: the compile worker's answer lacks name: " + first_line(r.dump()));
    out.meta = job.meta;
    out.meta.update(json{{"backend", "triton"},   {"kernel", job.params.value("kernel", std::string())},
                         {"function", r["name"]}, {"launch", r["meta"]},
                         {"compile_s", out.seconds}, {"cpu_s", out.cpu_seconds}, {"triton", version_},
                         {"sources", sources_},   {"params", job.params}});
  }
};

class CutedslToolchain final : public PythonWorkerToolchain {
 public:
  CutedslToolchain(const CompileOptions& o, Log log)
      : PythonWorkerToolchain(Spec{"cutedsl",
                                   {"gemmtune/cutedsl/gemm_sm90.py", "gemmtune/cutedsl/compile.py",
                                    "gemmtune/cutedsl/gemm_shim.cpp", "gemmtune/cutedsl/grouped_shim.cpp",
                                    "gemmtune/cutedsl/runtime.cpp",
                                    "gemmtune/cutedsl/gt_cutedsl_abi.h", "gemmtune/cutedsl/shim_common.h"},
                                   nullptr,
                                   "cutedsl_toolchain",
                                   "cutedsl",
                                   "CuTe DSL",
                                   false,
                                   {{"GEMMTUNE_WORKER_BACKENDS", "cutedsl"}}},
                              o, std::move(log)) {}

  // The kernel .so needs its runtime library loaded first (DT_NEEDED by soname).
  std::vector<std::string> deps(const Artifact& a) const override {
    const std::string rk = a.meta.value("runtime_key", std::string());
    const std::string soname = a.meta.value("runtime_soname", std::string());
    GT_CHECK(!rk.empty() && rk == cutedsl_runtime_key(soname),
             "cutedsl: artifact " + a.key.substr(0, 16) + " does not name its runtime library");
    return {rk};
  }

 protected:
  const char* record_field() const override { return "toolchain"; }
  std::string version_lines() const override { return "toolchain " + version_ + "\n"; }
  void accept(const json& r, const Job& job, Output& out) const override {
    const json& meta_in = r["meta"];
    // The .so must report exactly the config asked for (the loader checks it again).
    GT_CHECK(meta_in.value("config", std::string()) == job.params.dump(),
             "cutedsl: the worker compiled '" + meta_in.value("config", std::string()) + "', asked for '" +
                 job.params.dump() + "'");
    GT_CHECK(r.contains("runtime") && r["runtime"].is_object(), "cutedsl: the compile worker's answer lacks runtime");
    const std::string soname = r["runtime"].value("soname", std::string());
    const fs::path rt_file = r["runtime"].value("path", std::string());
    GT_CHECK(soname.rfind("libgt_cutedsl_rt_", 0) == 0 && rt_file.filename() == soname,
             "cutedsl: the compile worker's runtime library is malformed: " + first_line(r["runtime"].dump()));
    const std::string rk = cutedsl_runtime_key(soname);
    auto rt_bytes = slurp(rt_file);
    GT_CHECK(rt_bytes && !rt_bytes->empty(), "cutedsl: the runtime library " + rt_file.string() + " is missing or empty");
    out.extras.push_back(
        {rk, std::move(*rt_bytes), json{{"backend", "cutedsl"}, {"runtime_soname", soname}, {"toolchain", version_}}});
    out.meta = job.meta;
    out.meta.update(json{{"backend", "cutedsl"},
                         {"runtime_soname", soname},
                         {"runtime_key", rk},
                         {"params", job.params},
                         {"config", job.params.dump()},
                         {"toolchain", version_},
                         {"sources", sources_digest()},
                         {"compile_s", out.seconds},
                         {"cpu_s", out.cpu_seconds},
                         {"times", r.value("times", json::object())},
                         {"stages", meta_in.value("stages", 0)}});
  }
};

}  // namespace

std::string cutedsl_runtime_key(const std::string& soname) {
  return ArtifactStore::make_key("gemmtune-cutedsl-runtime 1\n" + soname + "\n");
}

std::unique_ptr<Toolchain> make_triton_toolchain(const CompileOptions& options, Log log) {
  return std::make_unique<TritonToolchain>(options, std::move(log));
}
std::unique_ptr<Toolchain> make_cutedsl_toolchain(const CompileOptions& options, Log log) {
  return std::make_unique<CutedslToolchain>(options, std::move(log));
}

std::vector<std::unique_ptr<Toolchain>> make_toolchains(const CompileOptions& options, Log log) {
  std::vector<std::unique_ptr<Toolchain>> out;
  out.push_back(make_nvcc_toolchain(options));
  out.push_back(make_triton_toolchain(options, log));
  out.push_back(make_cutedsl_toolchain(options, log));
  return out;
}

}  // namespace gemmtune::compile
