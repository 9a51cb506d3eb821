// What the CLI's `tune` and `suite` need to know about one op: OpCli<Op> for GemmOp and SoftmaxOp
// (and for each op to come). There is one tune command (cmd_tune.cpp) and one suite command
// (cmd_suite.cpp), both templated on the op as the engine's tune path is; an OpCli holds only what
// differs between ops: reading the problem from the flags or from a suite row, the problem's text,
// columns and JSON, its throughput ("rate") and the ceiling the rate is compared with ("roof").
//
// The members every OpCli<Op> has:
//   Problem, Entry            the op's problem; one row of its suite file
//   Roof                      the ceiling of the "%" column: .rate in the unit of rate(), > 0 when
//                             known (else the "%" column is "-" and the JSON has no kPctKey)
//   kRateUnit, kRateDecimals  the rate's unit and decimals in the tune table and suite progress
//   kRateKey, kPctKey         the JSON / CSV keys of the rate and of its percentage of the roof
//   kPctHeader                the tune table's header of that percentage
//   kHasDefault               suite records have a "default" column (a backend names a default pick)
//   kCsvFullPrecision         suite CSV numbers are their JSON text (full precision) instead of
//                             fixed decimals
//   rate(p, median_us)        throughput at median_us (0 when the median is 0)
//   tune_problem(args)        the problem of `gemmtune tune ...`; throws Error (a usage error)
//   problem_text(p)           the "problem" line of the tune report
//   problem_json(p)           the "problem" of tune --json
//   roof(engine, p, measure)  the roof: nominal, or measured on the device when `measure`
//   roof_json(j, roof)        adds the roof's fields to tune --json's object `j`
//   print_summary(os, p, report, results, roof)
//                             the tune report between the candidate table and the notes
//   suite_usage(args, text)   a usage error of the suite file `text` with these flags, or ""
//   suite_entries(args, text) the suite's rows; throws Error naming the file and line
//   suite_problem(e, flags)   row `e`'s problem; throws Error
//   label(e)                  row `e` in progress lines
//   head(r, e, flags, p), tail(r, e, flags, p)
//                             the problem's columns of a suite record, before the candidate's
//                             columns and after them (p: the built problem, nullptr when building
//                             it failed)
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/softmax.hpp"
#include "options.hpp"
#include "tune/ceilings.hpp"

namespace gemmtune::cli {

// One suite output record: the same fields, in column order, for CSV (text) and JSON (typed).
class Record {
 public:
  // full_precision: number() writes a number's JSON text to the CSV instead of its fixed text.
  explicit Record(bool full_precision) : full_precision_(full_precision) {}

  void add(const std::string& key, const std::string& text, nlohmann::json value);
  void add(const std::string& key, const std::string& text) { add(key, text, text); }
  void add(const std::string& key, int64_t value) { add(key, std::to_string(value), value); }
  // A measured number: `text` (its fixed-decimals form) in the CSV unless full precision.
  void number(const std::string& key, double value, const std::string& text);

  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<std::string>& cells() const { return cells_; }  // CSV-escaped
  const nlohmann::json& json() const { return json_; }

 private:
  bool full_precision_;
  std::vector<std::string> keys_, cells_;
  nlohmann::json json_ = nlohmann::json::object();
};

template <class Op>
struct OpCli;

template <>
struct OpCli<GemmOp> {
  using Problem = GemmProblem;
  using Entry = SuiteEntry;
  struct Roof {
    double rate = 0;  // TFLOP/s of this problem at the ceilings (roof_tflops)
    Ceilings ceilings;
    std::string source;  // "nominal H200 ceilings" or "ceilings measured now"
  };
  static constexpr const char* kRateUnit = "TFLOP/s";
  static constexpr int kRateDecimals = 1;
  static constexpr const char* kRateKey = "tflops";
  static constexpr const char* kPctKey = "pct_roof";
  static constexpr const char* kPctHeader = "% roof";
  static constexpr bool kHasDefault = true;  // cuBLASLt's heuristic pick
  static constexpr bool kCsvFullPrecision = false;

