// The grouped GEMM side of `tune` (op_cli.hpp): `gemmtune tune grouped GxNxK --rows-per-group M`.
#include <algorithm>
#include <cctype>
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
}  // namespace

GroupedGemmProblem build_grouped_problem(const std::string& g_n_k, const ProblemFlags& f) {
  auto refuse = [](const std::string& flag) { GT_THROW("grouped: " + flag + " does not apply"); };
  if (!f.b_dtype.empty()) refuse("--b-dtype (A and B share --dtype)");
  if (f.d_layout != "r") refuse("--d-layout (D is row-major)");
  if (f.lda || f.ldb || f.ldd) refuse("--lda/--ldb/--ldd (operands are packed)");
  if (f.beta != 0) refuse("--beta");
  if (f.tf32) refuse("--tf32");
  if (f.stride) refuse("--stride");
  int64_t groups = 0, n = 0, k = 0;
  parse_groups_n_k(g_n_k, groups, n, k, "shape");
  if (f.rows_per_group < 1)
    GT_THROW("rows-per-group: grouped needs --rows-per-group M >= 1 (the expected rows per group)");
  GroupedGemmProblem p = GroupedGemmProblem::make(groups, n, k, f.rows_per_group, parse_dtype(lower(f.dtype), "dtype"));
  // --layout: "rc" is the GEMM default (not given); a grouped layout otherwise.
  if (f.layout != "rc") p.layout = parse_grouped_layout(lower(f.layout), "layout");
  if (!f.out_dtype.empty()) p.d = parse_dtype(lower(f.out_dtype), "out-dtype");
  if (!f.scale.empty()) p.scale = parse_scale_mode(lower(f.scale), "scale");
  const std::string act = lower(f.act);
  p.act = parse_activation(act == "gelu" ? "gelu_tanh" : act, "act");
  p.bias = f.bias;
  p.alpha = float(f.alpha);
  if (f.skew) p.skew = *f.skew;
  p.validate();
  return p;
}

double OpCli<GroupedOp>::rate(const Problem& p, double median_us) {
  return median_us > 0 ? p.at_bucket().flops() / median_us * 1e-6 : 0;
}

GroupedGemmProblem OpCli<GroupedOp>::tune_problem(const TuneArgs& args) {
  if (args.shape2.empty()) GT_INVALID("shape: grouped needs GxNxK after it (e.g. tune grouped 8x14336x4096 --rows-per-group 512)");
  return build_grouped_problem(args.shape2, args.problem);
}

std::string OpCli<GroupedOp>::problem_text(const Problem& p) { return p.str(); }

nlohmann::json OpCli<GroupedOp>::problem_json(const Problem& p) {
  return {{"groups", p.groups},
          {"n", p.n},
          {"k", p.k},
          {"rows_per_group", p.rows_per_group},
          {"rows_bucket", p.rows_bucket()},
          {"layout", to_string(p.layout)},
          {"dtype", to_string(p.a)},
          {"out_dtype", to_string(p.d)},
          {"scale", to_string(p.scale)},
          {"act", to_string(p.act)},
          {"bias", p.bias},
          {"alpha", p.alpha},
          {"skew", p.skew},
          {"str", p.str()},
          {"canonical", p.canonical()},
          {"flops", p.at_bucket().flops()}};
}

OpCli<GroupedOp>::Roof OpCli<GroupedOp>::roof(Engine&, const Problem&, bool) { return {}; }

void OpCli<GroupedOp>::roof_json(nlohmann::json&, const Roof&) {}

void OpCli<GroupedOp>::print_summary(std::ostream& os, const Problem& p, const TuneReport&,
                                     const std::vector<CandidateResult>&, const Roof&) {
  os << "(* winner; timed at " << p.rows_bucket() << " rows per group (the key's bucket), "
     << (p.skew == 0 ? std::string("balanced split")
                     : "the mean of a balanced and a Zipf(" + fixed(p.skew, 2) + ") split")
     << "; verified on a ragged split with an empty group; TFLOP/s = 2 * rows * n * k / median)\n";
}

}  // namespace gemmtune::cli
