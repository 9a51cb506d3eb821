// The softmax side of `tune` and `suite` (softmax_cli.hpp, op_cli.hpp).
#include "softmax_cli.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "commands.hpp"
#include "gemmtune/error.hpp"
#include "op_cli.hpp"

namespace gemmtune::cli {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

float parse_scale(const std::string& text) {
  if (text.empty()) return 1.0f;
  const char* b = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(b, &end);
  if (end == b || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    GT_THROW("scale: '" + text + "' is not a finite number (softmax: the factor applied before the softmax)");
  return float(v);
}

}  // namespace

SoftmaxProblem build_softmax_problem(int64_t rows, int64_t cols, const ProblemFlags& f) {
  auto refuse = [](const std::string& flag) { GT_THROW("softmax: " + flag + " does not apply (a GEMM flag)"); };
  if (!f.b_dtype.empty()) refuse("--b-dtype");
  if (f.layout != "rc") refuse("--layout");
  if (f.d_layout != "r") refuse("--d-layout");
  if (f.lda || f.ldb || f.ldd) refuse("--lda/--ldb/--ldd (use --stride)");
  if (f.alpha != 1) refuse("--alpha");
  if (f.beta != 0) refuse("--beta");
  if (f.bias) refuse("--bias");
  if (lower(f.act) != "none") refuse("--act");
  if (f.tf32) refuse("--tf32");
  if (f.rows_per_group || f.skew.has_value()) GT_THROW("softmax: --rows-per-group and --skew do not apply (grouped flags)");
  if (f.stride < 0) GT_THROW("stride: must be >= 0 (got " + std::to_string(f.stride) + ")");
  SoftmaxProblem p = SoftmaxProblem::make(rows, cols, parse_dtype(lower(f.dtype), "dtype"));
  p.out = f.out_dtype.empty() ? p.in : parse_dtype(lower(f.out_dtype), "out-dtype");
  p.ld = f.stride;
  p.scale = parse_scale(f.scale);
  p.validate();
  return p;
}

SoftmaxProblem build_softmax_problem(const std::string& rows_cols, const ProblemFlags& f) {
  int64_t rows = 0, cols = 0;
  parse_rows_cols(rows_cols, rows, cols, "shape");
  return build_softmax_problem(rows, cols, f);
}

bool is_softmax_suite(const std::string& csv, const std::string& name) {
  const auto rows = parse_csv(csv, name);
  if (rows.empty()) return false;
  const auto& h = rows[0];
  auto has = [&](const char* c) { return std::any_of(h.begin(), h.end(), [&](const std::string& x) { return lower(x) == c; }); };
  return has("rows") && has("cols");
}

std::vector<std::pair<int64_t, int64_t>> softmax_suite_entries(const std::string& csv, const std::string& name) {
  std::vector<size_t> lines;
  const auto rows = parse_csv(csv, name, &lines);
  GT_CHECK(!rows.empty(), name + ": empty (expected a header rows,cols)");
  int ri = -1, ci = -1;
  for (size_t i = 0; i < rows[0].size(); ++i) {
    if (lower(rows[0][i]) == "rows") ri = int(i);
    if (lower(rows[0][i]) == "cols") ci = int(i);
  }
  GT_CHECK(ri >= 0 && ci >= 0, name + ": header must name columns rows,cols");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    const std::string where = name + ":" + std::to_string(lines[r]);
    auto field = [&](int i, const char* what) {
      GT_CHECK(size_t(i) < rows[r].size(), where + ": missing " + what);
      const std::string& t = rows[r][size_t(i)];
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      GT_CHECK(ec == std::errc() && ptr == t.data() + t.size() && v >= 1,
               where + ": " + what + " '" + t + "' is not a positive integer");
      return v;
    };
    out.emplace_back(field(ri, "rows"), field(ci, "cols"));
  }
  GT_CHECK(!out.empty(), name + ": no problems after the header");
  return out;
}

double softmax_tbps(const SoftmaxProblem& p, double median_us) {
  return median_us > 0 ? p.min_bytes() / (median_us * 1e-6) / 1e12 : 0;
}


double OpCli<SoftmaxOp>::rate(const Problem& p, double median_us) { return softmax_tbps(p, median_us); }

SoftmaxProblem OpCli<SoftmaxOp>::tune_problem(const TuneArgs& args) {
  if (args.shape2.empty()) GT_INVALID("shape: softmax needs ROWSxCOLS after it (e.g. tune softmax 4096x32768)");
  return build_softmax_problem(args.shape2, args.problem);
}

std::string OpCli<SoftmaxOp>::problem_text(const Problem& p) { return std::string(SoftmaxOp::name) + " " + p.str(); }

nlohmann::json OpCli<SoftmaxOp>::problem_json(const Problem& p) {
  return {{"rows", p.rows},         {"cols", p.cols}, {"ld", p.row_stride()},         {"in", to_string(p.in)},
          {"out", to_string(p.out)}, {"scale", p.scale}, {"str", p.str()}, {"canonical", p.canonical()},
          {"bytes", p.min_bytes()}};
}

OpCli<SoftmaxOp>::Roof OpCli<SoftmaxOp>::roof(Engine& engine, const Problem&, bool measure) {
  if (!measure) return {kNominalCopyTBps, "nominal H200 copy bandwidth"};
  return {measure_ceilings(engine.device(), log_stderr).copy_TBps, "copy bandwidth measured now"};
}

void OpCli<SoftmaxOp>::roof_json(nlohmann::json& j, const Roof& roof) {
  j["copy_TBps"] = roof.rate;
  j["copy_source"] = roof.source;
}

void OpCli<SoftmaxOp>::print_summary(std::ostream& os, const Problem&, const TuneReport&,
                                     const std::vector<CandidateResult>&, const Roof& roof) {
  os << "(* winner; TB/s = (bytes of x read + bytes of y written) / median)\n";
  os << "copy     " << fixed(roof.rate, 2) << " TB/s (" << roof.source << ")\n";
}

std::string OpCli<SoftmaxOp>::suite_usage(const SuiteArgs& args, const std::string&) {
  if (!args.m_values.empty()) return "--m-values does not apply to a softmax suite (header rows,cols)";
  return {};
}

std::vector<OpCli<SoftmaxOp>::Entry> OpCli<SoftmaxOp>::suite_entries(const SuiteArgs& args, const std::string& text) {
  return softmax_suite_entries(text, args.file);
}

SoftmaxProblem OpCli<SoftmaxOp>::suite_problem(const Entry& e, const ProblemFlags& flags) {
  return build_softmax_problem(e.first, e.second, flags);
}

std::string OpCli<SoftmaxOp>::label(const Entry& e) {
  return std::string(SoftmaxOp::name) + " " + std::to_string(e.first) + "x" + std::to_string(e.second);
}

void OpCli<SoftmaxOp>::head(Record& r, const Entry& e, const ProblemFlags& flags, const Problem*) {
  r.add("op", SoftmaxOp::name);
  r.add("rows", e.first);
  r.add("cols", e.second);
  r.add("ld", flags.stride ? flags.stride : e.second);
  r.add("dtype", flags.dtype);
  r.add("out_dtype", flags.out_dtype.empty() ? flags.dtype : flags.out_dtype);
  r.add("scale", flags.scale.empty() ? "1" : flags.scale);
}

void OpCli<SoftmaxOp>::tail(Record&, const Entry&, const ProblemFlags&, const Problem*) {}

}  // namespace gemmtune::cli
