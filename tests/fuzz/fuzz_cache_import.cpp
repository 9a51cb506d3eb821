// libFuzzer harness: `gemmtune cache import` (TuningCache::import_json, src/store/tuning_cache.cpp)
// into an in-memory SQLite cache. Any input is imported whole or raises gemmtune::Error with
// nothing written; what was imported exports, and the export imports into a fresh cache to the
// same export.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gemmtune/error.hpp"
#include "gemmtune/tuning_cache.hpp"

using namespace gemmtune;

namespace {
void quiet(const std::string&) {}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static TuningCache cache(":memory:", quiet);
  cache.clear();
  const std::string text(reinterpret_cast<const char*>(data), size);
  int imported = 0;
  try {
    imported = cache.import_json(text);
  } catch (const Error&) {
    if (!cache.list().empty()) std::abort();  // a failed import writes nothing
    return 0;
  }
  if (cache.list().size() > size_t(imported)) std::abort();
  const std::string exported = cache.export_json();
  TuningCache again(":memory:", quiet);
  again.import_json(exported);
  if (again.export_json() != exported) std::abort();
  for (const CachedChoice& c : cache.list()) {
    (void)cache.results(c.key);
    (void)cache.export_entry(c.key);
  }
  return 0;
}
