// The command-line grammar and flag-to-library conversions (see options.hpp).
#include "options.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "gemmtune/backends.hpp"
#include "gemmtune/error.hpp"
#include "core/text.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "store/remote_cache.hpp"

namespace gemmtune::cli {

namespace {

constexpr const char* kFooter =
    "Exit codes: 0 ok; 1 error (message on stderr); 2 usage error (bad flag, or flags that\n"
    "describe an invalid problem); 3 no CUDA device, or no requested backend available.\n"
    "Cache: --cache PATH, else $GEMMTUNE_CACHE, else $XDG_CACHE_HOME/gemmtune/tuning.sqlite,\n"
    "else ~/.cache/gemmtune/tuning.sqlite. Results are keyed by problem and environment\n"
    "(GPU, driver, CUDA and backend versions), so a cache never answers for another setup.";

// Numeric flags: an empty value (an unset shell variable) is an error, not the 0 CLI11 makes of it.
CLI::Validator not_empty() {
  return CLI::Validator(
      [](std::string& v) { return v.find_first_not_of(" \t") == std::string::npos ? std::string("is empty") : std::string(); },
      "", "not empty");
}

void add_problem_flags(CLI::App* cmd, ProblemFlags& f, bool with_ld) {
  cmd->add_option("--dtype", f.dtype, "A and B dtype: bf16|fp16|fp32|e4m3|e5m2")->capture_default_str();
  cmd->add_option("--b-dtype", f.b_dtype, "B dtype when it differs from A's (fp8: e4m3 with e5m2)");
  cmd->add_option("--out-dtype", f.out_dtype,
                  "D, C and bias dtype (default: bf16 for fp8 inputs, else the input dtype)");
  cmd->add_option("--layout", f.layout,
                  "A and B storage, one letter each (r = row-major, c = col-major). \"rc\" is\n"
                  "nn.Linear: A[m,k] row-major and the weight W[n,k] row-major, i.e. B = W^T col-major")
      ->capture_default_str();
  cmd->add_option("--d-layout", f.d_layout, "D (and C) storage: r|c")->capture_default_str();
  if (with_ld) {
    cmd->add_option("--lda", f.lda, "leading dimension of A (0 = packed)")->capture_default_str()->check(not_empty());
    cmd->add_option("--ldb", f.ldb, "leading dimension of B (0 = packed)")->capture_default_str()->check(not_empty());
    cmd->add_option("--ldd", f.ldd, "leading dimension of D and C (0 = packed)")->capture_default_str()->check(not_empty());
  }
  cmd->add_option("--alpha", f.alpha, "D = act(alpha * A@B + beta * C + bias)")->capture_default_str()->check(not_empty());
  cmd->add_option("--beta", f.beta, "non-zero: C (D's dtype and layout) is read")->capture_default_str()->check(not_empty());
  cmd->add_flag("--bias", f.bias, "add bias[n] (D's dtype)");
  cmd->add_option("--act", f.act, "activation: none|relu|gelu|silu (gelu = tanh approximation)")
      ->capture_default_str();
  cmd->add_option("--scale", f.scale,
                  "fp8 scales: none|tensorwise|rowwise|block (default: tensorwise for fp8 inputs); softmax: the\n"
                  "factor S applied before the softmax (default 1)");
  cmd->add_flag("--tf32", f.tf32, "fp32 inputs: allow TF32 tensor cores");
}

std::string lower_trim(std::string s);

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "unknown <what> 'x' (known: a, b); did you mean 'a'?" (the suggestion when one is within 3 edits).
std::string unknown(const std::string& what, const std::string& text, const std::vector<std::string>& known) {
  std::string list, best;
  size_t best_d = 4;
  for (const std::string& k : known) {
    list += (list.empty() ? "" : ", ") + k;
    if (size_t d = edit_distance(text, k); d < best_d) best_d = d, best = k;
  }
  return "unknown " + what + " '" + text + "' (known: " + list + ")" + (best.empty() ? "" : "; did you mean '" + best + "'?");
}

// Backend names are checked while parsing: a usage error, found before any GPU check.
CLI::Validator backend_name_check() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        std::vector<std::string> known = backend_names("gemm");
        for (const std::string& n : backend_names("softmax"))
          if (std::find(known.begin(), known.end(), n) == known.end()) known.push_back(n);
        const std::string t = lower_trim(name);
        if (std::find(known.begin(), known.end(), t) != known.end()) return {};
        return unknown("backend", name, known);
      },
      "BACKEND");
}

