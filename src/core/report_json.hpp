// The one JSON encoding of a candidate result (the C API's reports, the CLI's --json, the
// tuning cache's export).
#pragma once

#include <nlohmann/json.hpp>

#include "gemmtune/report.hpp"

namespace gemmtune {

// {"backend", "id", "name", "status", "reason", "rel_err" (null when not measured),
//  "median_us", "p20_us", "p80_us", "samples", "compile_s", "winner", "is_default"}.
// Callers add op-specific fields (the softmax "tbps", the GEMM CLI's "tflops") next to these.
nlohmann::json to_json(const CandidateResult& r);

}  // namespace gemmtune
