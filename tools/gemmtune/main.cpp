// gemmtune: the command-line tool. Everything lives in commands.hpp / options.hpp.
#include "commands.hpp"

int main(int argc, char** argv) { return gemmtune::cli::run_cli(argc, argv); }