// The compile stage's options (EngineOptions::compile, max_configs, log_level).
void add_compile_flags(CLI::App* cmd, EngineFlags& f) {
  cmd->add_option("--artifacts", f.artifacts, "artifact store, e.g. a kernel pack (default: $GEMMTUNE_ARTIFACTS, else\n"
                                               "~/.cache/gemmtune/artifacts)");
  cmd->add_option("--compile-workers", f.workers, "Python compile workers at once (default: $GEMMTUNE_COMPILE_WORKERS, else cores)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--nvcc-jobs", f.nvcc_jobs, "nvcc processes at once (default: $GEMMTUNE_NVCC_JOBS, else cores)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--compile-timeout", f.compile_timeout, "seconds per compile job (default: $GEMMTUNE_COMPILE_TIMEOUT, else 600)")
      ->check(CLI::Range(1.0, 1e8));
  cmd->add_option("--load-only", f.load_only, "toolchains that never compile here: cutlass,triton,cutedsl (their\n"
                                               "candidates are the artifacts in the store)")
      ->delimiter(',')
      ->check(CLI::IsMember({"cutlass", "triton", "cutedsl"}));
  cmd->add_option("--max-configs", f.max_configs, "candidates per backend and problem at most (default: $GEMMTUNE_MAX_CONFIGS,\n"
                                                   "else each backend's own)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--log-level", f.log_level, "quiet|warning|info|debug (default: $GEMMTUNE_LOG, else info)")
      ->check(CLI::IsMember({"quiet", "warning", "info", "debug"}));
}

void add_engine_flags(CLI::App* cmd, EngineFlags& f) {
  cmd->add_option("--backends", f.backends, "comma-separated backends to use (default: all available)")
      ->delimiter(',')
      ->check(backend_name_check());
  auto* cache = cmd->add_option("--cache", f.cache, "tuning-cache file (default: see gemmtune --help)");
  auto* no_cache = cmd->add_flag("--no-cache", f.no_cache, "neither read nor write the tuning cache")->excludes(cache);
  cmd->add_option("--remote", f.remote, "shared tuning cache redis://host[:port][/db] in front of the local one\n"
                                         "(default: $GEMMTUNE_REMOTE_CACHE; docs/remote-cache.md)")
      ->excludes(no_cache)
      ->check(CLI::Validator(
          [](std::string& url) {
            try {
              parse_redis_url(url, "--remote");
              return std::string();
            } catch (const Error& e) {
              return e.message();
            }
          },
          "URL"));
  cmd->add_option("--remote-timeout", f.remote_timeout_ms, "ms per remote operation (default: $GEMMTUNE_REMOTE_TIMEOUT_MS, else 50)")
      ->check(CLI::Range(1.0, 60000.0));
  cmd->add_flag("--in-process", f.in_process,
                "run candidates in this process instead of a tuning helper process (a faulting\n"
                "candidate then ends this process; docs/isolation.md; default: $GEMMTUNE_ISOLATION)");
  cmd->add_option("--candidate-timeout", f.candidate_timeout,
                  "seconds one candidate step may run in the tuning helper before it is killed and\n"
                  "the candidate quarantined (default: $GEMMTUNE_CANDIDATE_TIMEOUT, else 30)")
      ->check(CLI::Range(0.1, 86400.0));
  auto* budget = cmd->add_option("--compile-budget", f.compile_budget,
                                 "candidates per backend a tune may compile, the best by the cost model (CUTLASS,\n"
                                 "CuTe DSL GEMM; stored ones always run; default: $GEMMTUNE_COMPILE_BUDGET, else 8)")
                     ->check(CLI::Range(1, 4096));
  cmd->add_flag_callback("--exhaustive", [&f] { f.compile_budget = -1; },
                         "no compile budget: compile every candidate (docs/compile-stage.md)")
      ->excludes(budget);
  add_compile_flags(cmd, f);
}

