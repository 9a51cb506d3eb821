// gemmtune: the engine. One object, owned by the caller, that selects and remembers kernels.
//
//   gemmtune::Engine engine;                       // device 0, default cache
//   auto p = gemmtune::GemmProblem::linear(m, n, k);
//   gemmtune::Kernel kernel = engine.select(p);    // cache hit, or tune now
//   kernel.run({.a = a, .b = w, .d = d}, stream);
//   gemmtune::SoftmaxKernel sm = engine.select(gemmtune::SoftmaxProblem::make(rows, cols));
//   sm.run({.x = x, .y = y}, stream);
//
// Every op goes through one tune path (src/engine/engine.cpp, templated on the op): cache -> candidates of every
// backend of the op -> prepare -> verify against a GPU reference -> race -> store.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/backends.hpp"
#include "gemmtune/device.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/engine_options.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

class TuningCache;
namespace detail {
struct EngineAccess;  // the tuning helper's way in (src/engine/tune_hooks.hpp)
}

// A GEMM kernel beside torch's own call for its problem (Engine::versus_torch): what
// gemmtune.torch decides on whether to call torch's op instead of the kernel (docs/python.md).
struct TorchStanding {
  bool is_torch = false;  // the kernel runs what torch's call runs (cuBLASLt's torch baseline)
  // Medians from the last tune of the kernel's problem, as the tuning cache holds it (every
  // candidate's timing; the two were raced in the same rounds, so they compare). 0 where it
  // has none: no cache, the problem never tuned, the kernel or the baseline not timed in it.
  double median_us = 0;   // the kernel's
  double torch_us = 0;    // the torch baseline's
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The kernel for `problem`: from the cache when this environment tuned it before, else
  // tuned now (and cached). Throws Error for an invalid problem or when no backend has a
  // correct candidate.
  Kernel select(const GemmProblem& problem, TuneReport* report = nullptr);
  // Tunes even when cached, and overwrites the cache entry. Candidates run in the tuning
  // helper process unless options.isolation.mode is in_process (docs/isolation.md).
  Kernel tune(const GemmProblem& problem, TuneReport* report = nullptr);
  // A specific candidate (backend name and id from a TuneReport), prepared, bypassing the
  // cache: to pin a kernel, or to time a tuned pick against another candidate.
  Kernel load(const GemmProblem& problem, const std::string& backend, const std::string& id);

  // Softmax: the same, over the softmax backends (native CUDA, Triton, CuTe DSL). The problem's scale is
  // baked into the returned kernel (it does not key the cache).
  SoftmaxKernel select(const SoftmaxProblem& problem, TuneReport* report = nullptr);
  SoftmaxKernel tune(const SoftmaxProblem& problem, TuneReport* report = nullptr);
  SoftmaxKernel load(const SoftmaxProblem& problem, const std::string& backend, const std::string& id);

  // Grouped GEMM (gemmtune/grouped.hpp): the same, over the grouped backends. Keyed by the
  // problem's rows bucket: a select at any rows per group of one bucket, and any split at run
  // time, reuse one tune. The problem's alpha is baked into the returned kernel.
  GroupedKernel select(const GroupedGemmProblem& problem, TuneReport* report = nullptr);
  GroupedKernel tune(const GroupedGemmProblem& problem, TuneReport* report = nullptr);
  GroupedKernel load(const GroupedGemmProblem& problem, const std::string& backend, const std::string& id);

  const DeviceInfo& device() const;
  // Versions that key the GEMM cache: device, driver, runtime, GEMM backend versions, engine.
  const std::string& environment() const;
  // The same for one op by name ("gemm", "softmax", "grouped"): each op's backends key its entries.
  const std::string& environment(std::string_view op) const;
  // The key under which `problem` is cached in this environment.
  std::string cache_key(const GemmProblem& problem) const;
  std::string cache_key(const SoftmaxProblem& problem) const;
  std::string cache_key(const GroupedGemmProblem& problem) const;
  // Every enabled backend's status: the GEMM backends, then the softmax ones, then the grouped ones.
  std::vector<BackendStatus> backends() const;
  // The kernel beside torch's own call for its problem (reads the tuning cache; not for a hot path).
  TorchStanding versus_torch(const Kernel& kernel);
  TuningCache* cache();  // nullptr when use_cache is false

 private:
  friend struct detail::EngineAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* version();  // engine version, e.g. "0.1.0"

}  // namespace gemmtune
