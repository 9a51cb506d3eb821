// Loading and launching one compiled Triton kernel with the driver API, shared by the Triton GEMM
// (triton_backend.cpp), softmax (triton_softmax.cpp) and grouped (triton_grouped.cpp) backends: the
// launch metadata's checks, the module, the hidden scratch buffers, the launch itself; and the
// templates' digests their jobs are keyed with.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "backends/backend.hpp"
#include "store/artifact_store.hpp"
#include "backends/triton/configs.hpp"
#include "core/cuda.hpp"
#include "core/driver.hpp"

namespace gemmtune::triton {

// The integer `key` of launch metadata `m`, or `fallback` when absent or not an integer.
int64_t meta_int(const nlohmann::json& m, const char* key, int64_t fallback);

// A device buffer of at least `bytes`, `align`-aligned (cudaMalloc gives 256 bytes); ptr stays 0
// when bytes <= 0.
struct Scratch {
  DeviceBuffer buf;
  CUdeviceptr ptr = 0;
  void allocate(int64_t bytes, int64_t align);
};

// One loaded kernel: its module, function, grid, block and dynamic shared memory, and Triton's
// hidden global and profile scratch buffers (the metadata's per-program sizes times the grid).
struct LoadedKernel {
  driver::Module module;
  CUfunction fn = nullptr;  // null until loaded
  Grid grid;
  unsigned threads = 0, shared = 0;
  Scratch global_scratch, profile_scratch;

  // Enqueues the kernel with `args` (pointers to the runtime arguments, in order, at most 30)
  // followed by the two hidden scratch pointers.
  void launch(std::initializer_list<void*> args, cudaStream_t stream);
};

// Loads the cubin `a` (on the current device) for `grid`, after checking its launch metadata
// (meta "function", "launch": shared, num_warps, num_ctas, scratch sizes): Triton's
// parameter count (when reported) is `runtime_args` + the 2 hidden ones, no clusters, 1..32
// warps, at most `max_shared` bytes of shared memory (above 48 KiB the kernel opts in). Throws
// Error prefixed "<who>: " ("triton", "triton softmax").
LoadedKernel load_kernel(const Artifact& a, Grid grid, int64_t runtime_args, const std::string& who,
                         int64_t max_shared);

// The device's availability for Triton kernels: sm_90 (what they are compiled for) and, for a
// real device (index >= 0), a usable driver API.
Verdict device_verdict(const DeviceInfo& dev);

// A thread that never used the runtime has no current context: binds `device`'s primary one.
void ensure_context(int device);

// The kernel template `rel` (a path under the compile stage's python_dir) as its jobs key it.
// The Triton toolchain's sources hash covers triton_gemm.py, its compile step and the worker,
// not the softmax and grouped templates: those carry their own digest (16 hex digits of the
// file's SHA-256) in every job's params ("template"), so an edited template never loads an
// artifact compiled from its old text. `broken`: why it cannot be used (the file is unreadable).
struct Template {
  std::string digest, broken;
};
Template read_template(const BackendContext& ctx, const char* rel);

}  // namespace gemmtune::triton