std::string lower_trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

Layout layout_letter(char c, const std::string& field, const std::string& text) {
  if (c == 'r' || c == 'R') return Layout::row;
  if (c == 'c' || c == 'C') return Layout::col;
  GT_THROW(field + ": '" + text + "' must use r (row-major) or c (col-major)");
}

int64_t positive_int(const std::string& text, const std::string& where) {
  std::string t = lower_trim(text);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size() || v < 1)
    GT_THROW(where + ": '" + printable(text) + "' is not a positive integer");
  return v;
}

}  // namespace

// ---- grammar ---------------------------------------------------------------------------

Cli::Cli() : app("gemmtune: finds the fastest correct GEMM kernel for a problem on this GPU, and caches it.", "gemmtune") {
  app.footer(kFooter);
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(gemmtune::version()));

  tune_ = app.add_subcommand("tune", "Tune one GEMM (or answer from the cache) and print every candidate's timing");
  tune_->add_option("shape", tune.shape, "MxNxK, e.g. 4096x4096x4096; or softmax (then ROWSxCOLS); or grouped (then GxNxK)")->required();
  tune_->add_option("rows_cols", tune.shape2, "after softmax: ROWSxCOLS, e.g. 4096x32768; after grouped: GxNxK, e.g. 8x14336x4096");
  add_problem_flags(tune_, tune.problem, true);
  tune_->add_option("--stride", tune.problem.stride, "softmax: elements between rows (0 = packed)");
  tune_->add_option("--rows-per-group", tune.problem.rows_per_group,
                    "grouped: expected rows per group (the cache keys its power-of-two bucket)");
  tune_->add_option("--skew", tune.problem.skew,
                    "grouped: the tune times each candidate on a balanced split and on Zipf(S) group sizes\n"
                    "(default 1), ranked by the mean of the two; 0: the balanced split alone");
  add_engine_flags(tune_, tune.engine);
  tune_->add_flag("--force", tune.force, "re-tune even when cached (and overwrite the cache entry)");
  tune_->add_flag("--measure-roof", tune.measure_roof,
                  "measure the copy / bf16 / fp8 ceilings now for \"% of roof\" (default: nominal H200\n"
                  "ceilings: copy 4.24 TB/s, bf16 790 TFLOP/s, fp8 1250 TFLOP/s)");
  tune_->add_option("--json", tune.json, "also write {problem, key, from_cache, seconds, spread, results} to FILE (- = stdout)");
  tune_->footer(
      "% of roof = TFLOP/s over the roofline bound min(peak, bytes moved / copy bandwidth) of the\n"
      "problem; the table says which ceilings were used. Marks: * winner, d cuBLASLt's default pick.");

  suite_ = app.add_subcommand("suite", "Tune every problem of a CSV file; write one row per (problem, candidate)");
  suite_->add_option("file", suite.file,
                     "CSV with header m,n,k (model, layer optional) or model,layer,n,k (needs --m-values); or\n"
                     "rows,cols: a softmax suite (--dtype, --out-dtype, --scale S, --stride N apply)")
      ->required();
  suite_->add_option("--m-values", suite.m_values, "CSV with header phase,m; crossed with every model,layer,n,k row");
  add_problem_flags(suite_, suite.problem, false);
  suite_->add_option("--stride", suite.problem.stride, "softmax suites: elements between rows (0 = packed)");
  add_engine_flags(suite_, suite.engine);
  suite_->add_flag("--force", suite.force, "re-tune even when cached");
  suite_->add_option("--csv", suite.csv, "write rows to FILE (- = stdout; the default without --json)");
  suite_->add_option("--json", suite.json, "write JSON Lines to FILE (- = stdout): one object per line");
  suite_->add_option("--gpus", suite.gpus,
                     "spread the problems over GPUs: all, or device indices such as 0,1,2 (one tuning\n"
                     "process per GPU, each timing its own problems; one tuning cache; docs/multi-gpu.md)");
  suite_->add_flag("--suite-worker", suite.worker)->group("");  // a --gpus suite's worker process
  suite_->footer(
      "Columns (CSV) and keys (JSON): op,model,layer,m,n,k,dtype,layout,epilogue,backend,\n"
      "candidate,median_us,p20_us,p80_us,tflops,rel_err,compile_s,correct,winner,default,\n"
      "from_cache,select_ms,phase,out_dtype,d_layout,scale,status,reason,candidate_id.\n"
      "select_ms is the wall time of Engine::select for the problem, in this process.\n"
      "A problem that fails gets one row with status \"error\"; the exit code is then 1.\n"
      "Progress goes to stderr: a bar on a terminal, else one line per problem.");

  run_ = app.add_subcommand("run", "Compute D from .npy operands with the selected kernel; write D as .npy");
  run_->add_option("--a", run.a, "A[m,k] (.npy float16/32/64 or bfloat16; Fortran order = col-major)")->required();
  run_->add_option("--b", run.b, "B[k,n] (or W[n,k] with --weight)")->required();
  run_->add_option("--c", run.c, "C[m,n], read when --beta is not 0");
  run_->add_option("--bias", run.bias, "bias[n]");
  run_->add_option("--scale-a", run.scale_a,
                   "fp8: float32 scale of A, [1] (tensorwise), [m] (rowwise) or [m, ceil(k/128)] (block: one per\n"
                   "1x128 slice of a row)");
  run_->add_option("--scale-b", run.scale_b,
                   "fp8: float32 scale of B, [1] (tensorwise), [n] (rowwise) or [ceil(n/128), ceil(k/128)] (block:\n"
                   "one per 128x128 block of W)");
  run_->add_option("--out", run.out, "D[m,n] (float32 .npy; float16 when D is fp16)")->required();
  run_->add_option("--dtype", run.dtype, "compute dtype A and B are converted to: bf16|fp16|fp32|e4m3|e5m2")
      ->capture_default_str();
  run_->add_option("--out-dtype", run.out_dtype, "D dtype (default: bf16 for fp8 inputs, else the input dtype)");
  run_->add_flag("--weight", run.weight, "the --b file holds W[n,k] (nn.Linear weight), B = W^T");
  run_->add_option("--alpha", run.alpha, "D = act(alpha * A@B + beta * C + bias)")->capture_default_str()->check(not_empty());
  run_->add_option("--beta", run.beta, "non-zero: --c is read")->capture_default_str()->check(not_empty());
  run_->add_option("--act", run.act, "none|relu|gelu|silu")->capture_default_str();
  add_engine_flags(run_, run.engine);

  cache_ = app.add_subcommand("cache", "Inspect or move the tuning cache (no GPU needed)");
  cache_->require_subcommand(1);
  cache_->add_option("--cache", cache.cache, "tuning-cache file (default: see gemmtune --help)");
  auto action = [this](const char* name, const char* help, const char* arg, const char* arg_help) {
    CLI::App* sub = cache_->add_subcommand(name, help);
    sub->fallthrough();  // --cache may follow the action
    sub->callback([this, name] { cache.action = name; });
    if (arg) sub->add_option(arg, cache.arg, arg_help)->required();
  };
  action("list", "one line per cached problem", nullptr, nullptr);
  action("show", "every cached timing of one problem", "key", "cache key (a unique prefix is enough)");
  action("clear", "remove every entry", nullptr, nullptr);
  action("export", "write the cache as JSON", "file", "output file (- = stdout)");
  action("import", "merge a JSON export (same keys are replaced)", "file", "input file (- = stdin)");

  store_ = app.add_subcommand("store", "The artifact store (kernel packs), no GPU needed");
  store_->require_subcommand(1);
  CLI::App* trust = store_->add_subcommand(
      "trust", "trust a kernel pack built on another machine: authenticate every intact artifact of DIR with\n"
               "this machine's key, so that the engine loads them (docs/kernel-packs.md)");
  trust->callback([this] { store.action = "trust"; });
  trust->add_option("dir", store.dir, "artifact store (default: $GEMMTUNE_ARTIFACTS, else ~/.cache/gemmtune/artifacts)");

  info_ = app.add_subcommand("info", "Device, versions, backends, cache path and measured ceilings");
  info_->add_flag("--no-measure", info.no_measure, "skip measuring the copy / bf16 / fp8 ceilings");
  info_->add_flag("--json", info.json, "print {version, device, environment, cache, backends: [{op, name, available,\n"
                                       "version, reason}]} (no ceilings)");
  add_engine_flags(info_, info.engine);

  precompile_ = app.add_subcommand("precompile",
                                   "Build every kernel a suite's problems would try (CUTLASS, Triton, CuTe DSL), without a GPU");
  precompile_->add_option("file", precompile.file,
                          "suite CSV, as for `suite` (GEMM, or softmax with header rows,cols), or FILE.jsonl: one\n"
                          "problem JSON per line (GEMM, softmax or grouped GEMM), as the C API takes them (problem\n"
                          "flags do not apply)")
      ->required();
  precompile_->add_option("--m-values", precompile.m_values, "CSV with header phase,m, as for `suite`");
  add_problem_flags(precompile_, precompile.problem, false);
  precompile_->add_option("--stride", precompile.problem.stride, "softmax suites: elements between rows (0 = packed)");
  precompile_->add_option("--backends", precompile.engine.backends,
                          "comma-separated backends (default: those that build: triton, cutlass, cutedsl)")
      ->delimiter(',')
      ->check(backend_name_check());
  add_compile_flags(precompile_, precompile.engine);
  precompile_->add_option("--sms", precompile.sms, "SM count of the target GPU (H200: 132)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  precompile_->add_option("--configs", precompile.configs,
                          "comma-separated candidate ids (e.g. co128x128x64c2x1): build exactly these for every\n"
                          "problem instead of its ranked candidates (test sets)")
      ->delimiter(',');
  precompile_->add_option("--compile-budget", precompile.compile_budget,
                          "build only what a cold tune with this compile budget would (per problem and\n"
                          "backend, the cost model's best N not yet stored; default: every candidate)")
      ->check(CLI::Range(1, 4096))
      ->excludes("--configs");
  precompile_->add_option("--json", precompile.json, "one JSON line per artifact to FILE (- = stdout)");
  precompile_->footer("Copy the artifact directory to the GPU machine as a kernel pack: docs/kernel-packs.md.");

  report_ = app.add_subcommand("report",
                               "An HTML report (roofline, speed-ups, backend scorecard, correctness) from bench or\n"
                               "suite results and the tuning cache; `gemmtune report --help` for its options");
  // Everything after `report`, --help included, goes to the Python module as it was typed.
  report_->prefix_command();
  report_->set_help_flag();
  report_->allow_extras();
  report_->callback([this] { report.args = report_->remaining(); });
}

