// The GEMM side of `tune` and `suite` (op_cli.hpp): `gemmtune tune MxNxK` and suites with m,n,k
// or model,layer,n,k (with --m-values) columns.
#include <iostream>

#include "commands.hpp"
#include "gemmtune/error.hpp"
#include "op_cli.hpp"

namespace gemmtune::cli {

double OpCli<GemmOp>::rate(const Problem& p, double median_us) {
  return median_us > 0 ? p.flops() / median_us * 1e-6 : 0;
}

GemmProblem OpCli<GemmOp>::tune_problem(const TuneArgs& args) {
  if (!args.shape2.empty())
    GT_INVALID("shape: unexpected '" + args.shape2 + "' after " + args.shape + " (softmax ROWSxCOLS takes two)");
  if (args.problem.stride) GT_INVALID("stride: applies to softmax only (GEMMs: --lda, --ldb, --ldd)");
  if (args.problem.rows_per_group || args.problem.skew.has_value()) GT_INVALID("rows-per-group, skew: apply to grouped only");
  return build_problem(args.shape, args.problem);
}

std::string OpCli<GemmOp>::problem_text(const Problem& p) { return p.str(); }

nlohmann::json OpCli<GemmOp>::problem_json(const Problem& p) {
  auto mat = [](const MatrixDesc& d) {
    return nlohmann::json{{"dtype", to_string(d.dtype)}, {"layout", to_string(d.layout)}, {"ld", d.ld}};
  };
  return {{"m", p.m},
          {"n", p.n},
          {"k", p.k},
          {"a", mat(p.a)},
          {"b", mat(p.b)},
          {"c", mat(p.c)},
          {"d", mat(p.d)},
          {"alpha", p.alpha},
          {"beta", p.beta},
          {"bias", p.bias},
          {"act", to_string(p.act)},
          {"scale", to_string(p.scale)},
          {"tf32", p.tf32},
          {"layout", layout_letters(p)},
          {"epilogue", epilogue_str(p)},
          {"str", p.str()},
          {"canonical", p.canonical()}};
}

OpCli<GemmOp>::Roof OpCli<GemmOp>::roof(Engine& engine, const Problem& p, bool measure) {
  // Nominal ceilings unless asked to measure (a few seconds of GPU time).
  Roof roof{0, Ceilings{kNominalCopyTBps, kNominalBf16Tflops, kNominalFp8Tflops}, "nominal H200 ceilings"};
  if (measure) {
    roof.ceilings = measure_ceilings(engine.device(), log_stderr);
    roof.source = "ceilings measured now";
  }
  roof.rate = roof_tflops(p, roof.ceilings);
  return roof;
}

void OpCli<GemmOp>::roof_json(nlohmann::json& j, const Roof& roof) {
  j["roof"] = {{"source", roof.source},
               {"copy_TBps", roof.ceilings.copy_TBps},
               {"bf16_tflops", roof.ceilings.bf16_tflops},
               {"fp8_tflops", roof.ceilings.fp8_tflops},
               {"tflops", roof.rate}};
}

void OpCli<GemmOp>::print_summary(std::ostream& os, const Problem& p, const TuneReport& report,
                                  const std::vector<CandidateResult>& results, const Roof& roof) {
  os << "(* winner, d cuBLASLt's default pick)\n\n";
  const CandidateResult* win = nullptr;
  const CandidateResult* def = nullptr;
  for (const auto& r : results) {
    if (r.winner && !win) win = &r;
    if (r.is_default && !def) def = &r;
  }
  if (win) {
    const double tf = rate(p, win->median_us);
    os << "winner   " << win->backend << " " << win->name << ": " << fixed(win->median_us, 2) << " us, "
       << fixed(tf, 1) << " TFLOP/s";
    if (roof.rate > 0) os << " (" << fixed(100.0 * tf / roof.rate, 1) << "% of roof)";
    os << "; spread (p80-p20)/median " << fixed(100.0 * report.spread, 1) << "%\n";
    if (def && def != win && def->median_us > 0 && win->median_us > 0)
      os << "default  " << def->backend << " " << def->name << ": " << fixed(def->median_us, 2)
         << " us; the winner is " << fixed(def->median_us / win->median_us, 3) << "x faster\n";
    else if (def == win)
      os << "default  the winner is the default pick\n";
  }
  const Ceilings& c = roof.ceilings;
  os << "roof     " << fixed(roof.rate, 1) << " TFLOP/s for this problem, from " << roof.source << " (copy "
     << fixed(c.copy_TBps, 2) << " TB/s, bf16 " << fixed(c.bf16_tflops, 0) << " TFLOP/s, fp8 "
     << fixed(c.fp8_tflops, 0) << " TFLOP/s)\n";
}

std::string OpCli<GemmOp>::suite_usage(const SuiteArgs& args, const std::string& text) {
  if (args.m_values.empty() && suite_needs_m_values(text, args.file))
    return args.file + ": has no m column, so --m-values FILE (header phase,m) is required";
  return {};
}

SuiteEntries OpCli<GemmOp>::suite_entries(const SuiteArgs& args, const std::string& text) {
  if (args.m_values.empty()) return cli::suite_entries(text, args.file, nullptr, args.m_values);
  const std::string m_values = read_text_file(args.m_values);
  return cli::suite_entries(text, args.file, &m_values, args.m_values);
}

GemmProblem OpCli<GemmOp>::suite_problem(const Entry& e, const ProblemFlags& flags) {
  if (flags.stride) GT_THROW("stride: applies to softmax suites only (GEMMs: --lda, --ldb, --ldd)");
  return build_problem(e.m, e.n, e.k, flags);
}

std::string OpCli<GemmOp>::label(const Entry& e) {
  std::string label = e.model.empty() && e.layer.empty() ? std::string() : e.model + "/" + e.layer + " ";
  if (!e.phase.empty()) label += e.phase + " ";
  return label + std::to_string(e.m) + "x" + std::to_string(e.n) + "x" + std::to_string(e.k);
}

// The problem's fields describe the built problem; without one (it failed to build) the flags
// as given, so that the row stays readable.
void OpCli<GemmOp>::head(Record& r, const Entry& e, const ProblemFlags& flags, const Problem* p) {
  r.add("op", GemmOp::name);
  r.add("model", e.model);
  r.add("layer", e.layer);
  r.add("m", e.m);
  r.add("n", e.n);
  r.add("k", e.k);
  r.add("dtype", p ? to_string(p->a.dtype) : flags.dtype);
  r.add("layout", p ? layout_letters(*p) : flags.layout);
  r.add("epilogue", p ? epilogue_str(*p) : "?");
}

void OpCli<GemmOp>::tail(Record& r, const Entry& e, const ProblemFlags& flags, const Problem* p) {
  r.add("phase", e.phase);
  r.add("out_dtype", p ? to_string(p->d.dtype) : flags.out_dtype);
  r.add("d_layout", p ? (p->d.layout == Layout::row ? "r" : "c") : flags.d_layout);
  r.add("scale", p ? to_string(p->scale) : flags.scale);
}

}  // namespace gemmtune::cli
