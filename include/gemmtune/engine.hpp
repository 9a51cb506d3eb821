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

#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

struct TuneOptions {
  double warmup_ms = 100;      // time-based warm-up of the GPU before a race
  int min_rounds = 5;          // interleaved rounds every surviving candidate gets
  int max_rounds = 15;
  double round_budget_ms = 2;  // target GPU time per sample (several isolated cold-L2 launches)
  // GPU-side wait between each L2 flush and the timed launch (see src/tune/gpu_bench.hpp);
  // $GEMMTUNE_RACE_SPIN_US overrides it, 0 disables it.
  double spin_us = 50;
  double prune_ratio = 1.3;    // after min_rounds, drop candidates slower than this x best median
  double tie_tolerance = 0.02; // medians within this fraction (or within the two candidates'
                               // p20..p80 spreads) of the best are re-timed head to head
  int tie_rounds = 16;
  // The race's preference for the earlier candidate (the library's default pick first): a
  // challenger must be faster by more than this (src/tune/timing.hpp). 0.25%, decided on the
  // duels' paired ratios: at 1% a pair about 1% apart flipped at the margin between two tunes
  // (paired ratios 1.0098 and 1.0120) while measured 1.3% apart with 1.2% noise; a 3% margin
  // on marginal medians was worse (bench/results/2026-11-30-h200-cublaslt-final.*).
  double prefer_margin = 0.0025;
  // The final duels between the preferred candidate and its nearest challengers, decided on
  // paired per-round ratios (src/tune/timing.hpp): rounds per duel (0 disables them), the
  // reach (fraction of the fastest median) and at most how many.
  int duel_rounds = 24;
  double duel_window = 0.05;
  int duels = 3;
  uint64_t seed = 0x9e3779b97f4a7c15ull;  // random inputs
};

struct EngineOptions {
  int device = 0;
  // Tuning-cache file. Empty: $GEMMTUNE_CACHE, else $XDG_CACHE_HOME/gemmtune/tuning.sqlite,
  // else ~/.cache/gemmtune/tuning.sqlite.
  std::filesystem::path cache_path;
  bool use_cache = true;             // false: never read or write the cache
  // Backend names (any op's: cublaslt, triton, cutlass, native); empty: every available one.
  std::vector<std::string> backends;
  TuneOptions tune;
  // Receives progress and warnings (one line each). Empty: silent.
  std::function<void(const std::string&)> log;
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;    // cudaDriverGetVersion
  int runtime_version = 0;   // cudaRuntimeGetVersion
  int64_t l2_bytes = 0;
  int64_t global_mem_bytes = 0;
  std::string str() const;
};

class TuningCache;

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
  // Tunes even when cached, and overwrites the cache entry.
  Kernel tune(const GemmProblem& problem, TuneReport* report = nullptr);
  // A specific candidate (backend name and id from a TuneReport), prepared, bypassing the
  // cache: to pin a kernel, or to time a tuned pick against another candidate.
  Kernel load(const GemmProblem& problem, const std::string& backend, const std::string& id);

  // Softmax: the same, over the softmax backends (native CUDA, Triton). The problem's scale is
  // baked into the returned kernel (it does not key the cache).
  SoftmaxKernel select(const SoftmaxProblem& problem, TuneReport* report = nullptr);
  SoftmaxKernel tune(const SoftmaxProblem& problem, TuneReport* report = nullptr);
  SoftmaxKernel load(const SoftmaxProblem& problem, const std::string& backend, const std::string& id);

  const DeviceInfo& device() const;
  // Versions that key the GEMM cache: device, driver, runtime, GEMM backend versions, engine.
  const std::string& environment() const;
  // The same for one op by name ("gemm", "softmax"): each op's backends key its entries.
  const std::string& environment(std::string_view op) const;
  // The key under which `problem` is cached in this environment.
  std::string cache_key(const GemmProblem& problem) const;
  std::string cache_key(const SoftmaxProblem& problem) const;
  // Backend names with "available" or "not available: <reason>": the GEMM backends by name,
  // then the softmax backends as "softmax/<name>".
  std::vector<std::pair<std::string, std::string>> backends() const;
  TuningCache* cache();  // nullptr when use_cache is false

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* version();  // engine version, e.g. "0.1.0"

}  // namespace gemmtune