void Cli::parse(int argc, const char* const* argv) {
  // An unknown command is a usage error that names the commands (and the nearest one).
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end())
      throw CLI::ValidationError("command", unknown("command", argv[1], names));
  }
  app.parse(argc, argv);
}

void Cli::parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"gemmtune"};
  for (const auto& a : args) argv.push_back(a.c_str());
  parse(int(argv.size()), argv.data());
}

int Cli::exit_code(const CLI::ParseError& e) { return app.exit(e) == 0 ? kOk : kUsage; }

Command Cli::command() const {
  if (tune_->parsed()) return Command::tune;
  if (suite_->parsed()) return Command::suite;
  if (run_->parsed()) return Command::run;
  if (cache_->parsed()) return Command::cache;
  if (store_->parsed()) return Command::store;
  if (info_->parsed()) return Command::info;
  if (precompile_->parsed()) return Command::precompile;
  if (report_->parsed()) return Command::report;
  return Command::none;
}

// ---- flags -> library types ------------------------------------------------------------

float float_scalar(double v, const char* name) {
  const float f = float(v);
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  if (v != 0 && std::isfinite(v) && f == 0) GT_THROW(std::string(name) + ": " + text + " is too small for float (it would be 0)");
  if (std::isfinite(v) && !std::isfinite(f)) GT_THROW(std::string(name) + ": " + text + " is too large for float");
  return f;
}

