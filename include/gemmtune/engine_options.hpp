// gemmtune: every setting of the engine, as plain options.
//
// A field left at its default is filled from the environment when the engine (or a precompile)
// starts, in one place (src/core/settings.cpp), so that operators can switch things without
// code, as TORCH_LOGS and TRITON_PRINT_AUTOTUNING do:
//
//   GEMMTUNE_CACHE, GEMMTUNE_ARTIFACTS, GEMMTUNE_STORE_KEY, GEMMTUNE_COMPILE_WORKERS, GEMMTUNE_NVCC_JOBS,
//   GEMMTUNE_COMPILE_TIMEOUT, GEMMTUNE_LOAD_ONLY (toolchain names, comma-separated),
//   GEMMTUNE_PYTHON, GEMMTUNE_PYTHON_DIR, GEMMTUNE_NVCC, GEMMTUNE_CUTLASS_DIR,
//   GEMMTUNE_CUTLASS_KERNEL_DIR, GEMMTUNE_KEEP_BUILD=1, GEMMTUNE_COMPILE_FORK_SERVER=0,
//   GEMMTUNE_MAX_CONFIGS, GEMMTUNE_LOG (quiet, warning, info, debug),
//   GEMMTUNE_REMOTE_CACHE (redis://host:port/db), GEMMTUNE_REMOTE_TIMEOUT_MS.
//   GEMMTUNE_ISOLATION (process, in-process), GEMMTUNE_TUNER (the tuning helper executable),
//   GEMMTUNE_CANDIDATE_TIMEOUT (seconds).
//
// Nothing else in the library reads the environment; the CLI sets these fields from its flags.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace gemmtune {

struct TuneOptions {
  double warmup_ms = 100;      // time-based warm-up of the GPU before a race
  int min_rounds = 5;          // interleaved rounds every surviving candidate gets
  int max_rounds = 15;
  double round_budget_ms = 2;  // target GPU time per sample (several isolated cold-L2 launches)
  // GPU-side wait between each L2 flush and the timed launch (src/tune/gpu_bench.hpp); 0 disables it.
  double spin_us = 50;
  // Input sets the race rotates over (freshly allocated copies of the operands); 0: enough to
  // cover 3x the L2, at least 3. 1 times every candidate on one input, as a single-buffer bench.
  int input_sets = 0;
  double prune_ratio = 1.3;    // after min_rounds, drop candidates slower than this x best median
  double tie_tolerance = 0.02; // medians within this fraction (or within the two candidates'
                               // p20..p80 spreads) of the best are re-timed head to head
  int tie_rounds = 16;
  // The race's preference for the earlier candidate (the library's default pick first): a
  // challenger must be faster by more than this fraction (src/tune/timing.hpp; why 0.25%:
  // docs/tuning.md).
  double prefer_margin = 0.0025;
  // The final duels between the preferred candidate and its nearest challengers, decided on
  // paired per-round ratios (src/tune/timing.hpp): rounds per duel (0 disables them), the
  // reach (fraction of the fastest median) and at most how many.
  int duel_rounds = 24;
  double duel_window = 0.05;
  int duels = 3;
  uint64_t seed = 0x9e3779b97f4a7c15ull;  // random inputs
};

// How configs become artifacts (src/compile/): the artifact store, the toolchains (nvcc for
// CUTLASS; Python compile workers for Triton and the CuTe DSL) and the one compile pool.
struct CompileOptions {
  // The content-addressed artifact store (a kernel pack is a copy of one). Empty:
  // $GEMMTUNE_ARTIFACTS, else $XDG_CACHE_HOME/gemmtune/artifacts, else ~/.cache/gemmtune/artifacts.
  std::filesystem::path artifacts;
  // This machine's key (a 0600 file outside the store) that authenticates every artifact the
  // store loads: an artifact built here carries its HMAC; a kernel pack from elsewhere is used
  // only after `gemmtune store trust` (docs/kernel-packs.md). Empty: $GEMMTUNE_STORE_KEY, else
  // $XDG_CONFIG_HOME/gemmtune/store.key, else ~/.config/gemmtune/store.key.
  std::filesystem::path store_key;
  int workers = 0;        // Python compile workers at once per toolchain; 0: $GEMMTUNE_COMPILE_WORKERS, else cores (<= 32)
  int nvcc_jobs = 0;      // nvcc processes at once; 0: $GEMMTUNE_NVCC_JOBS, else cores
  double timeout_s = 0;   // per compile job, every toolchain; 0: $GEMMTUNE_COMPILE_TIMEOUT, else 600
  // Toolchains ("cutlass", "triton", "cutedsl") that never compile here: their candidates are
  // the artifacts already in the store (a kernel pack). A toolchain that cannot compile on this
  // machine but finds its record in the store is load-only by itself.
  std::vector<std::string> load_only;
  std::string python;                 // the workers' interpreter; empty: $GEMMTUNE_PYTHON, else <repo>/.venv/bin/python, else python3
  // Holds gemmtune/ (kernels, worker). Empty: $GEMMTUNE_PYTHON_DIR, else an installed copy's own
  // package (found relative to the binary: docs/python.md), else <repo>/python for binaries
  // that run from their build tree.
  std::filesystem::path python_dir;
  std::filesystem::path nvcc;         // empty: $GEMMTUNE_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc
  // CUTLASS's headers (a folder holding include/cutlass/version.h, or that include folder).
  // Empty: $GEMMTUNE_CUTLASS_DIR, else site-packages/cutlass_library/source of $VIRTUAL_ENV or <repo>/.venv.
  std::filesystem::path cutlass_dir;
  // sm90_gemm.cuh; empty: $GEMMTUNE_CUTLASS_KERNEL_DIR, else the installed package's
  // gemmtune/cutlass_kernel/, else <repo>'s (from the build tree).
  std::filesystem::path cutlass_kernel_dir;
  bool keep_build = false;   // keep nvcc's build folders (debugging); also $GEMMTUNE_KEEP_BUILD=1
  bool fork_server = true;   // fork Triton workers from one warmed-up server; $GEMMTUNE_COMPILE_FORK_SERVER=0: off
};

