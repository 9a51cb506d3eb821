// What the two CuTe DSL host tests (test_cutedsl_configs.cpp: GEMM, test_cutedsl_softmax.cpp:
// softmax) share around the compile stage: an artifact cache that compiles with the CuTe DSL
// toolchain into a test store. Header-only.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "compile/artifact_cache.hpp"
#include "compile/python_worker.hpp"
#include "core/settings.hpp"

namespace gemmtune::host_test {

// Compile options for a test: the artifact store at `store`, `workers` compile workers, the
// toolchains in `load_only` never compile.
inline CompileOptions compile_options(const std::filesystem::path& store, int workers,
                                      std::vector<std::string> load_only = {}) {
  CompileOptions o;
  o.artifacts = store;
  o.workers = workers;
  o.load_only = std::move(load_only);
  return resolve(o);
}

inline std::unique_ptr<compile::ArtifactCache> artifact_cache(const CompileOptions& o) {
  return std::make_unique<compile::ArtifactCache>(o, compile::make_toolchains(o, Log()), Log());
}

}  // namespace gemmtune::host_test
