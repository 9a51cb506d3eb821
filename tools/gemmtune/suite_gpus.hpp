// `gemmtune suite --gpus`: a suite's problems spread over the GPUs of a host, one tuning process
// (a suite worker) per GPU, all writing the one tuning cache (docs/multi-gpu.md).
//
// A worker is `argv` run with CUDA_VISIBLE_DEVICES naming its GPU. It reads problem indices on
// stdin, one per line, and answers on stdout with JSON lines:
//   {"log": TEXT}                        an engine log line
//   {"i": N, "record": {...}, "cells": [...]}   one result row of problem N (JSON and CSV cells)
//   {"i": N, "done": SUMMARY}            problem N finished; its rows are complete
//   {"i": N, "error": MESSAGE}           problem N failed (its error row came before)
// It exits when stdin closes. Each GPU times only its own problems (timings are never compared
// across GPUs). A worker that dies (killed, crashed) loses only the problem it was on: its rows
// so far are dropped and the problem goes to another worker (at most kAttempts times in all),
// else it is reported lost; the other workers finish the rest.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gemmtune::cli {

struct GpuSuiteSink {
  std::function<void(const std::string& gpu, const std::string& line)> log;
  // Problem i finished on `gpu`: its rows, in the order the worker sent them, and its summary
  // (error: the worker's message; its rows then hold the error row).
  std::function<void(size_t i, const std::string& gpu, const std::vector<nlohmann::json>& rows,
                     const std::string& summary, bool error)>
      finished;
  // Problem i has no result: every worker that took it died, or none was left to take it.
  std::function<void(size_t i, const std::string& why)> lost;
};

// How many workers may die on one problem before it is reported lost.
inline constexpr int kAttempts = 2;

// "all" -> "0".."count-1"; "0,2" -> those; throws Error naming --gpus on anything else (an empty
// list, a repeated or negative index). `count`: the devices visible to this process (used for "all"
// and to check indices; < 0: unknown, indices not checked).
std::vector<std::string> parse_gpus(const std::string& text, int count);

// Runs problems 0..count-1 over one worker per entry of `gpus` (device indices as this process sees
// them; mapped through $CUDA_VISIBLE_DEVICES when it is set). Returns when every problem is
// finished or lost. Throws Error when no worker can be started.
void run_suite_on_gpus(const std::vector<std::string>& argv, const std::vector<std::string>& gpus, size_t count,
                       const GpuSuiteSink& sink);

// The worker's side of the protocol. Takes over this process's stdout at construction: from then
// on fd 1 is a copy of stderr, so that stray prints (compilers, Python workers) never reach the
// parent.
class SuiteWorkerChannel {
 public:
  SuiteWorkerChannel();
  ~SuiteWorkerChannel();
  SuiteWorkerChannel(const SuiteWorkerChannel&) = delete;
  SuiteWorkerChannel& operator=(const SuiteWorkerChannel&) = delete;
  // The next problem index from stdin; false at EOF. Throws Error on a line that is not an index
  // below `count`.
  bool next(size_t count, size_t& i);
  void send(const nlohmann::json& line);  // one line, flushed

 private:
  int fd_ = -1;
};

}  // namespace gemmtune::cli
