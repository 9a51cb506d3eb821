// GemmProblem: names, parsing, validation, printing and stable keys.
#include "gemmtune/problem.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

template <class E, size_t N>
E parse_enum(std::string_view text, std::string_view field, const std::pair<const char*, E> (&names)[N]) {
  std::string accepted;
  for (auto& [name, value] : names) {
    if (text == name) return value;
    accepted += accepted.empty() ? name : std::string(", ") + name;
  }
  GT_INVALID(std::string(field) + ": unknown value '" + std::string(text) + "' (accepted: " + accepted + ")");
}

constexpr std::pair<const char*, DType> kDTypes[] = {
    {"bf16", DType::bf16}, {"fp16", DType::fp16}, {"fp32", DType::fp32}, {"e4m3", DType::e4m3},
    {"e5m2", DType::e5m2}, {"bfloat16", DType::bf16}, {"float16", DType::fp16}, {"half", DType::fp16},
    {"float32", DType::fp32}, {"float", DType::fp32}, {"fp8", DType::e4m3}, {"fp8_e4m3", DType::e4m3},
    {"fp8_e5m2", DType::e5m2}};
constexpr std::pair<const char*, Layout> kLayouts[] = {
    {"row", Layout::row}, {"col", Layout::col}, {"r", Layout::row}, {"c", Layout::col}};
constexpr std::pair<const char*, Activation> kActs[] = {
    {"none", Activation::none}, {"relu", Activation::relu}, {"gelu_tanh", Activation::gelu_tanh},
    {"gelu", Activation::gelu_tanh}, {"silu", Activation::silu}};
constexpr std::pair<const char*, ScaleMode> kScales[] = {
    {"none", ScaleMode::none}, {"tensorwise", ScaleMode::tensorwise}, {"rowwise", ScaleMode::rowwise},
    {"block", ScaleMode::block}};

// Outer extent of a [rows, cols] matrix in its layout, and the minimum leading dimension.
int64_t outer(Layout l, int64_t rows, int64_t cols) { return l == Layout::row ? rows : cols; }
int64_t inner(Layout l, int64_t rows, int64_t cols) { return l == Layout::row ? cols : rows; }
int64_t resolve_ld(const MatrixDesc& d, int64_t rows, int64_t cols) {
  return d.ld ? d.ld : inner(d.layout, rows, cols);
}

bool is_half(DType t) { return t == DType::bf16 || t == DType::fp16; }

void check_ld(const char* name, const MatrixDesc& d, int64_t rows, int64_t cols) {
  int64_t need = inner(d.layout, rows, cols);
  if (d.ld < 0 || (d.ld != 0 && d.ld < need)) {
    GT_INVALID(std::string("problem.ld") + name + ": " + std::to_string(d.ld) + " is shorter than a " +
             (d.layout == Layout::row ? "row" : "column") + " of " + name + " (" + std::to_string(need) +
             " elements, " + to_string(d.layout) + "-major [" + std::to_string(rows) + ", " +
             std::to_string(cols) + "])");
  }
  // ld * outer must fit in int64 (and in bytes).
  int64_t ld = resolve_ld(d, rows, cols);
  if (ld > std::numeric_limits<int64_t>::max() / 16 / std::max<int64_t>(outer(d.layout, rows, cols), 1))
    GT_INVALID(std::string("problem.ld") + name + ": matrix " + name + " is too large to address");
}

}  // namespace

const char* to_string(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
  }
  return "?";
}
const char* to_string(Layout l) { return l == Layout::row ? "row" : "col"; }
const char* to_string(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::silu: return "silu";
  }
  return "?";
}
const char* to_string(ScaleMode s) {
  switch (s) {
    case ScaleMode::none: return "none";
    case ScaleMode::tensorwise: return "tensorwise";
    case ScaleMode::rowwise: return "rowwise";
    case ScaleMode::block: return "block";
  }
  return "?";
}

