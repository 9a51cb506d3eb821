// Small helpers shared by the backends' config spaces (backends/*/configs.cpp): config-id
// parsing and the integer arithmetic of their pruning rules. Header-only.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "gemmtune/problem.hpp"

namespace gemmtune {

// ---- config-id parsing ------------------------------------------------------------------------

// Parses a decimal int at `pos` in `s`, advancing pos; false (pos unchanged) when there is none.
inline bool take_int(std::string_view s, size_t& pos, int& out) {
  auto [ptr, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), out);
  if (ec != std::errc() || ptr == s.data() + pos) return false;
  pos = size_t(ptr - s.data());
  return true;
}

// Consumes the character `c` at `pos` in `s`, advancing pos; false (pos unchanged) when another is there.
inline bool take_char(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

// ---- arithmetic and dtypes --------------------------------------------------------------------

// a / b rounded up, for a >= 0 and b > 0.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The least power of two >= x (1 for x <= 1).
inline int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

inline bool is_16bit(DType t) { return t == DType::bf16 || t == DType::fp16; }

}  // namespace gemmtune
