// Crash isolation (docs/isolation.md): candidates are verified and timed in a tuning helper
// process per GPU, never in the caller's process.
//
// Why a process and this shape: a kernel that faults (illegal address, trap) leaves its CUDA
// context unusable for good, and one that hangs cannot be stopped from inside its process; only
// another process survives both. The helper is any executable whose main() hands
// `--gemmtune-tuner` to run_tuner() (the gemmtune CLI does; a test binary does, with its
// test-only backends registered first). It tunes with an ordinary in-process Engine, which
// writes every timing to the shared SQLite tuning cache as any tune does, and answers the
// report; the caller then loads and prepares only the winner.
//
// Protocol (kProtocol): one AF_UNIX stream socket, the helper's fd 3; newline-separated JSON
// objects each way.
//   helper -> caller, once at start: {"ev": "hello", "protocol", "version", "pid"}
//   caller -> helper: {"op": "gemm" | "softmax", "problem": {...}, "options": "<options JSON>",
//                      "key", "environment", "exclude": [{"backend", "id", "name", "status",
//                      "reason"}]}
//   helper -> caller, while tuning:
//     {"ev": "log", "line"}                 the helper engine's log line
//     {"ev": "stage", "stage"}              no candidate code runs now (no deadline)
//     {"ev": "run", "backend", "id", "name", "step"}   candidate code runs now: the caller's
//                                           watchdog allows it candidate_timeout_s without a
//                                           further message, then kills the helper
//     {"ev": "fault", "backend", "id", "name", "reason"}  that candidate broke the helper's
//                                           CUDA context; the helper exits next
//     {"ev": "done", "report": {"key", "spread", "notes", "results": [...]}}
//     {"ev": "error", "code", "message"}    the tune failed (gemmtune::Error's code)
// When the helper dies or is killed, the candidate of the last "run" is quarantined (in the
// tuning cache for its environment, for every problem), the helper restarted, and the request
// sent again with that candidate excluded; a death outside any candidate step is an Error.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "gemmtune/engine_options.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune::isolate {

constexpr int kProtocol = 1;
constexpr const char* kTunerArg = "--gemmtune-tuner";
constexpr int kTunerFd = 3;

// One tune, as the caller's engine hands it over.
struct Request {
  std::string op;            // GemmOp::name or SoftmaxOp::name
  std::string problem_json;  // problem_to_json / softmax_problem_to_json
  std::string key;           // the caller's cache key: the helper must compute the same
  std::string environment;   // the op's environment text
  std::string options_json;  // engine_options_to_json of the caller's resolved options
};

// Tunes `req` in the helper of opt.device (started, or restarted, as needed; one tune at a time
// per device in this process). Candidates that kill or hang the helper are added to `session`
// and, when `cache` is given, quarantined there. Returns the helper's report: results (the
// quarantined ones with "quarantined: <reason>"), notes, spread; the caller sets the problem.
// Throws Error when the helper cannot be found or started, dies outside any candidate step,
// or answers an error.
TuneReport tune_in_helper(const EngineOptions& opt, const Log& log, TuningCache* cache, const Request& req,
                          std::vector<Quarantined>& session);

// The helper executable: `configured` when set (it must be an executable file), else
// `gemmtune` in the folder of the file this library is in (libgemmtune_c.so, or the program the
// static library is linked into), or in ../bin from there, else in the install's bin folder,
// else on $PATH.
// Throws Error (runtime) naming where it looked.
std::filesystem::path find_tuner(const std::filesystem::path& configured);

// What a caller reports for a helper that ended: "killed by signal 11 (SIGSEGV)", "exited with
// status 3".
std::string describe_exit(int wait_status);

}  // namespace gemmtune::isolate

namespace gemmtune::detail {

// The helper's main loop: serves requests on `fd` (a socket, kTunerFd when started by
// tune_in_helper) until it closes or the parent process is gone; returns the exit status. A
// program's main() calls it when argv[1] is isolate::kTunerArg, after registering any extra
// backends (src/engine/registry.hpp) the caller may name.
int run_tuner(int fd = isolate::kTunerFd);

}  // namespace gemmtune::detail
