// Text from outside (files, imported caches, JSON) in messages and tables: control characters
// escaped, so that nothing reaches a terminal raw (an ESC sequence can retitle or recolour it),
// and long input capped, so that a 50 MB field is not echoed whole.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace gemmtune {

// Default cap of quoted input, in bytes.
inline constexpr size_t kMaxQuoted = 200;

// `s` with bytes below 0x20 and 0x7f written as \n, \r, \t or \xNN (a backslash stays as is),
// cut after `max` bytes of input with "...(N bytes)".
inline std::string printable(std::string_view s, size_t max = kMaxQuoted) {
  std::string out;
  const size_t n = s.size() < max ? s.size() : max;
  out.reserve(n + 16);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

// Whether `s` holds no control character (bytes below 0x20 and 0x7f), except those in `allowed`.
inline bool is_printable_text(std::string_view s, std::string_view allowed = {}) {
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 || c == 0x7f) && allowed.find(ch) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace gemmtune
