// libFuzzer harness: the JSON the C API reads (src/core/problem_json.cpp): GEMM problems, softmax
// problems and engine options. The first byte picks the parser, the rest is the text. Any input
// either parses (and a problem round-trips through its JSON to the same canonical problem) or
// raises gemmtune::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/problem_json.hpp"
#include "gemmtune/error.hpp"

using namespace gemmtune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const GemmProblem p = problem_from_json(text);
        if (problem_from_json(problem_to_json(p)).canonical() != p.canonical()) std::abort();
        break;
      }
      case 1: {
        const SoftmaxProblem p = softmax_problem_from_json(text);
        if (softmax_problem_from_json(softmax_problem_to_json(p)).canonical() != p.canonical()) std::abort();
        break;
      }
      default: (void)engine_options_from_json(text); break;
    }
  } catch (const Error&) {
  }
  return 0;
}