DType parse_dtype(std::string_view t, std::string_view f) { return parse_enum(t, f, kDTypes); }
Layout parse_layout(std::string_view t, std::string_view f) { return parse_enum(t, f, kLayouts); }
Activation parse_activation(std::string_view t, std::string_view f) { return parse_enum(t, f, kActs); }
ScaleMode parse_scale_mode(std::string_view t, std::string_view f) { return parse_enum(t, f, kScales); }

size_t size_of(DType t) {
  switch (t) {
    case DType::fp32: return 4;
    case DType::bf16:
    case DType::fp16: return 2;
    default: return 1;
  }
}
bool is_fp8(DType t) { return t == DType::e4m3 || t == DType::e5m2; }

GemmProblem GemmProblem::linear(int64_t m, int64_t n, int64_t k, DType in) {
  return linear(m, n, k, in, is_fp8(in) ? DType::bf16 : in);
}
GemmProblem GemmProblem::linear(int64_t m, int64_t n, int64_t k, DType in, DType out) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.a = {in, Layout::row, 0};
  p.b = {in, Layout::col, 0};
  p.c = {out, Layout::row, 0};
  p.d = {out, Layout::row, 0};
  if (is_fp8(in)) p.scale = ScaleMode::tensorwise;
  return p;
}

int64_t GemmProblem::lda() const { return resolve_ld(a, m, k); }
int64_t GemmProblem::ldb() const { return resolve_ld(b, k, n); }
int64_t GemmProblem::ldc() const { return resolve_ld(c, m, n); }
int64_t GemmProblem::ldd() const { return resolve_ld(d, m, n); }
int64_t GemmProblem::elems_a() const { return lda() * outer(a.layout, m, k); }
int64_t GemmProblem::elems_b() const { return ldb() * outer(b.layout, k, n); }
int64_t GemmProblem::elems_c() const { return uses_c() ? ldc() * outer(c.layout, m, n) : 0; }
int64_t GemmProblem::elems_d() const { return ldd() * outer(d.layout, m, n); }
int64_t GemmProblem::scale_a_elems() const {
  switch (scale) {
    case ScaleMode::none: return 0;
    case ScaleMode::tensorwise: return 1;
    case ScaleMode::rowwise: return m;
    case ScaleMode::block: return m * scale_k_blocks();
  }
  return 0;
}
int64_t GemmProblem::scale_b_elems() const {
  switch (scale) {
    case ScaleMode::none: return 0;
    case ScaleMode::tensorwise: return 1;
    case ScaleMode::rowwise: return n;
    case ScaleMode::block: return scale_n_blocks() * scale_b_ld();
  }
  return 0;
}
int64_t GemmProblem::scale_k_blocks() const { return (k + kScaleBlock - 1) / kScaleBlock; }
int64_t GemmProblem::scale_n_blocks() const { return (n + kScaleBlock - 1) / kScaleBlock; }
int64_t GemmProblem::scale_b_ld() const { return (scale_k_blocks() + 3) / 4 * 4; }

double GemmProblem::min_bytes() const {
  double bytes = double(m) * k * size_of(a.dtype) + double(k) * n * size_of(b.dtype) +
                 double(m) * n * size_of(d.dtype);
  if (uses_c()) bytes += double(m) * n * size_of(c.dtype);
  if (bias) bytes += double(n) * size_of(d.dtype);
  return bytes;
}

