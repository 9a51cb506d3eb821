// The cutlass backend: one candidate per CUTLASS config (configs.hpp) for a problem; each is a
// generated instance of kernel/sm90_gemm.cuh (InstanceSpec::source), built by the nvcc toolchain
// (src/compile/nvcc.hpp) into a shared object, loaded with dlopen from its verified bytes, and
// run through its C entry points.
//
// What is exposed here beyond make_cutlass_backend (backend.hpp): the loader of one built .so
// and the compile job of an instance.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
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

// The compile job of an instance (toolchain "cutlass"): its config, its text (what the .so
// reports, ending " cfg=<id>") and its generated source; GEMM and grouped instances alike.
compile::Job instance_job(const Config& config, const std::string& text, std::string source);
// The compile job of `spec`'s instance.
compile::Job job(const InstanceSpec& spec);

}  // namespace gemmtune::cutlass_backend
