#include "core/paths.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "gemmtune/error.hpp"

namespace gemmtune {
namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

namespace {
std::string home_dir() {
  if (std::string home = env_or_empty("HOME"); !home.empty()) return home;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir) return found->pw_dir;
  return "";
}
}  // namespace

fs::path user_cache_path(const char* override_var, const char* leaf) {
  if (std::string p = env_or_empty(override_var); !p.empty()) return p;
  if (fs::path xdg = env_or_empty("XDG_CACHE_HOME"); xdg.is_absolute()) return xdg / "gemmtune" / leaf;
  const std::string home = home_dir();
  GT_CHECK(!home.empty(), std::string("none of ") + override_var + ", XDG_CACHE_HOME, HOME is set: no place for " + leaf);
  return fs::path(home) / ".cache" / "gemmtune" / leaf;
}

}  // namespace gemmtune