Activation parse_act_flag(const std::string& text) {
  const std::string t = lower_trim(text);
  if (t == "gelu" || t == "gelu_tanh" || t == "gelu-tanh") return Activation::gelu_tanh;
  if (t == "none") return Activation::none;
  if (t == "relu") return Activation::relu;
  if (t == "silu") return Activation::silu;
  GT_THROW("act: '" + text + "' is not one of none, relu, gelu, silu");
}

GemmProblem build_problem(int64_t m, int64_t n, int64_t k, const ProblemFlags& f) {
  const DType in = parse_dtype(lower_trim(f.dtype), "dtype");
  const DType out =
      f.out_dtype.empty() ? (is_fp8(in) ? DType::bf16 : in) : parse_dtype(lower_trim(f.out_dtype), "out-dtype");
  GemmProblem p = GemmProblem::linear(m, n, k, in, out);
  if (!f.b_dtype.empty()) p.b.dtype = parse_dtype(lower_trim(f.b_dtype), "b-dtype");

  if (f.layout.size() != 2) GT_THROW("layout: '" + f.layout + "' must be two letters (A, B), e.g. rc");
  p.a.layout = layout_letter(f.layout[0], "layout", f.layout);
  p.b.layout = layout_letter(f.layout[1], "layout", f.layout);
  const std::string dl = lower_trim(f.d_layout);
  if (dl == "row") p.d.layout = Layout::row;
  else if (dl == "col") p.d.layout = Layout::col;
  else if (dl.size() == 1) p.d.layout = layout_letter(dl[0], "d-layout", f.d_layout);
  else GT_THROW("d-layout: '" + f.d_layout + "' must be r or c");

  if (f.lda < 0 || f.ldb < 0 || f.ldd < 0) GT_THROW("lda/ldb/ldd: must be >= 0 (0 = packed)");
  p.a.ld = f.lda;
  p.b.ld = f.ldb;
  p.d.ld = f.ldd;
  p.c = p.d;  // C is D's dtype, layout and ld

  p.alpha = float_scalar(f.alpha, "alpha");
  p.beta = float_scalar(f.beta, "beta");
  p.bias = f.bias;
  p.act = parse_act_flag(f.act);
  p.scale = f.scale.empty() ? (is_fp8(in) ? ScaleMode::tensorwise : ScaleMode::none)
                            : parse_scale_mode(lower_trim(f.scale), "scale");
  p.tf32 = f.tf32;
  p.validate();
  return p;
}