enum class LogLevel { quiet, warning, info, debug };

// Where candidates run while a problem is tuned (docs/isolation.md).
enum class Isolation {
  // In a tuning helper process per GPU (started on demand, kept warm, restarted when it dies):
  // a candidate that faults, traps or hangs costs only itself, is quarantined in the tuning
  // cache, and the caller's process runs only the chosen kernel.
  process,
  // In the caller's process (as before): no helper, but a faulting candidate poisons the
  // caller's CUDA context for good.
  in_process,
};

struct IsolationOptions {
  // Left at process: $GEMMTUNE_ISOLATION ("process" or "in-process") decides, else process.
  Isolation mode = Isolation::process;
  // The helper executable, run as `<helper> --gemmtune-tuner` (the gemmtune CLI is one; so is
  // any program whose main() calls gemmtune::detail::run_tuner, e.g. a test binary that
  // registers test-only backends). Empty: $GEMMTUNE_TUNER, else `gemmtune` in the folder of
  // the library's own file (libgemmtune_c.so, or the program the static library is linked
  // into) or in ../bin from there, else in the install's bin folder, else on $PATH.
  std::filesystem::path helper;
  // How long one candidate step (prepare, the verification run, one timing sample) may take
  // before the helper is killed and the candidate quarantined as hung. 0:
  // $GEMMTUNE_CANDIDATE_TIMEOUT, else 30 s.
  double candidate_timeout_s = 0;
};

// Every field (but `log`) travels to the tuning helper as JSON (engine_options_to_json in
// src/core/problem_json.cpp, read back by engine_options_from_json): a new field goes there too.
struct EngineOptions {
  int device = 0;
  // Tuning-cache file. Empty: $GEMMTUNE_CACHE, else $XDG_CACHE_HOME/gemmtune/tuning.sqlite,
  // else ~/.cache/gemmtune/tuning.sqlite.
  std::filesystem::path cache_path;
  bool use_cache = true;             // false: never read or write the cache
  // A tuning cache shared by machines, in front of the local one (docs/remote-cache.md):
  // "redis://host[:port][/db]". A local miss asks it (a hit is written locally), a tune stores
  // its entry there. Unreachable, slow or holding garbage: one warning, then local only. Empty:
  // $GEMMTUNE_REMOTE_CACHE, else none. Needs use_cache.
  std::string remote_cache;
  // Bound on each remote operation (connect, read, write), ms; 0: $GEMMTUNE_REMOTE_TIMEOUT_MS, else 50.
  double remote_timeout_ms = 0;
  // Backend names (any op's: cublaslt, triton, cutlass, cutedsl, native); empty: every available one.
  std::vector<std::string> backends;
  // Candidates per backend and problem at most (the backend's ranked best); 0:
  // $GEMMTUNE_MAX_CONFIGS, else each backend's default (CUTLASS, CuTe DSL GEMM: 16; CuTe DSL softmax: 12).
  int max_configs = 0;
  // Of a tune's candidates that are not yet in the artifact store, how many per backend may
  // compile: the best by the backend's cost model (CUTLASS and CuTe DSL GEMM; the others compile
  // all theirs); candidates already stored always run. 0: $GEMMTUNE_COMPILE_BUDGET (a number,
  // or "all"), else 8. Negative: no budget (every candidate compiles, as `--exhaustive`).
  // `gemmtune precompile` has none.
  int compile_budget = 0;
  TuneOptions tune;
  CompileOptions compile;
  IsolationOptions isolation;
  // Receives progress and warnings (one line each, warnings start with "warning: ") up to
  // `log_level` (default: $GEMMTUNE_LOG, else info). Empty: silent.
  std::function<void(const std::string&)> log;
  LogLevel log_level = LogLevel::info;
};

}  // namespace gemmtune
