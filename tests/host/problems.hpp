// Host test support shared by several tests/host/*.cpp: the sample GEMM problems of the config
// tests (test_cutedsl_configs.cpp, test_cutlass_configs.cpp), the validation-message helper of
// the problem tests (test_problem.cpp, test_softmax_problem.cpp), the Error message of a call,
// a temporary directory (the CuTe DSL compile tests' artifact stores, the CLI tests) and the
// built CLI run as a user would (test_cli.cpp, test_softmax_host.cpp). Header-only.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "compile/compile_util.hpp"  // slurp
#include "gemmtune/error.hpp"
#include "gemmtune/problem.hpp"

namespace gemmtune::host_test {

// GEMM problems across shapes (square, decode, long K, small, odd), input dtypes, an epilogue,
// rowwise fp8 scales and non-default layouts; some of them a given backend refuses.
inline std::vector<GemmProblem> sample_problems() {
  std::vector<GemmProblem> ps;
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{4096, 4096, 4096}, {1, 4096, 4096}, {16, 10240, 8192},
                                                             {64, 28672, 8192}, {128, 128, 128}, {8192, 28672, 8192},
                                                             {2048, 1024, 65536}, {300, 7000, 528}, {8, 64, 64}})
    for (DType t : {DType::bf16, DType::fp16, DType::e4m3}) ps.push_back(GemmProblem::linear(m, n, k, t));
  GemmProblem epi = GemmProblem::linear(512, 4096, 1024);
  epi.bias = true, epi.act = Activation::gelu_tanh, epi.beta = 1.0f;
  ps.push_back(epi);
  GemmProblem rowwise = GemmProblem::linear(256, 8192, 4096, DType::e4m3);
  rowwise.scale = ScaleMode::rowwise;
  ps.push_back(rowwise);
  GemmProblem nn = GemmProblem::linear(1024, 1024, 1024);
  nn.a.layout = Layout::col, nn.b.layout = Layout::row, nn.d.layout = Layout::col;
  ps.push_back(nn);
  return ps;
}

// The message of the Error p.validate() throws, or "" if valid (GemmProblem, SoftmaxProblem).
template <class Problem>
std::string why(const Problem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

// The Error message of f(), or "(no error)".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

// A fresh directory /tmp/<prefix>XXXXXX, removed with everything in it at destruction.
class TempDir {
 public:
  explicit TempDir(std::string prefix) {
    std::string tmpl = "/tmp/" + prefix + "XXXXXX";
    GT_CHECK(mkdtemp(tmpl.data()), "mkdtemp");
    root = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path root;
};

// The whole text of the file at `p` ("" when it cannot be read).
struct Exec {
  int code = -1;  // the exit code; -1 when the CLI did not exit normally
  std::string out, err;
};

// Runs the built CLI (GEMMTUNE_CLI, the host test target's definition) with `args` (shell
// words), stdin empty, stdout and stderr kept in `dir`, and its default cache and store key
// pointed into `dir` so that no test touches the user's cache or key.
inline Exec run_cli(const std::filesystem::path& dir, const std::string& args) {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = "GEMMTUNE_CACHE='" + (dir / "default.sqlite").string() + "' GEMMTUNE_STORE_KEY='" +
                          (dir / "store.key").string() + "' '" + GEMMTUNE_CLI + "' " + args +
                          " >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out).value_or(""), slurp(err).value_or("")};
}

}  // namespace gemmtune::host_test
