// SoftmaxProblem: validation, printing, stable keys and "ROWSxCOLS" parsing.
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "gemmtune/error.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {
namespace {

void check_dtype(const char* field, DType t) {
  if (t != DType::bf16 && t != DType::fp16 && t != DType::fp32)
    GT_INVALID(std::string("softmax.") + field + ": " + to_string(t) + " is not supported (use bf16, fp16 or fp32)");
}

}  // namespace

double SoftmaxProblem::min_bytes() const {
  return double(rows) * double(cols) * double(size_of(in) + size_of(out));
}

void SoftmaxProblem::validate() const {
  if (rows < 1) GT_INVALID("softmax.rows: must be >= 1 (got " + std::to_string(rows) + ")");
  if (cols < 1) GT_INVALID("softmax.cols: must be >= 1 (got " + std::to_string(cols) + ")");
  if (ld < 0 || (ld != 0 && ld < cols))
    GT_INVALID("softmax.ld: " + std::to_string(ld) + " is shorter than a row (cols = " + std::to_string(cols) +
             "; 0 means packed)");
  // rows * ld elements of up to 4 bytes must be addressable (int64 byte offsets).
  if (row_stride() > std::numeric_limits<int64_t>::max() / 4 / rows)
    GT_INVALID("softmax.ld: a " + std::to_string(rows) + " x " + std::to_string(row_stride()) +
             " tensor is too large to address");
  check_dtype("in", in);
  check_dtype("out", out);
  if (!std::isfinite(scale)) GT_INVALID("softmax.scale: must be finite (got " + std::to_string(scale) + ")");
}

std::string SoftmaxProblem::str() const {
  std::ostringstream o;
  o << rows << "x" << cols << " " << to_string(in) << "->" << to_string(out);
  if (ld) o << " ld=" << ld;
  if (scale != 1.0f) o << " scale=" << scale;
  return o.str();
}

std::string SoftmaxProblem::canonical() const {
  std::ostringstream o;
  o << "softmax1;rows=" << rows << ";cols=" << cols << ";ld=" << row_stride() << ";in=" << to_string(in)
    << ";out=" << to_string(out);
  return o.str();
}

std::string SoftmaxProblem::key() const { return stable_hash(canonical()); }

void parse_rows_cols(std::string_view text, int64_t& rows, int64_t& cols, std::string_view field) {
  int64_t v[2];
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 2; ++i) {
    auto [next, ec] = std::from_chars(p, end, v[i]);
    const bool sep_ok = i == 1 ? next == end : (next != end && (*next == 'x' || *next == 'X'));
    if (ec != std::errc() || next == p || !sep_ok)
      GT_INVALID(std::string(field) + ": '" + std::string(text) + "' is not ROWSxCOLS (e.g. 1000x4096)");
    p = next + (i == 0 ? 1 : 0);
  }
  rows = v[0], cols = v[1];
}

}  // namespace gemmtune
