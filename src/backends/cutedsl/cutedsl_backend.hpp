// The cutedsl backend: one candidate per CuTe DSL config (configs.hpp) for a problem; each is
// our Hopper GEMM (python/gemmtune/cutedsl/gemm_sm90.py) compiled ahead of time by a Python
// worker into a self-contained shared object (compiler.hpp), loaded with dlopen from its
// verified bytes, and run through its C entry points (gt_cutedsl_abi.h).
//
// What is exposed beyond make_cutedsl_backend (backend.hpp): the loader of one .so, and
// precompile(), which compiles every candidate of a list of problems without a GPU.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutedsl/compiler.hpp"
#include "backends/cutedsl/configs.hpp"
#include "compile/log_hub.hpp"
#include "../../../python/gemmtune/cutedsl/gt_cutedsl_abi.h"

namespace gemmtune::cutedsl {

// The entry points of one loaded instance. Loaded from the artifact's verified bytes through a
// memfd (what runs is what was hashed); never unloaded (the .so carries its own CUDA runtime,
// whose teardown at dlclose would race the process's). One load per key per process.
struct Library {
  std::string key;
  gt_cutedsl_config_fn config = nullptr;
  gt_cutedsl_can_implement_fn can_implement = nullptr;
  gt_cutedsl_run_fn run = nullptr;
  gt_cutedsl_status_text_fn status_text = nullptr;

  // Loads `compiled.runtime` (once per process: the kernel .so names it as DT_NEEDED by soname,
  // which the dynamic loader then finds among the loaded objects), then the kernel .so. Throws
  // Error when the bytes cannot be loaded, a symbol is missing, the ABI version differs, or the
  // instance's config text is not `expect_config`.
  static std::shared_ptr<const Library> open(const Compiled& compiled, const std::string& expect_config);
};

// Loads `compiled.runtime` (the shared runtime library its kernel .so names by soname) once per
// process; the GEMM and softmax loaders call it before loading a kernel. Thread-safe.
void load_runtime(const Compiled& compiled);

// The process-wide compiler (one worker pool, one store), created on first use from
// CompilerOptions::defaults; it logs through log_hub(), where the GEMM and softmax backends
// register their engines' logs.
std::shared_ptr<Compiler> shared_compiler();
LogHub& log_hub();

// A CuTe DSL backend's (GEMM or softmax) hold on the shared compiler: registers the engine's log
// with log_hub(), refuses a device other than sm_90 (Hopper), runs `before` (e.g. hashing the
// kernel sources), takes shared_compiler() and starts its first worker in the background
// (importing the DSL takes about a second) while the engine starts. An Error from `before` or
// from creating the compiler leaves it unusable with that message. The destructor waits for the
// background probe, then unregisters the log.
class BackendCompiler {
 public:
  explicit BackendCompiler(const BackendContext& ctx, const std::function<void()>& before = {});
  ~BackendCompiler();
  BackendCompiler(const BackendCompiler&) = delete;
  BackendCompiler& operator=(const BackendCompiler&) = delete;

  const std::shared_ptr<Compiler>& get() const { return compiler_; }  // null when unusable
  // Why not when unusable; else the compiler's availability (waits for the first probe).
  Verdict available() const;

 private:
  int log_id_;
  std::shared_ptr<Compiler> compiler_;
  std::string broken_;
  std::shared_future<Verdict> warm_;
};

// $GEMMTUNE_CUTEDSL_MAX_CONFIGS, else 16.
int default_max_configs();

struct PrecompileItem {
  std::string problem;   // GemmProblem::str() of the first problem that needed it
  Config config;
  std::string params;    // params(config, problem).dump()
  std::string key;
  bool store_hit = false;
  double seconds = 0;    // the worker's compile time (0 on a hit)
  std::string error;     // empty when compiled
  bool skipped = false;  // the backend does not support the problem (not a compile failure)
};

// Compiles (or finds in the store) every artifact the candidates of `problems` need, distinct
// artifacts once, on up to `threads` threads (each request goes to a worker of the pool).
// `only` non-empty: exactly these configs for every problem instead of the ranked candidates.
std::vector<PrecompileItem> precompile(Compiler& compiler, const std::vector<GemmProblem>& problems, int sm_count,
                                       int max_configs, int threads,
                                       const std::function<void(const PrecompileItem&)>& progress = {},
                                       const std::vector<Config>& only = {});

}  // namespace gemmtune::cutedsl
