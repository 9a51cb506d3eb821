// libFuzzer harness: suite CSVs of `gemmtune suite` / `precompile` (tools/gemmtune/options.cpp,
// softmax_cli.cpp). The input is the shapes file, optionally followed by a NUL byte and an
// m-values file. Any input either gives entries that build valid problems or raises
// gemmtune::Error naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gemmtune/error.hpp"
#include "gemmtune/options.hpp"  // tools/gemmtune
#include "gemmtune/softmax_cli.hpp"  // tools/gemmtune

using namespace gemmtune;
using namespace gemmtune::cli;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string shapes = input.substr(0, nul);
  const std::string m_values = nul == std::string::npos ? "" : input.substr(nul + 1);
  const ProblemFlags flags;
  try {
    if (is_softmax_suite(shapes, "softmax.csv")) {
      for (const auto& [rows, cols] : softmax_suite_entries(shapes, "softmax.csv")) {
        try {
          (void)build_softmax_problem(rows, cols, flags);
        } catch (const Error&) {
        }
      }
      return 0;
    }
    const bool needs_m = suite_needs_m_values(shapes, "suite.csv");
    const auto entries = suite_entries(shapes, "suite.csv", needs_m ? &m_values : nullptr, "m_values.csv");
    for (const SuiteEntry& e : entries) {
      if (e.m <= 0 || e.n <= 0 || e.k <= 0) std::abort();  // the reader checks sizes
      try {
        (void)build_problem(e.m, e.n, e.k, flags);
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
