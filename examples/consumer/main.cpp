// Tunes (or answers from the cache) one nn.Linear-shaped GEMM and runs it once.
#include <gemmtune/gemmtune.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  try {
    gemmtune::Engine engine;
    auto p = gemmtune::GemmProblem::linear(128, 4096, 4096);
    gemmtune::TuneReport report;
    gemmtune::Kernel kernel = engine.select(p, &report);
    std::printf("%s -> %s %s (%s)\n", p.str().c_str(), kernel.backend().c_str(), kernel.name().c_str(),
                report.from_cache ? "from cache" : "tuned now");
    return 0;
  } catch (const gemmtune::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argc ? argv[0] : "consumer", e.message().c_str());
    return 3;
  }
}
