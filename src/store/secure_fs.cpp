// Private directories, bounded reads, HMAC-SHA256 and the machine key (secure_fs.hpp).
#include "store/secure_fs.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gemmtune/error.hpp"
#include "store/sha256.hpp"

namespace gemmtune::securefs {
namespace fs = std::filesystem;

namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += digits[p[i] >> 4], s += digits[p[i] & 15];
  return s;
}

}  // namespace

void make_private_dirs(const fs::path& dir) {
  if (dir.empty()) return;
  fs::path done;
  for (const fs::path& part : dir.lexically_normal()) {
    done /= part;
    if (part.empty() || done == done.root_path()) continue;
    if (mkdir(done.c_str(), 0700) == 0 || errno == EEXIST) continue;
    GT_THROW(errno_text("cannot create directory " + done.string()));
  }
  struct stat st;
  GT_CHECK(stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), dir.string() + " is not a directory");
}

std::string foreign_writable(const fs::path& dir) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return "";
  if (S_ISLNK(st.st_mode) && stat(dir.c_str(), &st) != 0) return "";  // a root may be a link to a dir
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != geteuid() && st.st_uid != 0) return "is owned by uid " + std::to_string(st.st_uid) + ", not by you";
  if (st.st_mode & S_IWOTH && !(st.st_mode & S_ISVTX)) return "is writable by every user";
  if (st.st_mode & S_IWOTH) return "is writable by every user (sticky, but others can add entries)";
  if (st.st_mode & S_IWGRP) return "is writable by its group";
  return "";
}

void require_private_dir(const fs::path& dir, const std::string& what) {
  const std::string why = foreign_writable(dir);
  GT_CHECK_INVALID(why.empty(), what + " " + dir.string() + " " + why +
                                    ": another user could plant files in it, so it is refused (make it yours "
                                    "and `chmod go-w` it, or use a directory of your own)");
}

Read read_regular(const fs::path& path, uint64_t max_bytes, std::optional<uint64_t> exact_size, bool follow_symlinks) {
  Read r;
  Fd f(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (follow_symlinks ? 0 : O_NOFOLLOW)));
  if (f.fd < 0) {
    if (errno == ENOENT) r.absent = true;
    else if (errno == ELOOP) r.problem = path.string() + " is a symbolic link";
    else r.problem = errno_text("cannot open " + path.string());
    return r;
  }
  struct stat st;
  if (fstat(f.fd, &st) != 0) {
    r.problem = errno_text("cannot stat " + path.string());
    return r;
  }
  if (!S_ISREG(st.st_mode)) {
    r.problem = path.string() + " is not a regular file";
    return r;
  }
  const uint64_t size = uint64_t(st.st_size);
  if (exact_size && size != *exact_size) {
    r.problem = path.string() + " has " + std::to_string(size) + " bytes, expected " + std::to_string(*exact_size);
    return r;
  }
  if (size > max_bytes) {
    r.problem = path.string() + " has " + std::to_string(size) + " bytes, more than the " +
                std::to_string(max_bytes) + " allowed";
    return r;
  }
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(f.fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  char extra;
  if (done != size || read(f.fd, &extra, 1) != 0) {  // shrank or grew while read
    r.problem = path.string() + " changed size while it was read";
    return r;
  }
  r.bytes = std::move(out);
  return r;
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  uint8_t k[64] = {};
  if (key.size() > 64) {
    Sha256 h;
    h.update(key);
    auto d = h.digest();
    std::memcpy(k, d.data(), d.size());
  } else {
    std::memcpy(k, key.data(), key.size());
  }
  uint8_t ipad[64], opad[64];
  for (int i = 0; i < 64; ++i) ipad[i] = k[i] ^ 0x36, opad[i] = k[i] ^ 0x5c;
  Sha256 inner;
  inner.update(ipad, 64);
  inner.update(message);
  auto inner_digest = inner.digest();
  Sha256 outer;
  outer.update(opad, 64);
  outer.update(inner_digest.data(), inner_digest.size());
  return outer.hex();
}

std::string load_or_create_key(const fs::path& path) {
  const std::string hint = " (the machine key that authenticates the artifact store; $GEMMTUNE_STORE_KEY moves it)";
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st;
    if (lstat(path.c_str(), &st) == 0) {
      GT_CHECK(S_ISREG(st.st_mode), "store key " + path.string() + " is not a regular file" + hint);
      GT_CHECK(st.st_uid == geteuid(), "store key " + path.string() + " is owned by uid " + std::to_string(st.st_uid) +
                                           ", not by you" + hint);
      char mode[8];
      std::snprintf(mode, sizeof mode, "%03o", unsigned(st.st_mode & 0777));
      GT_CHECK((st.st_mode & 077) == 0, "store key " + path.string() + " can be read or written by other users (mode " +
                                            mode + "): `chmod 600` it, or delete it to make a new one" + hint);
      Read r = read_regular(path, 4096);
      GT_CHECK(r.bytes, "cannot read store key " + r.problem + hint);
      std::string text = r.bytes->substr(0, r.bytes->find_first_of("\r\n"));
      GT_CHECK(text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos,
               "store key " + path.string() + " is not 64 lowercase hex digits" + hint);
      return text;
    }
    GT_CHECK(errno == ENOENT, errno_text("cannot stat store key " + path.string()) + hint);
    // Create: the random bytes in a private temporary, linked into place (first writer wins).
    make_private_dirs(path.parent_path());
    uint8_t raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
      ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
      if (n < 0 && errno == EINTR) continue;
      GT_CHECK(n > 0, errno_text("getrandom for the store key"));
      got += size_t(n);
    }
    const std::string text = to_hex(raw, sizeof raw) + "\n";
    fs::path tmp = path;
    tmp += ".tmp-" + std::to_string(getpid());
    unlink(tmp.c_str());
    {
      Fd f(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
      GT_CHECK(f.fd >= 0, errno_text("cannot create store key " + tmp.string()) + hint);
      bool ok = write(f.fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(f.fd) == 0;
      if (!ok) {
        std::string why = errno_text("cannot write store key " + tmp.string());
        unlink(tmp.c_str());
        GT_THROW(why + hint);
      }
    }
    const bool linked = link(tmp.c_str(), path.c_str()) == 0;
    const int link_errno = errno;
    unlink(tmp.c_str());
    if (!linked && link_errno != EEXIST) {
      errno = link_errno;
      GT_THROW(errno_text("cannot create store key " + path.string()) + hint);
    }
    // Linked, or another process won: read what is there now.
  }
  GT_THROW("store key " + path.string() + " vanished while it was created" + hint);
}

}  // namespace gemmtune::securefs
