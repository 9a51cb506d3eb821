// `gemmtune tune MxNxK [flags]`: select (or re-tune) one problem and print every candidate.
// `gemmtune tune softmax ROWSxCOLS [flags]`: the same for a softmax (softmax_cli.cpp).
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"
#include "softmax_cli.hpp"
#include "tune/ceilings.hpp"

namespace gemmtune::cli {

namespace {

std::string marks(const CandidateResult& r) {
  std::string m;
  if (r.winner) m += '*';
  if (r.is_default) m += 'd';
  return m;
}

}  // namespace

void print_tune_report(std::ostream& os, const std::string& device, const TuneReport& report,
                       const std::vector<CandidateResult>& results, const std::string& cached_at, double select_ms,
                       double roof, const std::string& roof_text) {
  const GemmProblem& p = report.problem;
  print_report_head(os, p.str(), device, report, cached_at, select_ms);

  std::vector<std::vector<std::string>> rows{{"", "rank", "backend", "candidate", "median us", "p20-p80 us",
                                              "TFLOP/s", "% roof", "rel err", "compile s", "status"}};
  int rank = 0;
  for (const auto& r : results) {
    const bool timed = r.median_us > 0;
    const double tf = tflops(p, r.median_us);
    rows.push_back({marks(r), std::to_string(++rank), r.backend, r.name, timed ? fixed(r.median_us, 2) : "-",
                    timed ? fixed(r.p20_us, 2) + "-" + fixed(r.p80_us, 2) : "-", timed ? fixed(tf, 1) : "-",
                    timed && roof > 0 ? fixed(100.0 * tf / roof, 1) : "-", sci(r.rel_err),
                    fixed(r.compile_s, 2), status_text(r)});
  }
  os << format_table(rows, {false, true, false, false, true, true, true, true, true, true, false});
  os << "(* winner, d cuBLASLt's default pick)\n\n";

  const CandidateResult* win = nullptr;
  const CandidateResult* def = nullptr;
  for (const auto& r : results) {
    if (r.winner && !win) win = &r;
    if (r.is_default && !def) def = &r;
  }
  if (win) {
    const double tf = tflops(p, win->median_us);
    os << "winner   " << win->backend << " " << win->name << ": " << fixed(win->median_us, 2) << " us, "
       << fixed(tf, 1) << " TFLOP/s";
    if (roof > 0) os << " (" << fixed(100.0 * tf / roof, 1) << "% of roof)";
    os << "; spread (p80-p20)/median " << fixed(100.0 * report.spread, 1) << "%\n";
    if (def && def != win && def->median_us > 0 && win->median_us > 0)
      os << "default  " << def->backend << " " << def->name << ": " << fixed(def->median_us, 2)
         << " us; the winner is " << fixed(def->median_us / win->median_us, 3) << "x faster\n";
    else if (def == win)
      os << "default  the winner is the default pick\n";
  }
  os << "roof     " << fixed(roof, 1) << " TFLOP/s for this problem, from " << roof_text << "\n";
  print_notes(os, report);
}

int cmd_tune(const TuneArgs& args) {
  if (args.shape == "softmax") return cmd_tune_softmax(args);
  GemmProblem problem;
  try {
    if (!args.shape2.empty()) GT_INVALID("shape: unexpected '" + args.shape2 + "' after " + args.shape + " (softmax ROWSxCOLS takes two)");
    if (args.problem.stride) GT_INVALID("stride: applies to softmax only (GEMMs: --lda, --ldb, --ldd)");
    problem = build_problem(args.shape, args.problem);
  } catch (const Error& e) {
    // Flags that describe an invalid problem are a usage error.
    return usage_error("tune", e.message());
  }
  if (!require_gpu()) return kNoDevice;
  auto engine = make_engine(args.engine, log_stderr);
  if (!engine) return kNoDevice;

  TuneReport report;
  double select_ms = 0;
  Kernel kernel = timed_select(*engine, problem, args.force, report, select_ms);
  report.problem = problem;
  const auto results = report_results(*engine, report, kernel);
  const std::string tuned_at = cached_at(*engine, report);

  // "% of roof": nominal ceilings unless asked to measure (a few seconds of GPU time).
  Ceilings ceilings{kNominalCopyTBps, kNominalBf16Tflops, kNominalFp8Tflops};
  std::string roof_source = "nominal H200 ceilings";
  if (args.measure_roof) {
    ceilings = measure_ceilings(engine->device(), log_stderr);
    roof_source = "ceilings measured now";
  }
  const double roof = roof_tflops(problem, ceilings);
  std::ostringstream roof_text;
  roof_text << roof_source << " (copy " << fixed(ceilings.copy_TBps, 2) << " TB/s, bf16 "
            << fixed(ceilings.bf16_tflops, 0) << " TFLOP/s, fp8 " << fixed(ceilings.fp8_tflops, 0) << " TFLOP/s)";

  // With --json -, stdout carries the JSON alone and the table goes to stderr.
  std::ostream& table_out = args.json == "-" ? std::cerr : std::cout;
  print_tune_report(table_out, engine->device().str(), report, results, tuned_at, select_ms, roof, roof_text.str());

  if (!args.json.empty()) {
    nlohmann::json j{{"op", "gemm"},
                     {"problem", problem_json(problem)},
                     {"key", report.key},
                     {"from_cache", report.from_cache},
                     {"tuned_at", tuned_at},
                     {"seconds", report.seconds},
                     {"select_ms", select_ms},
                     {"spread", report.spread},
                     {"device", engine->device().str()},
                     {"environment", engine->environment()},
                     {"kernel", {{"backend", kernel.backend()}, {"id", kernel.id()}, {"name", kernel.name()}}},
                     {"roof", {{"source", roof_source},
                               {"copy_TBps", ceilings.copy_TBps},
                               {"bf16_tflops", ceilings.bf16_tflops},
                               {"fp8_tflops", ceilings.fp8_tflops},
                               {"tflops", roof}}},
                     {"notes", report.notes},
                     {"results", nlohmann::json::array()}};
    for (const auto& r : results) j["results"].push_back(result_json(r, problem, roof));
    write_output(args.json, j.dump(2) + "\n");
  }
  return kOk;
}

}  // namespace gemmtune::cli
