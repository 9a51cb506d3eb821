// The Triton backend's compile side (no GPU needed): compile parameters -> cubin + launch
// metadata, through the artifact store (hit) or the compile worker pool (miss, then published).
//
//   triton::Compiler compiler(triton::CompilerOptions::defaults(log));
//   if (Verdict v = compiler.available(); !v) ... v.reason ...
//   triton::CompiledArtifact a = compiler.compile(triton::gemm_params(cfg, problem, sms));
//
// Artifact key: SHA-256 of (key format, worker protocol, Triton version, target, the bytes of
// the Python files that define the kernels and their compilation, the canonical params JSON).
// compile() is thread-safe; concurrent compiles of one key in this process share one request.
#pragma once

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
#include "backends/triton/configs.hpp"
#include "compile/single_flight.hpp"
#include "compile/worker_pool.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune::triton {

constexpr int kWorkerProtocol = 1;

struct CompiledArtifact {
  std::string kernel;     // "gemm_tiled", "gemm_persistent", "splitk_reduce"
  std::string function;   // the kernel's symbol in the cubin
  Artifact artifact;      // key, verified bytes, stored metadata
  nlohmann::json launch;  // shared, num_warps, num_ctas, global/profile scratch size and align
  double compile_s = 0;   // 0 on a store hit
  bool store_hit = false;
};

struct CompilerOptions {
  WorkerPoolOptions pool;                          // the compile workers
  std::filesystem::path artifacts;                 // store root; empty: ArtifactStore::default_root()
  std::filesystem::path python_dir;                // where gemmtune/kernels/triton_gemm.py lives
  double timeout_s = 180;                          // per compile request
  std::function<void(const std::string&)> log;     // may be empty

  // WorkerPoolOptions::defaults() with a fork server (unless $GEMMTUNE_COMPILE_FORK_SERVER=0),
  // python_dir(), $GEMMTUNE_COMPILE_TIMEOUT (seconds).
  static CompilerOptions defaults(std::function<void(const std::string&)> log = {});
};

class Compiler {
 public:
  explicit Compiler(CompilerOptions options);

  // Whether compiles can run: the template is readable, a worker starts and reports Triton
  // with protocol kWorkerProtocol. Computed once (the first call starts a worker).
  Verdict available();
  // Triton's version from the worker's ready line ("" when not available).
  std::string triton_version();
  // First 12 hex digits of the hash of the Python sources (template, compile, worker).
  std::string sources_digest();

  // The artifact key of `params` (requires available()).
  std::string key(const nlohmann::json& params);
  // Store hit, or compile through a worker and publish. Throws Error: "triton: compile failed
  // (<kind>): <worker's error>" or the pool's reason (timed out, died, ...).
  CompiledArtifact compile(const nlohmann::json& params);
  // Before compiling `params` in parallel: starts up to min(misses, pool size) workers in the
  // background, where misses counts the distinct artifacts of `params` whose files are not in
  // the store (a cheap check: keys and file existence). Returns misses; 0 and nothing started
  // when not available(). Does not block on workers.
  int prestart(const std::vector<nlohmann::json>& params);

  ArtifactStore& store() { return *store_; }
  WorkerPool& pool() { return *pool_; }

 private:
  Verdict accept_ready(const nlohmann::json& ready);
  CompiledArtifact compile_miss(const std::string& key, const nlohmann::json& params);
  CompiledArtifact accept_answer(const std::string& key, const nlohmann::json& params, const nlohmann::json& r,
                                 double wall_s);
  static CompiledArtifact from_artifact(Artifact a, bool hit);

  CompilerOptions opt_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<ArtifactStore> store_;
  std::mutex mu_;
  std::optional<Verdict> available_;
  std::string triton_version_, sources_hash_;
  SingleFlight<CompiledArtifact> flights_{false};  // one compile per key at a time
};

// Compiles every artifact of `configs` for `problem` (the GEMM kernel, and the split-k reduce
// where split_k > 1) on parallel threads, without a GPU: to warm the artifact store.
struct Precompiled {
  Config config;
  std::vector<CompiledArtifact> artifacts;  // empty when it failed
  std::string error;                        // why it failed
};
std::vector<Precompiled> precompile(Compiler& compiler, const GemmProblem& problem,
                                    const std::vector<Config>& configs, int num_sms);

}  // namespace gemmtune::triton
