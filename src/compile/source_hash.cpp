// The hash of a compile backend's Python sources (source_hash.hpp).
#include "compile/source_hash.hpp"

#include "store/sha256.hpp"

namespace gemmtune {

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
