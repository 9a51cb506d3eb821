// Environment variables and the per-user cache folder.
#pragma once

#include <filesystem>
#include <string>

namespace gemmtune {

// The variable's value, or "" when unset.
std::string env_or_empty(const char* name);

// Where a gemmtune cache file or folder `leaf` lives: $<override_var> if set, else
// $XDG_CACHE_HOME/gemmtune/<leaf> (a relative XDG_CACHE_HOME is ignored, as the XDG spec says),
// else $HOME (or the passwd entry's home)/.cache/gemmtune/<leaf>. Throws Error naming the
// variables when none applies.
std::filesystem::path user_cache_path(const char* override_var, const char* leaf);

}  // namespace gemmtune
