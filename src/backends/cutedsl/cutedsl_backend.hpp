// The cutedsl backend: one candidate per CuTe DSL config (configs.hpp) for a problem; each is
// our Hopper GEMM (python/gemmtune/cutedsl/gemm_sm90.py) compiled ahead of time by a Python
// worker (toolchain "cutedsl", src/compile/python_worker.hpp) into a shared object that needs
// the toolchain's shared runtime library, loaded with dlopen from its verified bytes, and run
// through its C entry points (gt_cutedsl_abi.h).
//
// What is exposed beyond make_cutedsl_backend (backend.hpp): the loader of one .so and the
// compile job of a config.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cutedsl/configs.hpp"
#include "../../../python/gemmtune/cutedsl/gt_cutedsl_abi.h"

namespace gemmtune::cutedsl {

// The entry points of one loaded instance. Loaded from the artifact's verified bytes through a
// memfd (what runs is what was hashed); never unloaded (the .so carries its own CUDA runtime,
// whose teardown at dlclose would race the process's). One load per key per process.
struct Library {
  std::string key;
  gt_cutedsl_config_fn config = nullptr;
  gt_cutedsl_can_implement_fn can_implement = nullptr;
  gt_cutedsl_run_fn run = nullptr;
  gt_cutedsl_status_text_fn status_text = nullptr;

  // Loads `built`'s runtime (once per process: the kernel .so names it as DT_NEEDED by soname,
  // which the dynamic loader then finds among the loaded objects), then the kernel .so. Throws
  // Error when the bytes cannot be loaded, a symbol is missing, the ABI version differs, or the
  // instance's config text is not `expect_config`.
  static std::shared_ptr<const Library> open(const compile::Built& built, const std::string& expect_config);
};

// Loads `built.deps` (the shared runtime library its kernel .so names by soname) once per
// process; the GEMM and softmax loaders call it before loading a kernel. Thread-safe.
void load_runtime(const compile::Built& built);

// The compile job of config `c` for `p` (toolchain "cutedsl").
compile::Job job(const Config& c, const GemmProblem& p);

}  // namespace gemmtune::cutedsl
