// gemmtune: the command-line tool. Everything lives in commands.hpp / options.hpp.
//
// `gemmtune --gemmtune-tuner` (not listed in --help) is the tuning helper process that an
// engine in isolation mode `process` starts (src/engine/isolate.hpp); fd 3 is its socket.
#include <cstring>

#include "commands.hpp"
#include "engine/isolate.hpp"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], gemmtune::isolate::kTunerArg) == 0) return gemmtune::detail::run_tuner();
  return gemmtune::cli::run_cli(argc, argv);
}
