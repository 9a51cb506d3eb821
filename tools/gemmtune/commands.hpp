// The gemmtune commands, one file each (cmd_*.cpp), and what they share (commands.cpp).
//
// Each command returns its exit code (options.hpp: Exit). gemmtune::Error escaping a command
// is printed by run_cli as "gemmtune: <message>" and exits 3 (kNoDevice) for
// ErrorCode::no_device, else 1.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/report.hpp"
#include "options.hpp"

namespace gemmtune::cli {

// Parses argv, runs the command, maps errors to exit codes. main() is just this.
int run_cli(int argc, char** argv);

int cmd_tune(const TuneArgs& args);
int cmd_suite(const SuiteArgs& args);
int cmd_run(const RunArgs& args);
int cmd_cache(const CacheArgs& args);
int cmd_store(const StoreArgs& args);
int cmd_info(const InfoArgs& args);
int cmd_precompile(const PrecompileArgs& args);
int cmd_report(const ReportArgs& args);

// ---- shared ----------------------------------------------------------------------------

// False (after printing "gemmtune: no CUDA device (<reason>); tuning needs an NVIDIA GPU" to
// stderr) when no CUDA device is usable.
bool require_gpu();

// Writes "gemmtune: <line>" to stderr.
void log_stderr(const std::string& line);

// Writes "gemmtune <command>: <message>" and the --help hint to stderr; returns kUsage.
int usage_error(const std::string& command, const std::string& message);

// The engine for `flags`, after checking that a backend it may use is available: nullptr
// (after printing why on stderr) when none is, which callers turn into exit code 3.
std::unique_ptr<Engine> make_engine(const EngineFlags& flags, std::function<void(const std::string&)> log);

// The candidates' timings behind `report`: its own results when it tuned now; on a cache hit,
// its results if the engine filled them in, else the cache's (Engine::cache()->results()); else
// (an in-process repeat without a cache) one untimed row for `kernel`.
// Sorted: winner first, then correct candidates by median, pruned, wrong, failed.
// Defined for GemmOp and SoftmaxOp.
template <class Op>
std::vector<CandidateResult> report_results(Engine& engine, const TuneReport& report, const KernelFor<Op>& kernel);

// Selects (with `force`: re-tunes) `problem` (a GemmProblem or a SoftmaxProblem) and returns its
// kernel; `report` gets the engine's report, with the key filled in when the engine left it
// empty, and `select_ms` the wall time of the call.
template <class Problem>
auto timed_select(Engine& engine, const Problem& problem, bool force, TuneReport& report, double& select_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  auto kernel = force ? engine.tune(problem, &report) : engine.select(problem, &report);
  select_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (report.key.empty()) report.key = engine.cache_key(problem);
  return kernel;
}

// When the cache entry behind `report` was tuned (format_time), if the report came from the
// cache and the entry is there; else "".
std::string cached_at(Engine& engine, const TuneReport& report);

// The head of a tune report: problem (`problem_text`), key, device, the answer (from the cache,
// with `cached_at` and `select_ms`, or tuned now, with the report's seconds) and a blank line.
void print_report_head(std::ostream& os, const std::string& problem_text, const std::string& device,
                       const TuneReport& report, const std::string& cached_at, double select_ms);
// "notes" and a "  - <note>" line per note of the report; nothing when it has none.
void print_notes(std::ostream& os, const TuneReport& report);

// A candidate's status column: "<status>", or "<status>: <reason>" when it has a reason.
std::string status_text(const CandidateResult& r);

// Fixed-point and scientific text of a number ("-" for a negative "not measured" value).
std::string fixed(double v, int decimals);
std::string sci(double v);
// Columns padded to their widest cell; columns listed in `right` are right-aligned.
std::string format_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right);

// Writes `text` to `path`, or to stdout for "-". Throws Error naming the path.
void write_output(const std::string& path, const std::string& text);

}  // namespace gemmtune::cli
