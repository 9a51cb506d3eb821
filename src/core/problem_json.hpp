// JSON forms of problems, engine options and tune reports: what the C API (and through it the
// Python wrapper) exchanges. Lives in the static library so host tests can exercise it.
//
// Problem JSON (every field but m, n, k optional; unknown fields are an error):
//   {"m": 16, "n": 10240, "k": 8192,
//    "dtype": "bf16",          A's and B's dtype (parse_dtype spellings: bf16, fp16, fp32, e4m3, fp8, ...)
//    "b_dtype": "e5m2",        B's dtype when it differs from A's
//    "out_dtype": "bf16",      C's and D's dtype; default bf16 for fp8 inputs, else the input dtype
//    "layout": "rc",           A's and B's layouts, one letter each: r = row-major, c = col-major.
//                              "rc" is nn.Linear: A[m,k] row-major, B = W^T with W[n,k] row-major
//    "d_layout": "r",          D's (and C's) layout: r/c (or row/col)
//    "lda": 0, "ldb": 0, "ldc": 0, "ldd": 0,   leading dimensions, 0 = packed
//    "alpha": 1.0, "beta": 0.0, "bias": false,
//    "act": "none",            none, relu, gelu (tanh), gelu_tanh, silu
//    "scale": "tensorwise",    fp8 scales: none, tensorwise, rowwise, block; default tensorwise for fp8
//    "tf32": false}            fp32 inputs only
// Errors are gemmtune::Error naming the field ("problem.layout: ...").
//
// Engine options JSON (every field optional):
//   {"cache_path": "...", "use_cache": true, "backends": ["cublaslt"], "device": 0,
//    "log_to_stderr": false, "log_level": "info", "max_configs": 0,
//    "remote_cache": "redis://host:port/db", "remote_timeout_ms": 50,
//    "tune": {"warmup_ms", "min_rounds", "max_rounds", "round_budget_ms", "prune_ratio",
//             "tie_tolerance", "tie_rounds", "prefer_margin", "duel_rounds", "duel_window", "duels", "seed",
//             "spin_us", "input_sets"},
//    "compile": {"artifacts", "workers", "nvcc_jobs", "timeout_s", "load_only": ["cutlass", ...],
//                "python", "python_dir", "nvcc", "cutlass_dir", "cutlass_kernel_dir", "keep_build",
//                "fork_server"},
//    "isolation": {"mode": "process" | "in_process", "helper", "candidate_timeout_s"}}
#pragma once

#include <string>

#include "gemmtune/engine_options.hpp"
#include "gemmtune/kernel.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

// Parses and validates (GemmProblem::validate) a problem. Throws Error naming the field.
GemmProblem problem_from_json(const std::string& json);
// The problem as a JSON object text that problem_from_json reads back to the same problem.
std::string problem_to_json(const GemmProblem& p);

// A softmax problem: {"rows", "cols", "ld", "dtype", "out_dtype", "scale"} (rows and cols
// required; dtype sets both dtypes, out_dtype overrides the output's), validated; Error names the
// field. And back (every field).
SoftmaxProblem softmax_problem_from_json(const std::string& json);
std::string softmax_problem_to_json(const SoftmaxProblem& p);

// A grouped GEMM problem: {"groups", "n", "k", "rows_per_group" (required), "layout", "dtype",
// "out_dtype", "scale", "act", "bias", "alpha", "skew"}, validated; Error names the field. And
// back (every field). Defined in core/grouped_problem.cpp.
GroupedGemmProblem grouped_problem_from_json(const std::string& json);
std::string grouped_problem_to_json(const GroupedGemmProblem& p);

// Parses engine options; empty text means defaults. log_to_stderr installs a logger that
// writes "gemmtune: <line>" to stderr. Throws Error naming the field ("options.device: ...").
EngineOptions engine_options_from_json(const std::string& json);
// Every field engine_options_from_json reads, so that it reads back the same options (but the
// log sink): what the tuning helper receives (src/engine/isolate.hpp).
std::string engine_options_to_json(const EngineOptions& options);

// The report of either op as JSON (the C API's report_json): {"op": "gemm" | "softmax",
// "problem": str(), "problem_json": {...} (problem_from_json's or softmax_problem_from_json's
// fields), "canonical", "key", "from_cache", "seconds", "spread", "notes": [...], "results":
// [to_json of each result (core/report_json.hpp), in the report's order]}; a softmax report adds
// "bytes" (read + written) and each result's "tbps" (bytes / median, TB/s; 0 when not timed).
std::string report_to_json(const TuneReport& report);

// {"backend", "id", "name", "can_overlap" (Kernel::can_overlap: RunOptions::overlap_previous takes
// effect), "problem": str(), "problem_json": {...}}.
std::string kernel_to_json(const Kernel& kernel);

}  // namespace gemmtune
