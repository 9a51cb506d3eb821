// The few CUDA driver API functions gemmtune needs (loading cubins, launching them), resolved at
// run time through the runtime's cudaGetDriverEntryPointByVersion. The library never links
// libcuda, so host-only binaries start on machines without a driver; there, api() throws and
// available() says why.
//
//   const driver::Api& cu = driver::api();
//   driver::Module mod(cubin.data());                 // cuModuleLoadData, unloaded on destruction
//   CUfunction f = mod.function("gemm_tiled");
//   GT_CU(cu.launch(f, gx, gy, gz, bx, 1, 1, shared, stream, params, nullptr));
#pragma once

#include <cuda.h>

#include <string>
#include <utility>

#include "gemmtune/error.hpp"

// Throws gemmtune::Error with the driver's error name and text for a failed driver call.
#define GT_CU(expr)                                                                  \
  do {                                                                               \
    CUresult gt_cu_ = (expr);                                                        \
    if (gt_cu_ != CUDA_SUCCESS)                                                      \
      GT_THROW("CUDA driver error " + ::gemmtune::driver::result_text(gt_cu_) + " in " #expr); \
  } while (0)

namespace gemmtune::driver {

// Driver entry points, with the signatures of the CUDA 12.0 ABI.
struct Api {
  decltype(&::cuModuleLoadData) load_data = nullptr;
  decltype(&::cuModuleUnload) unload = nullptr;
  decltype(&::cuModuleGetFunction) get_function = nullptr;
  decltype(&::cuFuncSetAttribute) set_attribute = nullptr;
  decltype(&::cuFuncGetAttribute) get_attribute = nullptr;
  decltype(&::cuLaunchKernel) launch = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;
  decltype(&::cuCtxGetCurrent) current_context = nullptr;
};

// The resolved entry points (resolved once, thread-safe). Throws Error when the driver or one
// of the functions is missing.
const Api& api();
// True when api() would succeed; `why` gets the reason when not.
bool available(std::string* why = nullptr);

// "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)", or "CUresult 200" without a driver.
std::string result_text(CUresult r);

// One loaded module (cubin image) in the current context. Move-only.
class Module {
 public:
  Module() = default;
  explicit Module(const void* image);  // cuModuleLoadData; throws Error
  ~Module();
  Module(Module&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Module& operator=(Module&& o) noexcept {
    std::swap(m_, o.m_);
    return *this;
  }
  CUmodule get() const { return m_; }
  explicit operator bool() const { return m_ != nullptr; }
  // The kernel `name`; throws Error naming it when the module has no such function.
  CUfunction function(const std::string& name) const;

 private:
  CUmodule m_ = nullptr;
};

}  // namespace gemmtune::driver
