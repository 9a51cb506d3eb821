// The Python compile-worker toolchains: Triton and the CuTe DSL, one implementation. A pool of
// `python -m gemmtune.worker` processes (worker_pool.hpp, protocol in docs/compile-worker.md)
// compiles params (Job::params) into an artifact file; the key hashes the worker protocol, the
// compiler's version from the worker's ready line, the bytes of the Python sources that define
// the kernels, and the params.
//
//   triton:  key material "gemmtune-triton-artifact 1\nprotocol 1\ntriton <version>\ntarget cuda
//            sm_90a\nsources <sha256>\nparams <json>\n"; cubin + launch metadata; workers forked
//            from one warmed-up fork server (options.fork_server).
//   cutedsl: key material "gemmtune-cutedsl-artifact 1\nprotocol 1\ntoolchain <DSL toolchain
//            text>\nsources <sha256>\nparams <json>\n"; a kernel .so that needs one shared
//            runtime .so per toolchain (published beside it, named by its metadata).
#pragma once

#include <memory>

#include "compile/toolchain.hpp"
#include "core/log.hpp"
#include "gemmtune/engine_options.hpp"

namespace gemmtune::compile {

constexpr int kWorkerProtocol = 1;

std::unique_ptr<Toolchain> make_triton_toolchain(const CompileOptions& options, Log log);
std::unique_ptr<Toolchain> make_cutedsl_toolchain(const CompileOptions& options, Log log);

// The store key of the CuTe DSL runtime library named `soname`.
std::string cutedsl_runtime_key(const std::string& soname);

// The standard toolchains: cutlass (nvcc), triton, cutedsl.
std::vector<std::unique_ptr<Toolchain>> make_toolchains(const CompileOptions& options, Log log);

}  // namespace gemmtune::compile
