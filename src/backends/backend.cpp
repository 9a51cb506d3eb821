// ToolchainLink (backend.hpp).
#include "backends/backend.hpp"

#include <filesystem>

#include "compile/artifact_cache.hpp"

namespace gemmtune {

Verdict ToolchainLink::available() const {
  const DeviceInfo& d = ctx.device;
  if (d.index >= 0 && !(d.cc_major == 9 && d.cc_minor == 0))
    return Verdict::no("kernels are built for sm_90a (Hopper); this device is " + d.name + " (cc " +
                       std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) + ")");
  if (!ctx.artifacts) return Verdict::no("no artifact cache (the backend was made outside an engine)");
  return ctx.artifacts->available(toolchain);
}

bool ToolchainLink::load_only() const { return ctx.artifacts && ctx.artifacts->load_only(toolchain); }
std::string ToolchainLink::version() const { return ctx.artifacts ? ctx.artifacts->version(toolchain) : ""; }
std::string ToolchainLink::sources_digest() const {
  return ctx.artifacts ? ctx.artifacts->sources_digest(toolchain) : "";
}

bool ToolchainLink::stored(const std::vector<compile::Job>& jobs) const {
  for (const compile::Job& j : jobs)
    if (!ctx.artifacts || !ctx.artifacts->has(j)) return false;
  return true;
}

}  // namespace gemmtune
