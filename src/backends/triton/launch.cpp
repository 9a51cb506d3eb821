// Loading and launching one compiled Triton kernel (launch.hpp).
#include "backends/triton/launch.hpp"

#include <algorithm>
#include <array>

#include "compile/artifact_cache.hpp"
#include "compile/compile_util.hpp"
#include "gemmtune/error.hpp"
#include "store/sha256.hpp"

namespace gemmtune::triton {
using nlohmann::json;

namespace {
constexpr unsigned kDefaultSharedLimit = 48 * 1024;  // above this a kernel must opt in
constexpr size_t kMaxRuntimeArgs = 30;               // LoadedKernel::launch's own limit
}  // namespace

int64_t meta_int(const json& m, const char* key, int64_t fallback) {
  auto it = m.find(key);
  return it != m.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

void Scratch::allocate(int64_t bytes, int64_t align) {
  if (bytes <= 0) return;
  align = std::max<int64_t>(align, 1);
  buf = DeviceBuffer(size_t(bytes + align));
  auto base = reinterpret_cast<uintptr_t>(buf.get());
  ptr = CUdeviceptr((base + uintptr_t(align) - 1) / uintptr_t(align) * uintptr_t(align));
}

void LoadedKernel::launch(std::initializer_list<void*> args, cudaStream_t stream) {
  GT_CHECK(args.size() <= kMaxRuntimeArgs, "triton: a launch of more than 30 runtime arguments");
  std::array<void*, kMaxRuntimeArgs + 2> all{};
  std::copy(args.begin(), args.end(), all.begin());
  all[args.size()] = &global_scratch.ptr;
  all[args.size() + 1] = &profile_scratch.ptr;
  GT_CU(driver::api().launch(fn, grid.x, grid.y, grid.z, threads, 1, 1, shared, stream, all.data(), nullptr));
}

LoadedKernel load_kernel(const Artifact& artifact, Grid grid, int64_t runtime_args, const std::string& who,
                         int64_t max_shared) {
  const json& meta = artifact.meta;
  const bool ok = meta.contains("function") && meta["function"].is_string() && meta.contains("launch") &&
                  meta["launch"].is_object() && meta["launch"].contains("shared") && meta["launch"].contains("num_warps");
  GT_CHECK(ok, who + ": artifact " + artifact.key.substr(0, 16) + " lacks its launch metadata");
  const std::string function = meta["function"].get<std::string>();
  const json& m = meta["launch"];
  // Triton's count of kernel parameters (hidden ones included), when the worker reports it:
  // a mismatch would make the launch read garbage.
  int64_t params = meta_int(m, "num_params", runtime_args + 2);
  GT_CHECK(params == runtime_args + 2, who + ": " + function + " takes " + std::to_string(params) +
                                           " parameters; the launch ABI passes " + std::to_string(runtime_args + 2));
  int64_t ctas = meta_int(m, "num_ctas", 1), warps = meta_int(m, "num_warps", 0), shared = meta_int(m, "shared", -1);
  GT_CHECK(ctas == 1, who + ": " + function + " uses thread-block clusters (num_ctas " + std::to_string(ctas) +
                          "), which this backend does not launch");
  GT_CHECK(warps >= 1 && warps <= 32, who + ": " + function + ": bad num_warps " + std::to_string(warps));
  GT_CHECK(shared >= 0 && shared <= max_shared, who + ": " + function + " needs " + std::to_string(shared) +
                                                    " bytes of shared memory (at most " + std::to_string(max_shared) +
                                                    ")");
  LoadedKernel k;
  k.module = driver::Module(artifact.bytes->data());
  k.fn = k.module.function(function);
  k.grid = grid;
  k.threads = unsigned(warps * 32);
  k.shared = unsigned(shared);
  if (k.shared > kDefaultSharedLimit)
    GT_CU(driver::api().set_attribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(k.shared)));
  k.global_scratch.allocate(meta_int(m, "global_scratch_size", 0) * grid.programs(),
                            meta_int(m, "global_scratch_align", 1));
  k.profile_scratch.allocate(meta_int(m, "profile_scratch_size", 0) * grid.programs(),
                             meta_int(m, "profile_scratch_align", 1));
  return k;
}

Verdict device_verdict(const DeviceInfo& dev) {
  if (dev.cc_major != 9 || dev.cc_minor != 0)
    return Verdict::no("the Triton kernels are compiled for sm_90a; this device is sm_" +
                       std::to_string(dev.cc_major) + std::to_string(dev.cc_minor));
  std::string why;
  if (dev.index >= 0 && !driver::available(&why)) return Verdict::no(why);  // index -1: a target, nothing runs
  return Verdict::yes();
}

void ensure_context(int device) {
  CUcontext ctx = nullptr;
  if (driver::api().current_context(&ctx) != CUDA_SUCCESS || !ctx) GT_CUDA(cudaSetDevice(device));
}

Template read_template(const BackendContext& ctx, const char* rel) {
  const auto path = (ctx.artifacts ? ctx.artifacts->options().python_dir : std::filesystem::path()) / rel;
  auto text = slurp(path);
  if (!text) return {"", "Triton template not found at " + path.string() + " (set compile.python_dir / $GEMMTUNE_PYTHON_DIR)"};
  return {sha256_hex(*text).substr(0, 16), ""};
}

}  // namespace gemmtune::triton
