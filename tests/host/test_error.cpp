// gemmtune::Error's code: bad input is `invalid`, a missing GPU `no_device`, the rest `runtime`
// unless raised otherwise; the C API's statuses and the CLI's exit codes are read from it.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/cuda.hpp"
#include "core/device.hpp"
#include "core/problem_json.hpp"
#include "engine/registry.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"
#include "gemmtune/softmax.hpp"

namespace gemmtune {
namespace {

// The code of the Error `f` throws; fails the test when it throws none.
ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no gemmtune::Error thrown";
  return ErrorCode::internal;
}

TEST(ErrorCode, DefaultIsRuntime) {
  EXPECT_EQ(code_of([] { GT_THROW("x"); }), ErrorCode::runtime);
  EXPECT_EQ(code_of([] { GT_CHECK(false, "x"); }), ErrorCode::runtime);
  EXPECT_EQ(code_of([] { GT_INVALID("x"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { GT_CHECK_INVALID(1 == 2, "x"); }), ErrorCode::invalid);
  EXPECT_NO_THROW(GT_CHECK_INVALID(true, "x"));
}

TEST(ErrorCode, MessageKeepsTheFieldAndWhatTheLocation) {
  try {
    GT_INVALID("problem.k: must be >= 1");
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "problem.k: must be >= 1");
    EXPECT_NE(std::string(e.what()).find("test_error.cpp:"), std::string::npos) << e.what();
    EXPECT_STREQ(to_string(e.code()), "invalid");
  }
}

TEST(ErrorCode, ProblemValidationIsInvalid) {
  EXPECT_EQ(code_of([] { GemmProblem::linear(0, 16, 16).validate(); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { parse_dtype("bf17"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] {
              int64_t m, n, k;
              parse_mnk("4096x4096", m, n, k);
            }),
            ErrorCode::invalid);
  EXPECT_EQ(code_of([] {
              SoftmaxProblem p;
              p.rows = 0;
              p.cols = 16;
              p.validate();
            }),
            ErrorCode::invalid);
  EXPECT_EQ(code_of([] {
              int64_t r, c;
              parse_rows_cols("16", r, c);
            }),
            ErrorCode::invalid);
}

TEST(ErrorCode, JsonParsingIsInvalid) {
  EXPECT_EQ(code_of([] { problem_from_json("{not json"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { problem_from_json(R"({"m": 16, "n": 16})"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { problem_from_json(R"({"m": 16, "n": 16, "k": 16, "zz": 1})"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { softmax_problem_from_json("[1]"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { softmax_problem_from_json(R"({"rows": 4})"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { engine_options_from_json(R"({"max_configs": -1})"); }), ErrorCode::invalid);
  EXPECT_EQ(code_of([] { engine_options_from_json(R"({"compile": {"load_only": ["nvcc"]}})"); }), ErrorCode::invalid);
}

TEST(ErrorCode, UnknownBackendNameIsInvalid) {
  EXPECT_EQ(code_of([] { check_backend_names({"cublaslt", "cutlas"}); }), ErrorCode::invalid);
  EXPECT_NO_THROW(check_backend_names({"cublaslt", "native"}));
}

TEST(ErrorCode, NoDeviceIsNoDevice) {
  std::string why;
  if (cuda_device_present(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(code_of([] { query_device(0); }), ErrorCode::no_device);
}

}  // namespace
}  // namespace gemmtune
