// The softmax side of the CLI: `gemmtune tune softmax ROWSxCOLS` and softmax suites (CSV with
// header rows,cols, e.g. bench/suites/softmax.csv), run by the one tune and suite command through
// OpCli<SoftmaxOp> (op_cli.hpp; defined in softmax_cli.cpp with the helpers below).
//
// Flags that apply: --dtype bf16|fp16|fp32 (x), --out-dtype (y; default --dtype), --scale S
// (the factor before the softmax; default 1), --stride N (elements between rows; 0 = packed),
// engine flags (--backends native,triton, --cache, --no-cache), --force, --json / --csv.
// GEMM-only flags (--layout, --lda, --alpha, --bias, --act, --tf32, ...) are usage errors.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gemmtune/softmax.hpp"
#include "options.hpp"

namespace gemmtune::cli {

// The softmax problem rows x cols with `flags`, validated. Throws Error naming the bad flag or
// field ("softmax: --bias does not apply", "scale: 'x' is not a number", softmax.* fields).
SoftmaxProblem build_softmax_problem(int64_t rows, int64_t cols, const ProblemFlags& flags);
SoftmaxProblem build_softmax_problem(const std::string& rows_cols, const ProblemFlags& flags);

// Whether `csv` (a suite file's text) has a header naming rows and cols (a softmax suite).
bool is_softmax_suite(const std::string& csv, const std::string& name);
// Its (rows, cols) entries; errors name the file and line.
std::vector<std::pair<int64_t, int64_t>> softmax_suite_entries(const std::string& csv, const std::string& name);

// TB/s of p at median_us: (bytes read + bytes written) / time (0 when the median is 0).
double softmax_tbps(const SoftmaxProblem& p, double median_us);

}  // namespace gemmtune::cli
