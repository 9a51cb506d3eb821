// `gemmtune tune PROBLEM [flags]`: select (or re-tune) one problem and print every candidate. The
// problem names its op: MxNxK is a GEMM, `softmax ROWSxCOLS` a softmax, `grouped GxNxK` a grouped GEMM. One implementation for
// every op (tune_op); what differs per op is in OpCli<Op> (op_cli.hpp).
#include <iostream>

#include "commands.hpp"
#include "core/report_json.hpp"
#include "gemmtune/error.hpp"
#include "op_cli.hpp"

namespace gemmtune::cli {

namespace {

std::string marks(const CandidateResult& r) {
  std::string m;
  if (r.winner) m += '*';
  if (r.is_default) m += 'd';
  return m;
}

// The human-readable report: head (problem, key, device, answer), one table row per candidate
// (in the order of `results`), the op's summary, the notes.
template <class Op>
void print_tune_report(std::ostream& os, const std::string& device, const typename Op::Problem& p,
                       const TuneReport& report, const std::vector<CandidateResult>& results,
                       const std::string& tuned_at, double select_ms, const typename OpCli<Op>::Roof& roof) {
  using C = OpCli<Op>;
  print_report_head(os, C::problem_text(p), device, report, tuned_at, select_ms);
  std::vector<std::vector<std::string>> rows{{"", "rank", "backend", "candidate", "median us", "p20-p80 us",
                                              C::kRateUnit, C::kPctHeader, "rel err", "compile s", "status"}};
  int rank = 0;
  for (const auto& r : results) {
    const bool timed = r.median_us > 0;
    const double rate = C::rate(p, r.median_us);
    rows.push_back({marks(r), std::to_string(++rank), r.backend, r.name, timed ? fixed(r.median_us, 2) : "-",
                    timed ? fixed(r.p20_us, 2) + "-" + fixed(r.p80_us, 2) : "-",
                    timed ? fixed(rate, C::kRateDecimals) : "-",
                    timed && roof.rate > 0 ? fixed(100.0 * rate / roof.rate, 1) : "-", sci(r.rel_err),
                    fixed(r.compile_s, 2), status_text(r)});
  }
  os << format_table(rows, {false, true, false, false, true, true, true, true, true, true, false});
  C::print_summary(os, p, report, results, roof);
  print_notes(os, report);
}

template <class Op>
int tune_op(const TuneArgs& args) {
  using C = OpCli<Op>;
  typename Op::Problem problem;
  try {
    problem = C::tune_problem(args);
  } catch (const Error& e) {
    // Flags that describe an invalid problem are a usage error.
    return usage_error("tune", e.message());
  }
  if (!require_gpu()) return kNoDevice;
  auto engine = make_engine(args.engine, log_stderr);
  if (!engine) return kNoDevice;

  TuneReport report;
  double select_ms = 0;
  const KernelFor<Op> kernel = timed_select(*engine, problem, args.force, report, select_ms);
  const auto results = report_results(*engine, report, kernel);
  const std::string tuned_at = cached_at(*engine, report);
  const auto roof = C::roof(*engine, problem, args.measure_roof);

  // With --json -, stdout carries the JSON alone and the table goes to stderr.
  std::ostream& table_out = args.json == "-" ? std::cerr : std::cout;
  print_tune_report<Op>(table_out, engine->device().str(), problem, report, results, tuned_at, select_ms, roof);

  if (!args.json.empty()) {
    nlohmann::json j{{"op", Op::name},
                     {"problem", C::problem_json(problem)},
                     {"key", report.key},
                     {"from_cache", report.from_cache},
                     {"tuned_at", tuned_at},
                     {"seconds", report.seconds},
                     {"select_ms", select_ms},
                     {"spread", report.spread},
                     {"device", engine->device().str()},
                     {"environment", engine->environment(Op::name)},
                     {"kernel", {{"backend", kernel.backend()}, {"id", kernel.id()}, {"name", kernel.name()}}},
                     {"notes", report.notes},
                     {"results", nlohmann::json::array()}};
    C::roof_json(j, roof);
    for (const auto& r : results) {
      // The one encoding of a candidate result (to_json), plus the rate and its share of the roof.
      const double rate = C::rate(problem, r.median_us);
      nlohmann::json jr = to_json(r);
      jr[C::kRateKey] = rate;
      if (roof.rate > 0) jr[C::kPctKey] = 100.0 * rate / roof.rate;
      j["results"].push_back(std::move(jr));
    }
    write_output(args.json, j.dump(2) + "\n");
  }
  return kOk;
}

}  // namespace

int cmd_tune(const TuneArgs& args) {
  if (args.shape == GroupedOp::name) return tune_op<GroupedOp>(args);
  return args.shape == SoftmaxOp::name ? tune_op<SoftmaxOp>(args) : tune_op<GemmOp>(args);
}

}  // namespace gemmtune::cli