  static double rate(const Problem& p, double median_us);
  static Problem tune_problem(const TuneArgs& args);
  static std::string problem_text(const Problem& p);
  static nlohmann::json problem_json(const Problem& p);
  static Roof roof(Engine& engine, const Problem& p, bool measure);
  static void roof_json(nlohmann::json& j, const Roof& roof);
  // The legend, the winner against cuBLASLt's default pick, and the roof with its ceilings.
  static void print_summary(std::ostream& os, const Problem& p, const TuneReport& report,
                            const std::vector<CandidateResult>& results, const Roof& roof);
  static std::string suite_usage(const SuiteArgs& args, const std::string& text);
  // Reads --m-values when given.
  static SuiteEntries suite_entries(const SuiteArgs& args, const std::string& text);
  static Problem suite_problem(const Entry& e, const ProblemFlags& flags);
  static std::string label(const Entry& e);
  // op, model, layer, m, n, k, dtype, layout, epilogue.
  static void head(Record& r, const Entry& e, const ProblemFlags& flags, const Problem* p);
  // phase, out_dtype, d_layout, scale.
  static void tail(Record& r, const Entry& e, const ProblemFlags& flags, const Problem* p);
};

// Softmax: `gemmtune tune softmax ROWSxCOLS` and suites with header rows,cols (softmax_cli.hpp).
template <>
struct OpCli<SoftmaxOp> {
  using Problem = SoftmaxProblem;
  using Entry = std::pair<int64_t, int64_t>;  // rows, cols
  struct Roof {
    double rate = 0;     // copy bandwidth, TB/s
    std::string source;  // "nominal H200 copy bandwidth" or "copy bandwidth measured now"
  };
  static constexpr const char* kRateUnit = "TB/s";
  static constexpr int kRateDecimals = 3;
  static constexpr const char* kRateKey = "tbps";
  static constexpr const char* kPctKey = "pct_copy";
  static constexpr const char* kPctHeader = "% copy";
  static constexpr bool kHasDefault = false;
  static constexpr bool kCsvFullPrecision = true;

  static double rate(const Problem& p, double median_us);
  static Problem tune_problem(const TuneArgs& args);
  static std::string problem_text(const Problem& p);
  static nlohmann::json problem_json(const Problem& p);
  static Roof roof(Engine& engine, const Problem& p, bool measure);
  static void roof_json(nlohmann::json& j, const Roof& roof);
  // The legend (what TB/s counts) and the copy bandwidth.
  static void print_summary(std::ostream& os, const Problem& p, const TuneReport& report,
                            const std::vector<CandidateResult>& results, const Roof& roof);
  static std::string suite_usage(const SuiteArgs& args, const std::string& text);
  static std::vector<Entry> suite_entries(const SuiteArgs& args, const std::string& text);
  static Problem suite_problem(const Entry& e, const ProblemFlags& flags);
  static std::string label(const Entry& e);
  // op, rows, cols, ld, dtype, out_dtype, scale: as the flags say (p is not read).
  static void head(Record& r, const Entry& e, const ProblemFlags& flags, const Problem* p);
  // None.
  static void tail(Record& r, const Entry& e, const ProblemFlags& flags, const Problem* p);
};

// Grouped GEMM: `gemmtune tune grouped GxNxK --rows-per-group M [--layout contiguous|masked]
// [--skew S]` (grouped_cli.cpp); tune only (no suites). Rate: TFLOP/s at the tuned rows (the
// bucket's); no roof.
template <>
struct OpCli<GroupedOp> {
  using Problem = GroupedGemmProblem;
  struct Roof {
    double rate = 0;  // none: the "%" column is "-"
    std::string source;
  };
  static constexpr const char* kRateUnit = "TFLOP/s";
  static constexpr int kRateDecimals = 1;
  static constexpr const char* kRateKey = "tflops";
  static constexpr const char* kPctKey = "pct_roof";
  static constexpr const char* kPctHeader = "% roof";

  static double rate(const Problem& p, double median_us);
  static Problem tune_problem(const TuneArgs& args);
  static std::string problem_text(const Problem& p);
  static nlohmann::json problem_json(const Problem& p);
  static Roof roof(Engine& engine, const Problem& p, bool measure);
  static void roof_json(nlohmann::json& j, const Roof& roof);
  // The legend (what TFLOP/s counts: the rows timed).
  static void print_summary(std::ostream& os, const Problem& p, const TuneReport& report,
                            const std::vector<CandidateResult>& results, const Roof& roof);
};

// The grouped problem GxNxK with `flags` (--rows-per-group required; --layout contiguous|masked,
// default contiguous; --skew; --dtype bf16|fp16|e4m3, --out-dtype, --scale tensorwise|rowwise,
// --bias, --act, --alpha), validated. Throws Error naming the bad flag or field.
GroupedGemmProblem build_grouped_problem(const std::string& g_n_k, const ProblemFlags& flags);

// A suite's column names, in order: the keys of each of its records (CSV header).
template <class Op>
std::vector<std::string> suite_columns();

}  // namespace gemmtune::cli
