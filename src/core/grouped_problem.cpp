// GroupedGemmProblem: validation, printing, stable keys, "GxNxK" parsing and its JSON form.
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_input.hpp"
#include "core/problem_json.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/grouped.hpp"

namespace gemmtune {

namespace {
constexpr int64_t kMaxGroups = 1024;        // the Triton scheduler's vectors (docs/grouped.md)
constexpr int64_t kMaxDim = int64_t(1) << 30;
}  // namespace

const char* to_string(GroupedLayout l) { return l == GroupedLayout::masked ? "masked" : "contiguous"; }

GroupedLayout parse_grouped_layout(std::string_view text, std::string_view field) {
  if (text == "contiguous") return GroupedLayout::contiguous;
  if (text == "masked") return GroupedLayout::masked;
  GT_INVALID(std::string(field) + ": '" + std::string(text) + "' is not a layout (contiguous, masked)");
}

int64_t GroupedGemmProblem::rows_bucket() const {
  int64_t b = 1;
  while (b < rows_per_group) b *= 2;
  return b;
}

GroupedGemmProblem GroupedGemmProblem::at_bucket() const {
  GroupedGemmProblem p = *this;
  p.rows_per_group = rows_bucket();
  return p;
}

void GroupedGemmProblem::validate() const {
  auto range = [](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      GT_INVALID(std::string("grouped.") + field + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "] (got " + std::to_string(v) + ")");
  };
  range("groups", groups, 1, kMaxGroups);
  range("n", n, 1, kMaxDim);
  range("k", k, 1, kMaxDim);
  range("rows_per_group", rows_per_group, 1, kMaxDim);
  if (a != DType::bf16 && a != DType::fp16 && a != DType::e4m3)
    GT_INVALID(std::string("grouped.dtype: ") + to_string(a) + " is not supported (bf16, fp16 or e4m3)");
  if (d != DType::bf16 && d != DType::fp16 && d != DType::fp32)
    GT_INVALID(std::string("grouped.out_dtype: ") + to_string(d) + " is not supported (bf16, fp16 or fp32)");
  if (is_fp8(a) && scale == ScaleMode::none)
    GT_INVALID("grouped.scale: fp8 grouped GEMMs take tensorwise, rowwise or block scales (got none)");
  if (!is_fp8(a) && scale != ScaleMode::none)
    GT_INVALID(std::string("grouped.scale: ") + to_string(scale) + " scales apply to fp8 inputs only");
  if (!std::isfinite(alpha)) GT_INVALID("grouped.alpha: must be finite (got " + std::to_string(alpha) + ")");
  if (!std::isfinite(skew) || skew < 0 || skew > 8)
    GT_INVALID("grouped.skew: must be in [0, 8] (got " + std::to_string(skew) + ")");
  // One group's B, and G * bucket rows of A and D, must be addressable in 64-bit byte offsets
  // (every factor is at most 2^30: no overflow below).
  const double elems = double(groups) * double(std::max(rows_bucket(), n)) * double(std::max(n, k));
  if (elems * 4 > double(std::numeric_limits<int64_t>::max()))
    GT_INVALID("grouped.rows_per_group: " + std::to_string(groups) + " groups of " + std::to_string(rows_bucket()) +
               " rows are too large to address");
}

std::string GroupedGemmProblem::str() const {
  std::ostringstream o;
  o << "grouped " << groups << "x" << n << "x" << k << " rows/group~" << rows_per_group << " " << to_string(layout)
    << " " << to_string(a) << "->" << to_string(d);
  if (scale != ScaleMode::none) o << " " << to_string(scale);
  if (bias) o << " +bias";
  if (act != Activation::none) o << " " << to_string(act);
  if (alpha != 1.0f) o << " alpha=" << alpha;
  if (skew != 1.0) o << " skew=" << skew;
  return o.str();
}

std::string GroupedGemmProblem::canonical() const {
  std::ostringstream o;
  o << "grouped1;g=" << groups << ";n=" << n << ";k=" << k << ";rows=" << rows_bucket() << ";layout=" << to_string(layout)
    << ";a=" << to_string(a) << ";d=" << to_string(d) << ";scale=" << to_string(scale) << ";act=" << to_string(act)
    << ";bias=" << (bias ? 1 : 0);
  return o.str();
}

std::string GroupedGemmProblem::key() const { return stable_hash(canonical()); }

double GroupedGemmProblem::min_bytes() const {
  const double rows = double(groups) * double(rows_per_group);
  return rows * double(k) * size_of(a) + double(groups) * double(n) * double(k) * size_of(a) +
         rows * double(n) * size_of(d);
}

double GroupedGemmProblem::flops() const { return 2.0 * double(groups) * double(rows_per_group) * double(n) * double(k); }

void parse_groups_n_k(std::string_view text, int64_t& groups, int64_t& n, int64_t& k, std::string_view field) {
  int64_t v[3];
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 3; ++i) {
    auto [next, ec] = std::from_chars(p, end, v[i]);
    const bool sep_ok = i == 2 ? next == end : (next != end && (*next == 'x' || *next == 'X'));
    if (ec != std::errc() || next == p || !sep_ok)
      GT_INVALID(std::string(field) + ": '" + std::string(text) + "' is not GxNxK (e.g. 8x14336x4096)");
    p = next + (i < 2 ? 1 : 0);
  }
  groups = v[0], n = v[1], k = v[2];
}