GemmProblem build_problem(const std::string& shape, const ProblemFlags& flags) {
  int64_t m = 0, n = 0, k = 0;
  parse_mnk(lower_trim(shape), m, n, k, "shape");
  return build_problem(m, n, k, flags);
}

GemmProblem problem_from_tune_args(const std::vector<std::string>& args) {
  Cli cli;
  std::vector<std::string> full{"tune"};
  full.insert(full.end(), args.begin(), args.end());
  cli.parse(full);
  return build_problem(cli.tune.shape, cli.tune.problem);
}

EngineOptions engine_options(const EngineFlags& f, std::function<void(const std::string&)> log) {
  EngineOptions o;
  o.cache_path = f.cache;
  o.use_cache = !f.no_cache;
  for (const auto& b : f.backends) {
    const std::string t = lower_trim(b);
    if (!t.empty()) o.backends.push_back(t);
  }
  o.compile.artifacts = f.artifacts;
  o.compile.workers = f.workers;
  o.compile.nvcc_jobs = f.nvcc_jobs;
  o.compile.timeout_s = f.compile_timeout;
  o.compile.load_only = f.load_only;
  o.max_configs = f.max_configs;
  o.compile_budget = f.compile_budget;
  o.remote_cache = f.remote;
  o.remote_timeout_ms = f.remote_timeout_ms;
  if (f.in_process) o.isolation.mode = Isolation::in_process;
  o.isolation.candidate_timeout_s = f.candidate_timeout;
  if (f.log_level == "quiet") o.log_level = LogLevel::quiet;
  else if (f.log_level == "warning") o.log_level = LogLevel::warning;
  else if (f.log_level == "debug") o.log_level = LogLevel::debug;
  o.log = std::move(log);
  return o;
}

