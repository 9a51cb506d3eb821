// Running one compiler process with a deadline (nvcc and its children).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace gemmtune::compile {

// Runs `argv` (argv[0] a path) with stdout and stderr to `log_file`, in its own process group,
// killed with the group after `timeout_s`. Returns the exit status (128 + signal when killed by
// one); `timed_out` tells a timeout apart. `cpu_s` (optional) gets the CPU seconds (user + system)
// of the process and of the children it waited for, once it exits. Throws Error when it cannot
// start.
int run_process(const std::vector<std::string>& argv, const std::filesystem::path& log_file, double timeout_s,
                bool* timed_out, double* cpu_s = nullptr);

}  // namespace gemmtune::compile
