#include "store/shared_object.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gemmtune/error.hpp"

namespace gemmtune {

void* dlopen_bytes(const std::string& who, const std::string& key, const std::string& bytes) {
  const std::string tag = key.substr(0, 16);
  int fd = memfd_create(("gt-" + who + "-" + tag).c_str(), MFD_CLOEXEC);
  if (fd < 0) GT_THROW(who + ": memfd_create failed: " + std::string(std::strerror(errno)));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      GT_THROW(who + ": writing the shared object to a memfd failed: " + std::string(std::strerror(errno)));
    }
    off += size_t(w);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = dlerror();
    ::close(fd);
    GT_THROW(who + ": dlopen of artifact " + tag + " failed: " + (err ? err : "unknown"));
  }
  return h;
}

void* dlsym_or_throw(void* handle, const char* name, const std::string& who, const std::string& key) {
  void* s = dlsym(handle, name);
  if (!s) GT_THROW(who + ": artifact " + key.substr(0, 16) + " has no symbol " + name);
  return s;
}

}  // namespace gemmtune
