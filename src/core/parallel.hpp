// A small work-sharing loop for host-side jobs that run as separate processes or wait on them
// (compiles, nvcc builds, artifact loads).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace gemmtune {

// Calls job(i) once for every i in [0, count), on min(threads, count) threads (the calling
// thread is one of them; threads < 1 counts as 1), each taking the next index in turn; returns
// when every job is done. `init` (optional) runs once on each of those threads before its first
// job (e.g. cudaSetDevice: new threads start on device 0). Neither may throw: callers record a
// job's failure on its item.
inline void parallel_for(size_t count, size_t threads, const std::function<void(size_t)>& job,
                         const std::function<void()>& init = {}) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    if (init) init();
    for (size_t i; (i = next++) < count;) job(i);
  };
  const size_t n = std::min(std::max<size_t>(threads, 1), std::max<size_t>(count, 1));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace gemmtune
