// The cutlass backend: one candidate per CUTLASS config (configs.hpp) for a problem; each is a
// generated instance of kernel/sm90_gemm.cuh, built by nvcc into a shared object (builder.hpp),
// loaded with dlopen from its verified bytes, and run through its C entry points.
//
// What is exposed here beyond make_cutlass_backend (backend.hpp): the loader of one built .so,
// and precompile(), which builds every candidate of a list of problems without a GPU.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutlass/builder.hpp"
#include "backends/cutlass/configs.hpp"
#include "backends/cutlass/kernel/gt_cutlass_abi.h"

namespace gemmtune::cutlass_backend {

// The entry points of one loaded instance. Loaded from the artifact's verified bytes (through a
// memfd, so what runs is exactly what was hashed); never unloaded (a loaded .so carries its own
// CUDA runtime, whose teardown at dlclose would race the process's). One load per key per
// process, shared by every candidate that uses it.
struct Library {
  std::string key;
  gt_cutlass_config_fn config = nullptr;
  gt_cutlass_can_implement_fn can_implement = nullptr;
  gt_cutlass_workspace_fn workspace = nullptr;
  gt_cutlass_run_fn run = nullptr;
  gt_cutlass_status_text_fn status_text = nullptr;

  // Throws Error when the bytes cannot be loaded, a symbol is missing, the ABI version differs,
  // or the instance's config text is not `expect_config`.
  static std::shared_ptr<const Library> open(const Artifact& artifact, const std::string& expect_config);
};

// max_configs from $GEMMTUNE_CUTLASS_MAX_CONFIGS, else 16.
int default_max_configs();

struct PrecompileItem {
  std::string problem;  // GemmProblem::str() of the first problem that needed it
  Config config;
  std::string instance; // InstanceSpec::text()
  std::string key;
  bool store_hit = false;
  double seconds = 0;   // nvcc wall time (0 on a hit)
  std::string error;    // empty when built
  bool skipped = false; // the backend does not support the problem (not a build failure)
};

// Builds (or finds in the store) every instance the candidates of `problems` need, distinct
// instances once, on up to builder's jobs threads. Problems this backend does not support are
// skipped, each with one item whose error says why. `only` non-empty: build exactly these configs
// for every problem instead of its ranked candidates (a config that cannot run a problem is an
// item with the reason as its error); used for test sets whose configs are fixed.
// `progress` (may be empty) gets each item as it finishes.
std::vector<PrecompileItem> precompile(Builder& builder, const std::vector<GemmProblem>& problems, int sm_count,
                                       int max_configs, int threads,
                                       const std::function<void(const PrecompileItem&)>& progress = {},
                                       const std::vector<Config>& only = {});

}  // namespace gemmtune::cutlass_backend