void GemmProblem::validate() const {
  if (m < 1) GT_INVALID("problem.m: must be >= 1 (got " + std::to_string(m) + ")");
  if (n < 1) GT_INVALID("problem.n: must be >= 1 (got " + std::to_string(n) + ")");
  if (k < 1) GT_INVALID("problem.k: must be >= 1 (got " + std::to_string(k) + ")");
  check_ld("a", a, m, k);
  check_ld("b", b, k, n);
  if (uses_c()) check_ld("c", c, m, n);
  check_ld("d", d, m, n);

  // Supported dtype pairings: A and B of one family; D by input family.
  const bool fp8_in = is_fp8(a.dtype) && is_fp8(b.dtype);
  if (!fp8_in && a.dtype != b.dtype)
    GT_INVALID(std::string("problem.b.dtype: ") + to_string(b.dtype) + " with A " + to_string(a.dtype) +
             " is not a supported pairing (A and B share a dtype, or are both fp8)");
  if (fp8_in && a.dtype == DType::e5m2 && b.dtype == DType::e5m2)
    GT_INVALID("problem.b.dtype: e5m2 x e5m2 is not supported (one operand must be e4m3)");
  bool out_ok = d.dtype == DType::fp32 || (fp8_in && is_half(d.dtype)) || (is_half(a.dtype) && d.dtype == a.dtype);
  if (!out_ok)
    GT_INVALID(std::string("problem.d.dtype: ") + to_string(d.dtype) + " output is not supported for " +
             to_string(a.dtype) + " inputs (use " + (fp8_in ? "bf16, fp16 or fp32" : a.dtype == DType::fp32 ? "fp32" : std::string(to_string(a.dtype)) + " or fp32") + ")");
  if (uses_c() && c.dtype != d.dtype)
    GT_INVALID(std::string("problem.c.dtype: C must have D's dtype (") + to_string(d.dtype) + "), got " + to_string(c.dtype));
  if (scale != ScaleMode::none && !fp8_in)
    GT_INVALID(std::string("problem.scale: ") + to_string(scale) + " scales apply to fp8 inputs only");
  if (tf32 && a.dtype != DType::fp32) GT_INVALID("problem.tf32: applies to fp32 inputs only");
  if (!std::isfinite(alpha)) GT_INVALID("problem.alpha: must be finite");
  if (!std::isfinite(beta)) GT_INVALID("problem.beta: must be finite");
}

std::string GemmProblem::str() const {
  std::ostringstream o;
  o << m << "x" << n << "x" << k << " " << to_string(a.dtype);
  if (b.dtype != a.dtype) o << "*" << to_string(b.dtype);
  o << " A:" << to_string(a.layout) << " B:" << to_string(b.layout) << " D:" << to_string(d.dtype) << "/"
    << to_string(d.layout);
  if (a.ld || b.ld || d.ld) o << " ld=" << lda() << "," << ldb() << "," << ldd();
  if (alpha != 1.0f) o << " alpha=" << alpha;
  if (uses_c()) o << " beta=" << beta;
  if (bias) o << " +bias";
  if (act != Activation::none) o << " " << to_string(act);
  if (scale != ScaleMode::none) o << " scale=" << to_string(scale);
  if (tf32) o << " tf32";
  return o.str();
}

std::string GemmProblem::canonical() const {
  // Bump the leading "gemm1" if the meaning of any field changes.
  std::ostringstream o;
  auto mat = [&](const char* name, const MatrixDesc& x, int64_t ld) {
    o << ";" << name << "=" << to_string(x.dtype) << "/" << to_string(x.layout) << "/" << ld;
  };
  o << "gemm1;m=" << m << ";n=" << n << ";k=" << k;
  mat("a", a, lda());
  mat("b", b, ldb());
  if (uses_c()) mat("c", c, ldc());
  mat("d", d, ldd());
  o << ";bias=" << bias << ";act=" << to_string(act) << ";scale=" << to_string(scale) << ";tf32=" << tf32;
  return o.str();
}

std::string GemmProblem::key() const { return stable_hash(canonical()); }

std::string stable_hash(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void parse_mnk(std::string_view text, int64_t& m, int64_t& n, int64_t& k, std::string_view field) {
  int64_t v[3];
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 3; ++i) {
    auto [next, ec] = std::from_chars(p, end, v[i]);
    bool sep_ok = i == 2 ? next == end : (next != end && (*next == 'x' || *next == 'X'));
    if (ec != std::errc() || !sep_ok)
      GT_INVALID(std::string(field) + ": '" + std::string(text) + "' is not MxNxK (e.g. 4096x4096x4096)");
    p = next + (i < 2 ? 1 : 0);
  }
  m = v[0], n = v[1], k = v[2];
}

}  // namespace gemmtune
