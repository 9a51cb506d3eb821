// What the tuning helper (src/engine/isolate.hpp) needs of the in-process tune path: candidates
// to keep out, and to be told which candidate's code is about to run, so that the caller knows
// whom to blame when the helper dies.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gemmtune/engine.hpp"
#include "gemmtune/report.hpp"
#include "gemmtune/tuning_cache.hpp"

namespace gemmtune::detail {

struct TuneHooks {
  // Kept out of this tune besides what the engine's cache quarantines; each shows in the report
  // with its status and "quarantined: <reason>".
  std::vector<Quarantined> exclude;
  // A stage that runs no candidate code begins: "candidates", "artifacts", "verify", "race",
  // "store" (the deadline of a candidate step no longer applies).
  std::function<void(const char* stage)> stage;
  // Candidate c's code is about to run in `step` ("prepare", "verify", "race"). With this hook
  // set, candidates are prepared one at a time, so that a crash in a prepare names its candidate.
  std::function<void(const CandidateResult& c, const char* step)> running;
  // Candidate c's step failed with `reason` (the tune goes on without it after the hook returns;
  // the helper checks its CUDA context first and ends itself when the failure was sticky).
  std::function<void(const CandidateResult& c, const std::string& reason)> failed;
  // Keep the winner loaded in the engine's memo for later selects (the helper does not: its
  // caller runs the winner, and a helper that kept every winner would grow with every problem).
  bool keep_winner = true;
};

// Engine's tune path with hooks, in this process whatever the engine's isolation mode (the
// helper's side of isolation). Returns the report; throws Error as Engine::tune does.
struct EngineAccess {
  static TuneReport tune_here(Engine& e, const GemmProblem& p, const TuneHooks& hooks);
  static TuneReport tune_here(Engine& e, const SoftmaxProblem& p, const TuneHooks& hooks);
  static TuneReport tune_here(Engine& e, const GroupedGemmProblem& p, const TuneHooks& hooks);

 private:
  template <class Op>
  static TuneReport tune_op(Engine& e, const typename Op::Problem& p, const TuneHooks& hooks);
};

}  // namespace gemmtune::detail
