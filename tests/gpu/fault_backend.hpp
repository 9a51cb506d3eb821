// Fault injection for the isolation tests (tests/gpu/test_isolation.cpp): GEMM backends that
// exist only in the GPU test binary, registered through the engine's extra-backend hook
// (src/engine/registry.hpp), never compiled into the library.
//
// Backend "fault_<kind>" offers two candidates for a plain bf16 nn.Linear problem (alpha 1,
// beta 0, no epilogue): first the faulty one (id <kind>), then "good", a correct naive kernel
// (one thread per output, fp32 accumulation). "fault_all" offers every faulty kind, then good.
// A test selects faults by naming backends in EngineOptions::backends.
//
// Kinds, and what each does when run (or prepared):
//   illegal_address  stores to address 0x10 (CUDA: an illegal memory access, sticky)
//   trap             __trap() (CUDA: unspecified launch failure, sticky)
//   hang             one thread loops forever (only the caller's watchdog ends it)
//   spin             correct, but one thread first spins ~20 ms: slow, never a fault
//   oob              correct, then writes one row past the end of D
//   wrong            every output 1.5x the product
//   prepare_crash    prepare() (its load step) aborts the process: a crashing compile/load step
#pragma once

#include <string>
#include <vector>

namespace gemmtune::gpu_test {

// Every faulty kind, in the order fault_all offers them.
const std::vector<std::string>& fault_kinds();

// Registers fault_<kind> for every kind, and fault_all. Call once in main() (before any engine
// and before run_tuner: the helper must know them too).
void register_fault_backends();

}  // namespace gemmtune::gpu_test