// ---- suite input -----------------------------------------------------------------------

std::vector<std::vector<std::string>> parse_csv(const std::string& text, const std::string& name,
                                                std::vector<size_t>* lines) {
  std::vector<std::vector<std::string>> rows;
  if (lines) lines->clear();
  // A leading UTF-8 byte order mark (Excel's "CSV UTF-8") is not part of the first column's name.
  size_t i = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0, line = 1;
  while (i < text.size()) {
    // One record.
    const size_t record_line = line;
    if (text[i] == '\n' || text[i] == '\r' || text[i] == '#') {  // blank or comment line
      while (i < text.size() && text[i] != '\n') ++i;
      ++i, ++line;
      continue;
    }
    std::vector<std::string> row;
    std::string field;
    bool done = false;
    while (!done) {
      if (i < text.size() && text[i] == '"') {
        ++i;
        while (true) {
          if (i >= text.size()) GT_THROW(name + ":" + std::to_string(record_line) + ": unterminated quoted field");
          if (text[i] == '"') {
            if (i + 1 < text.size() && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (text[i] == '\n') ++line;
          field += text[i++];
        }
      }
      while (i < text.size() && text[i] != ',' && text[i] != '\n') {
        if (text[i] != '\r') field += text[i];
        ++i;
      }
      row.push_back(std::move(field));
      field.clear();
      if (i < text.size() && text[i] == ',') {
        ++i;
      } else {
        done = true;
        if (i < text.size()) ++i, ++line;  // '\n'
      }
    }
    rows.push_back(std::move(row));
    if (lines) lines->push_back(record_line);
  }
  return rows;
}

bool suite_needs_m_values(const std::string& shapes, const std::string& shapes_name) {
  auto rows = parse_csv(shapes, shapes_name);
  if (rows.empty()) return false;
  for (const std::string& c : rows[0])
    if (lower_trim(c) == "m") return false;
  return true;
}

SuiteEntry SuiteEntries::operator[](size_t i) const {
  if (ms_.empty()) return rows_.at(i);
  SuiteEntry e = rows_.at(i / ms_.size());
  const MValue& v = ms_[i % ms_.size()];
  e.m = v.m;
  e.phase = v.phase;
  return e;
}

SuiteEntries suite_entries(const std::string& shapes, const std::string& shapes_name, const std::string* m_values,
                           const std::string& m_values_name) {
  std::vector<size_t> lines, mlines;
  auto rows = parse_csv(shapes, shapes_name, &lines);
  if (rows.empty()) GT_THROW(shapes_name + ": empty (expected a header m,n,k or model,layer,n,k)");
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < rows[0].size(); ++i) col.emplace(lower_trim(rows[0][i]), i);
  auto has = [&](const char* c) { return col.count(c) > 0; };
  if (!has("n") || !has("k"))
    GT_THROW(shapes_name + ": header must name columns m,n,k or model,layer,n,k");
  const bool with_m = has("m");

  SuiteEntries out;
  if (!with_m) {
    if (!m_values)
      GT_THROW(shapes_name + ": has no m column, so --m-values FILE (header phase,m) is required");
    auto mrows = parse_csv(*m_values, m_values_name, &mlines);
    if (mrows.empty()) GT_THROW(m_values_name + ": empty (expected a header phase,m)");
    std::map<std::string, size_t> mcol;
    for (size_t i = 0; i < mrows[0].size(); ++i) mcol.emplace(lower_trim(mrows[0][i]), i);
    if (!mcol.count("m")) GT_THROW(m_values_name + ": header must name columns phase,m");
    for (size_t r = 1; r < mrows.size(); ++r) {
      const auto& row = mrows[r];
      const std::string where = m_values_name + ":" + std::to_string(mlines[r]);
      if (row.size() < mrows[0].size()) GT_THROW(where + ": has " + std::to_string(row.size()) + " fields, header has " + std::to_string(mrows[0].size()));
      SuiteEntries::MValue v{mcol.count("phase") ? row[mcol["phase"]] : std::string(),
                             positive_int(row[mcol["m"]], where + ", column m")};
      if (v.phase.empty()) v.phase = std::to_string(v.m);
      out.ms_.push_back(std::move(v));
    }
    if (out.ms_.empty()) GT_THROW(m_values_name + ": no m values");
  }

  for (size_t r = 1; r < rows.size(); ++r) {
    auto& row = rows[r];
    const std::string where = shapes_name + ":" + std::to_string(lines[r]);
    if (row.size() < rows[0].size())
      GT_THROW(where + ": has " + std::to_string(row.size()) + " fields, header has " + std::to_string(rows[0].size()));
    SuiteEntry e;
    if (has("model")) e.model = std::move(row[col["model"]]);
    if (has("layer")) e.layer = std::move(row[col["layer"]]);
    e.n = positive_int(row[col["n"]], where + ", column n");
    e.k = positive_int(row[col["k"]], where + ", column k");
    if (with_m) {
      e.m = positive_int(row[col["m"]], where + ", column m");
      if (has("phase")) e.phase = std::move(row[col["phase"]]);
    }
    row = {};  // the text of the rows already read is not needed twice
    out.rows_.push_back(std::move(e));
  }
  if (out.rows_.empty()) GT_THROW(shapes_name + ": no problems (only a header)");
  const size_t per_row = out.ms_.empty() ? 1 : out.ms_.size();
  if (out.rows_.size() > kMaxSuiteEntries / per_row)
    GT_THROW(shapes_name + ": " + std::to_string(out.rows_.size()) + " rows" +
             (out.ms_.empty() ? std::string() : " x " + std::to_string(per_row) + " m values") +
             " are more than the " + std::to_string(kMaxSuiteEntries) + " problems a suite may hold; split it");
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) GT_THROW(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- output helpers --------------------------------------------------------------------

std::string csv_escape(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string layout_letters(const GemmProblem& p) {
  return std::string(1, p.a.layout == Layout::row ? 'r' : 'c') + (p.b.layout == Layout::row ? 'r' : 'c');
}

std::string epilogue_str(const GemmProblem& p) {
  std::string s;
  auto add = [&](const char* part) { s += (s.empty() ? "" : "+") + std::string(part); };
  if (p.alpha != 1.0f) add("alpha");
  if (p.uses_c()) add("beta");
  if (p.bias) add("bias");
  switch (p.act) {
    case Activation::none: break;
    case Activation::relu: add("relu"); break;
    case Activation::gelu_tanh: add("gelu"); break;
    case Activation::silu: add("silu"); break;
  }
  return s.empty() ? "none" : s;
}

std::string format_time(double unix_seconds) {
  if (!std::isfinite(unix_seconds) || unix_seconds <= 0) return "-";  // not recorded (e.g. an imported entry)
  // Up to the year 9999 (a cache import checks that): beyond, a cast to time_t is undefined.
  if (unix_seconds > 253402300799.0) return "unknown";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace gemmtune::cli
