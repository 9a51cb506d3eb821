// Loading a backend's kernel library (a shared object from the artifact store) into the process.
#pragma once

#include <string>

namespace gemmtune {

// Loads a shared object from `bytes` that the caller has already checked against the artifact
// store's hash, never from a path another process could replace meanwhile: the bytes go to an
// anonymous memfd that is dlopen'd through /proc/self/fd (RTLD_NOW | RTLD_LOCAL). Libraries are
// never unloaded and the fd stays open for the life of the process: glibc treats a second
// dlopen of the same path as the same library, and a closed fd's number (so its path) would be
// reused by the next memfd. `who` (the backend's name) and `key` (the artifact key) name the
// library in errors. Throws Error.
void* dlopen_bytes(const std::string& who, const std::string& key, const std::string& bytes);

// The address of `name` in `handle`; Error naming the backend, the artifact and the symbol.
void* dlsym_or_throw(void* handle, const char* name, const std::string& who, const std::string& key);

template <class Fn>
Fn dlsym_as(void* handle, const char* name, const std::string& who, const std::string& key) {
  return reinterpret_cast<Fn>(dlsym_or_throw(handle, name, who, key));
}

}  // namespace gemmtune