// ---- JSON (core/problem_json.hpp) ---------------------------------------------------------------

GroupedGemmProblem grouped_problem_from_json(const std::string& text) {
  using nlohmann::json;
  json j = parse_json_input(text, "grouped");
  GT_CHECK_INVALID(j.is_object(), "grouped problem: expected a JSON object");
  static const char* kFields[] = {"groups", "n", "k", "rows_per_group", "layout", "dtype", "out_dtype",
                                  "scale", "act", "bias", "alpha", "skew"};
  for (auto& [key, v] : j.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || key == f;
    GT_CHECK_INVALID(known, "grouped problem: unknown field '" + key +
                                "' (groups, n, k, rows_per_group, layout, dtype, out_dtype, scale, act, bias, alpha, skew)");
  }
  auto integer = [&](const char* f) -> int64_t {
    GT_CHECK_INVALID(j.contains(f), std::string("grouped.") + f + ": missing");
    GT_CHECK_INVALID(j[f].is_number_integer(), std::string("grouped.") + f + ": expected an integer");
    GT_CHECK_INVALID(!j[f].is_number_unsigned() || j[f].get<uint64_t>() <= uint64_t(kMaxDim),
                     std::string("grouped.") + f + ": " + j[f].dump() + " is too large");
    return j[f].get<int64_t>();
  };
  auto string = [&](const char* f, const char* fallback) -> std::string {
    if (!j.contains(f)) return fallback;
    GT_CHECK_INVALID(j[f].is_string(), std::string("grouped.") + f + ": expected a string");
    return j[f].get<std::string>();
  };
  auto number = [&](const char* f, double fallback) -> double {
    if (!j.contains(f)) return fallback;
    GT_CHECK_INVALID(j[f].is_number(), std::string("grouped.") + f + ": expected a number");
    return j[f].get<double>();
  };
  GroupedGemmProblem p = GroupedGemmProblem::make(integer("groups"), integer("n"), integer("k"),
                                                  integer("rows_per_group"),
                                                  parse_dtype(string("dtype", "bf16"), "grouped.dtype"));
  p.layout = parse_grouped_layout(string("layout", "contiguous"), "grouped.layout");
  if (j.contains("out_dtype")) p.d = parse_dtype(string("out_dtype", ""), "grouped.out_dtype");
  if (j.contains("scale")) p.scale = parse_scale_mode(string("scale", ""), "grouped.scale");
  p.act = parse_activation(string("act", "none"), "grouped.act");
  if (j.contains("bias")) {
    GT_CHECK_INVALID(j["bias"].is_boolean(), "grouped.bias: expected true or false");
    p.bias = j["bias"].get<bool>();
  }
  p.alpha = float(number("alpha", 1.0));
  p.skew = number("skew", 1.0);
  p.validate();
  return p;
}

std::string grouped_problem_to_json(const GroupedGemmProblem& p) {
  nlohmann::json j{{"groups", p.groups}, {"n", p.n}, {"k", p.k}, {"rows_per_group", p.rows_per_group},
                   {"layout", to_string(p.layout)}, {"dtype", to_string(p.a)}, {"out_dtype", to_string(p.d)},
                   {"scale", to_string(p.scale)}, {"act", to_string(p.act)}, {"bias", p.bias},
                   {"alpha", p.alpha}, {"skew", p.skew}};
  return j.dump();
}

}  // namespace gemmtune
