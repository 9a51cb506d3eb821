// The nvcc toolchain of the CUTLASS backend: a generated translation unit (Job::source) ->
// nvcc -> a shared object. Needs nvcc, CUTLASS's headers and our kernel headers
// (options.nvcc, cutlass_dir, cutlass_kernel_dir).
//
// Key material (unchanged since the first CUTLASS packs): the fingerprint JSON {format, nvcc's
// whole --version text, CUTLASS's version, SHA-256 of our kernel headers' bytes (sm90_gemm.cuh, sm90_grouped.cuh, gt_cutlass_abi.h), the flags},
// a newline, the source. The record for load-only machines is that fingerprint plus nvcc's
// short version. At most options.nvcc_jobs nvcc processes run at once.
//
// Groups: up to 8 misses compile in one nvcc run (one translation unit of several instances,
// whose template instantiations they share), then each member's .so is linked from that object
// (gt_cutlass_abi.h, "Several instances in one translation unit"); a single miss is a group of
// one. The key of each artifact is still its own source's.
#pragma once

#include <memory>

#include "compile/toolchain.hpp"
#include "gemmtune/engine_options.hpp"

namespace gemmtune::compile {

// The flags every instance is built with.
std::vector<std::string> nvcc_flags();

// The most instances one nvcc run may hold when `slots` runs go at once on a machine with
// `available_gb` of free memory: 1 to 8. cicc holds ~3.2 GB for one instance and ~0.45 GB more
// for each further one of the same family (6.3 GB for 8; 6.0 GB for 3 of different dtypes), so
// a run of g is counted 3.2 + 0.6 (g - 1) GB, and all runs together within 3/4 of the memory.
size_t nvcc_group_limit(double available_gb, size_t slots);

std::unique_ptr<Toolchain> make_nvcc_toolchain(const CompileOptions& options);

}  // namespace gemmtune::compile
