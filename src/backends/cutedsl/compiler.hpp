// The CuTe DSL backend's compile side (no GPU needed): compile params -> a self-contained .so,
// through the artifact store (hit) or the shared Python compile workers (miss: the worker runs
// python/gemmtune/cutedsl/compile.py, then the .so is published).
//
//   cutedsl::Compiler compiler(cutedsl::CompilerOptions::defaults(log));
//   if (Verdict v = compiler.available(); !v) ... v.reason ...
//   cutedsl::Compiled c = compiler.compile(cutedsl::params(config, problem));
//
// Modes. Full: a worker starts (GEMMTUNE_WORKER_BACKENDS=cutedsl) and reports the DSL and its
// toolchain ("dsl=4.8.1 flavor=cu13 dsl_cuda=13.4 arch=sm_90a cxx=... cudart_static=13000");
// that toolchain text is recorded in <store>/cutedsl/toolchain.json. Load-only: no worker with
// the DSL (the GPU machine), but the store holds a toolchain record: keys are computed with it
// and only artifacts already in the store can be used. $GEMMTUNE_CUTEDSL_LOAD_ONLY=1 skips the
// worker. Neither: not available, with both reasons.
//
// Artifacts: a kernel .so per params (~50 kB) and, per toolchain, one shared runtime .so
// (libgt_cutedsl_rt_<hash>.so, ~1 MB: the DSL's and CUDA's static runtimes) that every kernel .so
// names as DT_NEEDED; a kernel's metadata names its runtime ("runtime_soname", "runtime_key").
// Kernel key: SHA-256 of (key format, the toolchain text, SHA-256 of the bytes of the kernel,
// compile, shim, runtime and ABI sources, the params JSON); runtime key: SHA-256 of its soname
// (which hashes its toolchain and source). compile() is thread-safe; concurrent compiles of one
// key share one request.
#pragma once

#include <algorithm>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "compile/precompile_items.hpp"
#include "compile/single_flight.hpp"
#include "gemmtune/error.hpp"
#include "compile/worker_pool.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune::cutedsl {

constexpr int kWorkerProtocol = 1;
constexpr int kKeyFormat = 1;

struct Compiled {
  Artifact artifact;      // the kernel .so: key, verified bytes, stored metadata
  Artifact runtime;       // the shared runtime .so it needs (meta "runtime_key"), verified
  double compile_s = 0;   // the worker's compile + export + link time; 0 on a store hit
  bool store_hit = false;
};

struct CompilerOptions {
  WorkerPoolOptions pool;                       // the compile workers
  std::filesystem::path artifacts;              // store root; empty: ArtifactStore::default_root()
  std::filesystem::path python_dir;             // where gemmtune/cutedsl/ lives
  double timeout_s = 300;                       // per compile request
  bool load_only = false;                       // never start a worker
  std::function<void(const std::string&)> log;  // may be empty

  // WorkerPoolOptions::defaults() with GEMMTUNE_WORKER_BACKENDS=cutedsl, python_dir(),
  // $GEMMTUNE_COMPILE_TIMEOUT, $GEMMTUNE_CUTEDSL_LOAD_ONLY.
  static CompilerOptions defaults(std::function<void(const std::string&)> log = {});
};

class Compiler {
 public:
  explicit Compiler(CompilerOptions options);

  // Whether artifacts can be compiled (full) or at least loaded (load-only); computed once (the
  // first call may start a worker).
  Verdict available();
  bool load_only();
  // The toolchain text ("" when not available) and the sources' digest (12 hex digits).
  std::string toolchain();
  std::string sources_digest();
  // "dsl=4.8.1 flavor=cu13 ... src=<12 hex>": for the tuning cache's environment.
  std::string version();

  std::string key(const nlohmann::json& params);
  // Whether the store has the artifact's files (a cheap check; get() verifies).
  bool cached(const nlohmann::json& params);
  // The store key of the runtime library named `soname`.
  static std::string runtime_key(const std::string& soname);
  // Store hit, or compile through a worker and publish. Throws Error: "cutedsl: compile failed
  // (<kind>): <worker's error>", the pool's reason, or load-only and not in the store.
  Compiled compile(const nlohmann::json& params);
  // Starts up to min(misses, pool size) workers in the background for the distinct artifacts
  // of `params` missing from the store; returns the misses (0 when load-only / unavailable).
  int prestart(const std::vector<nlohmann::json>& params);

  ArtifactStore& store() { return *store_; }

 private:
  Compiled compile_miss(const std::string& key, const nlohmann::json& params);
  // The kernel artifact plus its runtime from the store; throws Error when the runtime is absent.
  Compiled with_runtime(Artifact kernel, bool hit, double compile_s);

  CompilerOptions opt_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<ArtifactStore> store_;
  std::mutex mu_;
  std::optional<Verdict> available_;
  bool load_only_ = false;
  std::string toolchain_, sources_hash_;
  SingleFlight<Compiled> flights_{true};  // one compile per key at a time (failures not retried in this process)
};

// The compile step of a precompile (GEMM and softmax alike): `items[i]` with a key compile
// (or hit the store) on up to `threads` threads, with `params[j]` the params of the j-th
// keyed item in order; items without a key (skipped or refused) only go to `progress`. Item
// needs `key`, `store_hit`, `seconds` and `error` members; `progress` sees each item once.
template <class Item>
void compile_items(Compiler& compiler, std::vector<Item>& items, const std::vector<nlohmann::json>& params,
                   int threads, const std::function<void(const Item&)>& progress) {
  GT_CHECK(size_t(std::count_if(items.begin(), items.end(), [](const Item& it) { return !it.key.empty(); })) ==
               params.size(),
           "cutedsl precompile: one params object per keyed item");
  compiler.prestart(params);
  build_keyed_items(items, threads, progress, [&](size_t j, Item& it) {
    Compiled c = compiler.compile(params[j]);
    it.store_hit = c.store_hit, it.seconds = c.compile_s;
  });
}

}  // namespace gemmtune::cutedsl
