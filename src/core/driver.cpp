// Driver entry points through the runtime (no link against libcuda).
#include "core/driver.hpp"

#include <cuda_runtime_api.h>

#include <mutex>

namespace gemmtune::driver {
namespace {

// The ABI version the signatures in Api are declared with (all exist since CUDA 11.8).
constexpr unsigned kAbiVersion = 12000;

// Fills api or reason; never throws.
struct Resolved {
  Api api;
  std::string reason;  // empty when every entry point resolved
};

template <class Fn>
bool resolve(const char* symbol, Fn& out, std::string& reason) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, kAbiVersion, cudaEnableDefault, &status);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky; start later runtime calls clean
    reason = std::string("CUDA driver not usable (") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) + ")";
    return false;
  }
  if (status != cudaDriverEntryPointSuccess || !fn) {
    reason = std::string("CUDA driver has no ") + symbol +
             (status == cudaDriverEntryPointVersionNotSufficent ? " (driver too old)" : "");
    return false;
  }
  out = reinterpret_cast<Fn>(fn);
  return true;
}

Resolved resolve_all() {
  Resolved r;
  Api& a = r.api;
  std::string& why = r.reason;
  bool ok = resolve("cuGetErrorName", a.error_name, why) && resolve("cuGetErrorString", a.error_string, why) &&
            resolve("cuModuleLoadData", a.load_data, why) && resolve("cuModuleUnload", a.unload, why) &&
            resolve("cuModuleGetFunction", a.get_function, why) &&
            resolve("cuFuncSetAttribute", a.set_attribute, why) &&
            resolve("cuFuncGetAttribute", a.get_attribute, why) && resolve("cuLaunchKernel", a.launch, why) &&
            resolve("cuCtxGetCurrent", a.current_context, why);
  if (ok) why.clear();
  return r;
}

const Resolved& resolved() {
  static const Resolved* r = new Resolved(resolve_all());  // never destroyed: modules may unload at exit
  return *r;
}

}  // namespace

const Api& api() {
  const Resolved& r = resolved();
  GT_CHECK(r.reason.empty(), r.reason);
  return r.api;
}

bool available(std::string* why) {
  const Resolved& r = resolved();
  if (why) *why = r.reason;
  return r.reason.empty();
}

std::string result_text(CUresult r) {
  const Resolved& d = resolved();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.api.error_name) d.api.error_name(r, &name);
  if (d.api.error_string) d.api.error_string(r, &text);
  std::string out = name ? name : "CUresult " + std::to_string(int(r));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

Module::Module(const void* image) { GT_CU(api().load_data(&m_, image)); }

Module::~Module() {
  // Errors here (e.g. the context is already gone at process exit) cannot be acted upon.
  if (m_) api().unload(m_);
}

CUfunction Module::function(const std::string& name) const {
  CUfunction f = nullptr;
  CUresult r = api().get_function(&f, m_, name.c_str());
  if (r != CUDA_SUCCESS) GT_THROW("kernel '" + name + "' not found in the loaded module: " + result_text(r));
  return f;
}

}  // namespace gemmtune::driver
