// "yes", or "no" with a reason shown to users (backends' available() and supports(), toolchains).
#pragma once

#include <string>

#include "gemmtune/error.hpp"

namespace gemmtune {

struct Verdict {
  bool ok = true;
  std::string reason;
  static Verdict yes() { return {true, {}}; }
  // A "no" must say why: an empty reason is a bug in the caller (as quack's Support.no).
  static Verdict no(std::string why) {
    GT_CHECK(!why.empty(), "Verdict::no needs a reason");
    return {false, std::move(why)};
  }
  explicit operator bool() const { return ok; }
};

}  // namespace gemmtune
