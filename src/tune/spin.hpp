// A GPU-side wait queued before each timed launch.
#pragma once

#include <cuda_runtime_api.h>

namespace gemmtune {

// Queues one single-thread kernel on `s` that busy-waits `us` microseconds of GPU time (read
// from %globaltimer, so it does not depend on the SM clock). While it runs, the host enqueues
// the timed launch and its events, so host launch overhead never lands between the events and
// the timed kernel starts right behind compute work, not behind the flush.
void gpu_spin(double us, cudaStream_t s);

}  // namespace gemmtune
