// The hash of a compile backend's Python sources, part of its artifact keys (cutedsl and triton
// compilers' available()).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "compile/compile_util.hpp"  // slurp

namespace gemmtune {

struct SourcesHash {
  std::string hex;                             // SHA-256, 64 lowercase hex digits ("" when missing is set)
  std::optional<std::filesystem::path> missing;  // the first required source that cannot be read
};

// SHA-256 over `sources` (paths relative to `dir`) in order, each as "<rel>\n<size>\n<bytes>\n",
// or "<rel>\n(absent)\n" when it cannot be read and `required(rel)` is false. Stops at the first
// unreadable source that `required` (default: every one) names, returning its path in `missing`.
SourcesHash hash_sources(const std::filesystem::path& dir, std::span<const char* const> sources,
                         const std::function<bool(std::string_view rel)>& required = {});

}  // namespace gemmtune
