// The gemmtune command line: its grammar (CLI11) and the pure conversions from parsed flags
// to library types. Nothing here touches a GPU, so host tests parse argument vectors with it.
//
// Exit codes (also in `gemmtune --help`): 0 ok; 1 error (a gemmtune::Error, message on stderr);
// 2 usage error (unknown flag, missing argument, or flags describing an invalid problem);
// 3 no CUDA device, or none of the requested backends is available.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune::cli {

enum Exit : int { kOk = 0, kError = 1, kUsage = 2, kNoDevice = 3 };

// Flags that shape the problem, besides m, n, k. Defaults follow GemmProblem::linear.
struct ProblemFlags {
  std::string dtype = "bf16";
  std::string b_dtype;         // empty: dtype (fp8 may pair e4m3 with e5m2)
  std::string out_dtype;       // empty: bf16 for fp8 inputs, else the input dtype
  std::string layout = "rc";   // A and B: r = row-major, c = col-major
  std::string d_layout = "r";  // D (and C)
  int64_t lda = 0, ldb = 0, ldd = 0;  // 0 = packed; C uses D's layout and ld
  double alpha = 1, beta = 0;
  bool bias = false;
  std::string act = "none";
  std::string scale;           // empty: tensorwise for fp8 inputs, else none
  bool tf32 = false;
  int64_t stride = 0;          // softmax: elements between rows (0 = packed)
  int64_t rows_per_group = 0;  // grouped: expected rows per group (required there)
  std::optional<double> skew;  // grouped: the tune's skewed split Zipf(S) (0: balanced only; default 1)
};

// Flags that configure the Engine.
// Flags that configure the Engine (EngineOptions; 0 / empty: the option's default, which the
// environment may set: include/gemmtune/engine_options.hpp).
struct EngineFlags {
  std::string cache;                  // empty: default_cache_path()
  bool no_cache = false;
  std::vector<std::string> backends;  // empty: all available
  std::string artifacts;              // --artifacts: the artifact store (a kernel pack)
  int workers = 0;                    // --compile-workers
  int nvcc_jobs = 0;                  // --nvcc-jobs
  double compile_timeout = 0;         // --compile-timeout (seconds per job)
  std::vector<std::string> load_only; // --load-only cutlass,cutedsl,...
  int max_configs = 0;                // --max-configs
  int compile_budget = 0;             // --compile-budget N; --exhaustive: -1
  std::string log_level;              // --log-level quiet|warning|info|debug
  std::string remote;                 // --remote redis://host:port/db
  double remote_timeout_ms = 0;       // --remote-timeout
  bool in_process = false;            // --in-process: candidates run in this process (no helper)
  double candidate_timeout = 0;       // --candidate-timeout (seconds per candidate step)
};

struct TuneArgs {
  std::string shape;
  std::string shape2;  // with shape "softmax": ROWSxCOLS (tools/gemmtune/softmax_cli.hpp); "grouped": GxNxK
  ProblemFlags problem;
  EngineFlags engine;
  bool force = false;
  bool measure_roof = false;
  std::string json;  // file, "-" for stdout, empty for none
};

struct SuiteArgs {
  std::string file;
  std::string m_values;
  ProblemFlags problem;
  EngineFlags engine;
  bool force = false;
  std::string csv, json;  // file or "-" for stdout
  std::string gpus;       // --gpus: "all" or device indices; empty: this process's device only
  bool worker = false;    // --suite-worker (hidden): one GPU's worker of a --gpus suite (suite_gpus.hpp)
  std::vector<std::string> argv;  // the command line, for the workers of --gpus
};

struct RunArgs {
  std::string a, b, c, bias, scale_a, scale_b, out;
  std::string dtype = "bf16";
  std::string out_dtype;  // empty: bf16 for fp8 inputs, else the input dtype
  bool weight = false;
  double alpha = 1, beta = 0;
  std::string act = "none";
  EngineFlags engine;
};

struct CacheArgs {
  std::string action;  // list | show | clear | export | import
  std::string arg;     // KEY or FILE
  std::string cache;   // empty: default_cache_path()
};

// `store trust [DIR]`: the explicit trust step for a kernel pack (cmd_store.cpp).
struct StoreArgs {
  std::string action;  // trust
  std::string dir;     // empty: the default artifact store
};

struct InfoArgs {
  bool no_measure = false;
  bool json = false;  // one JSON object on stdout (no ceilings)
  EngineFlags engine;
};

// `precompile`: build every artifact a suite's problems would need, without a GPU, for the
// backends that build (cutlass, triton, cutedsl; --backends narrows) (cmd_precompile.cpp).
struct PrecompileArgs {
  std::string file;       // a GEMM suite (as for `suite`) or a softmax suite (header rows,cols)
  std::string m_values;
  ProblemFlags problem;
  EngineFlags engine;     // --backends, --artifacts, --nvcc-jobs, --compile-workers, --max-configs, ...
  int sms = 132;          // SMs of the target device (H200: 132)
  std::vector<std::string> configs;  // non-empty: exactly these candidate ids per problem
  int compile_budget = -1;           // --compile-budget N: only what a cold tune with budget N builds
  std::string json;       // one JSON line per artifact to FILE (- = stdout)
};

// `report`: every argument after the command, passed to `python -m gemmtune.report` (cmd_report.cpp).
struct ReportArgs {
  std::vector<std::string> args;
};

enum class Command { none, tune, suite, run, cache, store, info, precompile, report };

