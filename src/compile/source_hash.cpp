// The hash of a compile backend's Python sources (source_hash.hpp).
#include "compile/source_hash.hpp"

#include <fstream>
#include <sstream>

#include "store/sha256.hpp"

namespace gemmtune {

std::optional<std::string> slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

SourcesHash hash_sources(const std::filesystem::path& dir, std::span<const char* const> sources,
                         const std::function<bool(std::string_view rel)>& required) {
  Sha256 h;
  for (const char* rel : sources) {
    auto bytes = slurp(dir / rel);
    if (!bytes && (!required || required(rel))) return {"", dir / rel};
    h.update(std::string(rel) + "\n" + (bytes ? std::to_string(bytes->size()) + "\n" + *bytes : "(absent)") + "\n");
  }
  return {h.hex(), std::nullopt};
}

}  // namespace gemmtune
