// to_json (report_json.hpp): the one JSON encoding of a candidate result.
#include "core/report_json.hpp"

namespace gemmtune {

nlohmann::json to_json(const CandidateResult& r) {
  return {{"backend", r.backend},
          {"id", r.id},
          {"name", r.name},
          {"status", to_string(r.status)},
          {"reason", r.reason},
          {"rel_err", r.rel_err < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.rel_err)},
          {"median_us", r.median_us},
          {"p20_us", r.p20_us},
          {"p80_us", r.p80_us},
          {"samples", r.samples},
          {"compile_s", r.compile_s},
          {"winner", r.winner},
          {"is_default", r.is_default}};
}

}  // namespace gemmtune
