// to_json: the one JSON encoding of a candidate result (C API reports, CLI --json, cache export).
#include <gtest/gtest.h>

#include "core/report_json.hpp"
#include "gemmtune/report.hpp"

using namespace gemmtune;

namespace {

CandidateResult result(const std::string& backend, const std::string& id, CandidateStatus st, double median) {
  CandidateResult r;
  r.backend = backend;
  r.id = id;
  r.status = st;
  r.median_us = median;
  return r;
}

}  // namespace

TEST(CandidateJson, EveryFieldOneSpelling) {
  CandidateResult r = result("cutlass", "x1", CandidateStatus::wrong, 12.5);
  r.name = "128x128";
  r.reason = "rel_err 0.5 > 0.01";
  r.rel_err = 0.5;
  r.p20_us = 12, r.p80_us = 13, r.samples = 7, r.compile_s = 2.5, r.is_default = true;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"backend": "cutlass", "id": "x1", "name": "128x128", "status": "wrong",
      "reason": "rel_err 0.5 > 0.01", "rel_err": 0.5, "median_us": 12.5, "p20_us": 12, "p80_us": 13, "samples": 7,
      "compile_s": 2.5, "winner": false, "is_default": true})"))
      << j.dump();
}

TEST(CandidateJson, UnmeasuredRelErrIsNull) {
  CandidateResult r = result("triton", "y", CandidateStatus::failed, 0);
  ASSERT_LT(r.rel_err, 0);  // the struct's "not checked"
  EXPECT_TRUE(to_json(r)["rel_err"].is_null());
  r.rel_err = 0;  // checked and exact: a number
  EXPECT_EQ(to_json(r)["rel_err"], 0.0);
}
