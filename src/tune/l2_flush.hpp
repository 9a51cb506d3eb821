// The L2 flush queued before each timed launch: the timed kernel finds none of its data in L2.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/cuda.hpp"

namespace gemmtune {

// Reads a buffer of twice the L2 that nothing writes after its first fill, so the L2 is left
// full of clean lines, as it is inside a model, where it holds the previous layer's weights.
// A flush by memset (what the race did before) leaves it full of dirty lines instead, whose
// write-back the timed kernel then pays, and it pays unevenly: a kernel that streams its
// weights with an L2 evict-first policy evicts its own lines first and leaves the dirty ones
// to the next kernel. Measured on an H100, the GEMMs of llama3 decoder layers at m = 1-64: after
// a memset every kernel took 6-32% longer than after a read; native (evict-first) kernels that
// were up to 15% faster than torch's call after a memset took up to 1.2x its time after a read,
// and inside CUDA-graph chains of the layer's GEMMs, where the L2 is clean, torch's call was the
// faster one too (bench/results/2026-12-05-h100-s25-l2-flush.txt).
class L2Flush {
 public:
  L2Flush() = default;
  // A buffer of 2 x l2_bytes (at least 2 MiB), zero-filled on `s`.
  L2Flush(int64_t l2_bytes, cudaStream_t s);
  // Queues the read of the whole buffer on `s`.
  void run(cudaStream_t s) const;

 private:
  DeviceBuffer buf_;
  DeviceBuffer sink_;  // written only if the buffer's XOR were a given value: keeps the reads
};

}  // namespace gemmtune
