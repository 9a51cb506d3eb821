// What the two CuTe DSL host tests (test_cutedsl_configs.cpp: GEMM, test_cutedsl_softmax.cpp:
// softmax) share around the compiler: its options for a compile test, and the counts of a
// precompile run. Header-only.
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "backends/cutedsl/compiler.hpp"

namespace gemmtune::host_test {

// A compiler that compiles (never load-only) into the artifact store at `store`, with
// `max_workers` compile workers.
inline cutedsl::CompilerOptions compile_options(const std::filesystem::path& store, int max_workers) {
  cutedsl::CompilerOptions o = cutedsl::CompilerOptions::defaults();
  o.artifacts = store;
  o.pool.max_workers = max_workers;
  o.load_only = false;
  return o;
}

// Counts of a CuTe DSL precompile run (cutedsl::precompile, cutedsl::precompile_softmax), fed
// each item as it finishes (Item: PrecompileItem or SoftmaxPrecompileItem); a failed item is
// printed as "FAILED <problem> <config id>: <error>".
struct PrecompileTally {
  int built = 0, hits = 0, failed = 0;
  double seconds = 0;         // compile time of the items built now, in all
  std::vector<double> times;  // and of each

  template <class Item>
  void add(const Item& it) {
    if (!it.error.empty()) {
      ++failed;
      std::printf("FAILED %s %s: %s\n", it.problem.c_str(), it.config.id().c_str(), it.error.c_str());
    } else if (it.store_hit) {
      ++hits;
    } else {
      ++built, seconds += it.seconds, times.push_back(it.seconds);
    }
  }
  // The median compile time of the items built now (0 when none was).
  double median() {
    std::sort(times.begin(), times.end());
    return times.empty() ? 0.0 : times[times.size() / 2];
  }
};

}  // namespace gemmtune::host_test
