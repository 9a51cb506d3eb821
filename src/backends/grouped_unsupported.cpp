// Grouped GEMM in the backend that has no grouped candidate: it says why, so that a tune
// report's notes list every backend (docs/grouped.md).
//
// cuBLASLt / cuBLAS (CUDA 13.0): cublasGemmGroupedBatchedEx takes every group's m in host arrays
// (m_array[], group_size[]), and cuBLASLt's pointer-array batch mode one m for the whole batch. A
// grouped problem's split lives on the GPU and changes every run: reading it back would
// synchronize the stream (and break CUDA graph capture), so neither API fits.
#include "backends/backend.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune {
namespace {

class UnsupportedGroupedBackend final : public GroupedBackend {
 public:
  UnsupportedGroupedBackend(std::string name, std::string reason) : name_(std::move(name)), reason_(std::move(reason)) {}

  std::string name() const override { return name_; }
  std::string version() const override { return name_ + " (no grouped kernels)"; }
  Verdict available() const override { return Verdict::yes(); }
  Verdict supports(const GroupedGemmProblem&) const override { return Verdict::no(reason_); }
  std::vector<std::unique_ptr<Cand>> candidates(const GroupedGemmProblem& p) override {
    GT_THROW(name_ + ": does not support " + p.str() + ": " + reason_);
  }
  std::unique_ptr<Cand> load(const GroupedGemmProblem& p, const std::string&) override {
    GT_THROW(name_ + ": does not support " + p.str() + ": " + reason_);
  }

 private:
  std::string name_, reason_;
};

}  // namespace

std::unique_ptr<GroupedBackend> make_cublaslt_grouped_backend(const BackendContext&) {
  return std::make_unique<UnsupportedGroupedBackend>(
      "cublaslt",
      "CUDA 13.0's grouped GEMM (cublasGemmGroupedBatchedEx) takes each group's rows in host arrays; the split of a "
      "grouped problem is on the GPU (reading it would synchronize the stream)");
}

}  // namespace gemmtune
