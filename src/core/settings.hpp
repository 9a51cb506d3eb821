// The one reader of the GEMMTUNE_* environment (include/gemmtune/engine_options.hpp lists the
// variables): fills what the options leave at their defaults. Nothing else in the library calls
// getenv.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gemmtune/engine_options.hpp"

namespace gemmtune {

// `o` with every field left at its default taken from the environment, then from the built-in
// default (paths made concrete, counts positive). Throws Error (ErrorCode::invalid) naming the
// variable or field when one holds a value that is not a number / not a level / out of range.
EngineOptions resolve(EngineOptions o);
CompileOptions resolve(CompileOptions o);

// $<override_var> if set, else $XDG_CACHE_HOME/gemmtune/<leaf> (a relative XDG_CACHE_HOME is
// ignored, as the XDG spec says), else $HOME (or the passwd entry's home)/.cache/gemmtune/<leaf>.
// Throws Error naming the variables when none applies.
std::filesystem::path user_cache_path(const char* override_var, const char* leaf);

// $GEMMTUNE_STORE_KEY, else $XDG_CONFIG_HOME/gemmtune/store.key (absolute only), else
// $HOME/.config/gemmtune/store.key: the machine key of the artifact store (outside any store).
std::filesystem::path store_key_path();

// The environment a child process (a compile worker) inherits plus nothing: PYTHONPATH as set.
std::string inherited_pythonpath();

// The folders of $PATH, in order (where the tuning helper is looked for last).
std::vector<std::filesystem::path> executable_path();
// An installed copy's Python package folder (holding gemmtune/worker.py), relative to the folder
// of the binary: <binary_dir>/../share/gemmtune/python (cmake --install), <binary_dir>/.. (a
// wheel's gemmtune/libgemmtune_c.so), <binary_dir>/../.. (a wheel's gemmtune/_bin/gemmtune); a
// folder that others may write to (a world-writable parent without the sticky bit) is never
// taken. Empty when none holds it. The default of CompileOptions::python_dir, before the
// source tree's (used only by binaries that run from their build tree: runs_from_build_tree).
std::filesystem::path installed_python_dir(const std::filesystem::path& binary_dir);
bool runs_from_build_tree(const std::filesystem::path& binary, const std::filesystem::path& build_dir);
bool writable_by_others(const std::filesystem::path& path);

// Whether tools should show an Error's source location ($GEMMTUNE_DEBUG set and not "0").
bool debug_locations();

}  // namespace gemmtune
