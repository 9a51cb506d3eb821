// Running one compiler process with a deadline (process.hpp).
#include "compile/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "gemmtune/error.hpp"

extern char** environ;

namespace gemmtune::compile {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int run_process(const std::vector<std::string>& argv, const fs::path& log_file, double timeout_s, bool* timed_out,
                double* cpu_s) {
  if (timed_out) *timed_out = false;
  if (cpu_s) *cpu_s = 0;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&fa, 1, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // Its own process group, so that a timeout kills nvcc's children (cicc, ptxas) too.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawn(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) GT_THROW("cannot start " + argv[0] + ": " + std::strerror(err));

  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  struct rusage ru {};  // the process's, and its waited-for children's (nvcc's cicc, ptxas, ...)
  for (;;) {
    pid_t r = wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) {
      if (cpu_s)
        *cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
      break;
    }
    if (r < 0 && errno != EINTR) GT_THROW("waitpid failed for " + argv[0] + ": " + std::strerror(errno));
    if (Clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      if (timed_out) *timed_out = true;
      return 128 + SIGKILL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace gemmtune::compile