// The whole grammar, bound to `args`. Not movable (CLI11 binds member addresses).
class Cli {
 public:
  Cli();
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  // Throws CLI::ParseError (CLI::CallForHelp and CLI::CallForVersion included).
  void parse(int argc, const char* const* argv);
  // Convenience for tests: arguments without the program name.
  void parse(const std::vector<std::string>& args);
  // Prints what CLI11 has to say about `e` and returns the exit code: 0 for --help and
  // --version, kUsage otherwise.
  int exit_code(const CLI::ParseError& e);

  Command command() const;

  TuneArgs tune;
  SuiteArgs suite;
  RunArgs run;
  CacheArgs cache;
  StoreArgs store;
  InfoArgs info;
  PrecompileArgs precompile;
  ReportArgs report;
  CLI::App app;

 private:
  CLI::App *tune_ = nullptr, *suite_ = nullptr, *run_ = nullptr, *cache_ = nullptr, *store_ = nullptr, *info_ = nullptr,
           *precompile_ = nullptr, *report_ = nullptr;
};

// Nominal H200 ceilings (copy TB/s, bf16 and fp8 TFLOP/s) measured with cuBLASLt on random
// data; `tune` uses them for "% of roof" unless --measure-roof.
inline constexpr double kNominalCopyTBps = 4.24;
inline constexpr double kNominalBf16Tflops = 790;
inline constexpr double kNominalFp8Tflops = 1250;

// "--act" spellings: none, relu, gelu (tanh approximation; also gelu_tanh), silu.
Activation parse_act_flag(const std::string& text);
// `v` (a --alpha / --beta value) as a float; Error naming `name` when a non-zero value would
// round to 0 (1e-50 would silently drop A@B or C) or a finite one overflow.
float float_scalar(double v, const char* name);

// The problem m x n x k with `flags`, validated. Throws Error naming the bad field
// ("shape", "dtype", "layout", "d-layout", or a problem field from GemmProblem::validate).
GemmProblem build_problem(int64_t m, int64_t n, int64_t k, const ProblemFlags& flags);
GemmProblem build_problem(const std::string& shape, const ProblemFlags& flags);
// For tests and the tune command: a `tune` argument vector (without program name) to its
// problem. Throws CLI::ParseError for usage errors, Error for invalid values.
GemmProblem problem_from_tune_args(const std::vector<std::string>& args);

// log: one line each, to stderr.
EngineOptions engine_options(const EngineFlags& flags, std::function<void(const std::string&)> log);

// ---- suite input -----------------------------------------------------------------------
struct SuiteEntry {
  std::string model, layer, phase;
  int64_t m = 0, n = 0, k = 0;
};

// Minimal RFC 4180 CSV: commas, double-quoted fields with "" escapes, \n or \r\n line ends;
// blank lines and lines starting with '#' skipped, a leading UTF-8 BOM ignored. Errors name `name`
// and the line; `lines` (optional) receives each record's 1-based line number.
std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& name,
                                                std::vector<size_t>* lines = nullptr);
// Most entries a suite may have (rows x m values): a larger one is an Error saying so.
inline constexpr size_t kMaxSuiteEntries = 10'000'000;

// A GEMM suite's entries: its rows, or every row crossed with every m value (row-major: row 0
// with each m, then row 1, ...) when the shapes have no m column. The cross product is enumerated,
// never stored: 10^6 rows x 10^3 m values take the memory of 10^6 + 10^3 entries.
class SuiteEntries {
 public:
  struct MValue {
    std::string phase;
    int64_t m = 0;
  };
  size_t size() const { return rows_.size() * (ms_.empty() ? 1 : ms_.size()); }
  bool empty() const { return size() == 0; }
  SuiteEntry operator[](size_t i) const;
  const std::vector<SuiteEntry>& rows() const { return rows_; }  // m set only without m values
  const std::vector<MValue>& m_values() const { return ms_; }    // empty: the rows carry m

  class iterator {
   public:
    iterator(const SuiteEntries* s, size_t i) : s_(s), i_(i) {}
    SuiteEntry operator*() const { return (*s_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const SuiteEntries* s_;
    size_t i_;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  friend SuiteEntries suite_entries(const std::string&, const std::string&, const std::string*, const std::string&);
  std::vector<SuiteEntry> rows_;
  std::vector<MValue> ms_;
};

// `shapes`: header with m,n,k (model, layer optional) or model,layer,n,k (then `m_values`,
// header phase,m, is required and crossed with every row). Columns are found by name, in any
// order; other columns are ignored. Every row is checked here (errors name the file and line);
// more than kMaxSuiteEntries entries is an Error.
SuiteEntries suite_entries(const std::string& shapes, const std::string& shapes_name, const std::string* m_values,
                           const std::string& m_values_name);
std::string read_text_file(const std::string& path);
// True when the GEMM suite `shapes` (a CSV as suite_entries reads) has no m column, so that it
// needs --m-values. Reads the header only; a file without one says false (suite_entries names
// what is wrong with it).
bool suite_needs_m_values(const std::string& shapes, const std::string& shapes_name);

// ---- output helpers --------------------------------------------------------------------
std::string csv_escape(const std::string& field);
// "rc": A's and B's layout letters.
std::string layout_letters(const GemmProblem& p);
// "none", or the epilogue's parts joined by '+': alpha, beta (C read), bias, relu/gelu/silu.
std::string epilogue_str(const GemmProblem& p);
// Local time "YYYY-MM-DD HH:MM:SS" of unix seconds.
std::string format_time(double unix_seconds);

}  // namespace gemmtune::cli
