// gemmtune: build the artifacts a set of problems would need, without a GPU.
//
//   gemmtune::PrecompileRequest req;
//   req.gemm = {gemmtune::GemmProblem::linear(4096, 4096, 4096)};
//   auto items = gemmtune::precompile(req, options, gemmtune::hopper_target(132));
//
// The same stage a tune runs first (candidates -> jobs -> the artifact cache's one build pool),
// for every backend and op, on a target described by `target` (no device needed). Copying the
// store (options.compile.artifacts) to a GPU machine makes a kernel pack.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gemmtune/device.hpp"
#include "gemmtune/engine_options.hpp"
#include "gemmtune/grouped.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {

struct PrecompileRequest {
  std::vector<GemmProblem> gemm;
  std::vector<SoftmaxProblem> softmax;
  std::vector<GroupedGemmProblem> grouped;
  // Candidate ids to build for every problem instead of each backend's ranked candidates (for
  // test sets whose configs are fixed); an id a backend cannot use for a problem is an item
  // with the reason.
  std::vector<std::string> candidates;
  // -1: every ranked candidate. N >= 1: only what a cold tune with compile budget N would build
  // (EngineOptions::compile_budget: per problem and backend, the cost model's best N of those not
  // already in the store), e.g. to measure a cold tune's compile time.
  int compile_budget = -1;
};

// Adds the problem of one line of a precompile .jsonl (as the C API takes problems): a grouped
// GEMM has "groups", a softmax problem "rows", a GEMM "m". Throws Error naming the bad field.
void add_problem_json(PrecompileRequest& request, const std::string& line);

struct PrecompileItem {
  std::string op, backend;  // "gemm" / "softmax" / "grouped", backend name
  std::string problem;      // the problem's str() (the first that needed the artifact)
  std::string candidate;    // candidate id; empty for a problem-level item
  std::string what;         // the artifact, for messages
  std::string key;          // artifact key; empty when nothing was to be built
  bool store_hit = false;
  double seconds = 0;       // compile wall time (0 on a store hit)
  double cpu_seconds = -1;  // its CPU seconds, user + system, the compiler's child processes included (-1: a hit, unknown)
  std::string error;        // empty when built or found
  bool skipped = false;     // the backend is unavailable or does not support the problem
};

// Builds (or finds in the store) every artifact of every candidate of every problem, distinct
// artifacts once. `progress` (may be empty) sees each item as it finishes, one at a time.
// Throws Error only for bad options; every build failure is an item's error.
std::vector<PrecompileItem> precompile(const PrecompileRequest& request, const EngineOptions& options,
                                       const DeviceInfo& target,
                                       const std::function<void(const PrecompileItem&)>& progress = {});

}  // namespace gemmtune
