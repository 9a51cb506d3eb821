// Files that hold code or choices (the artifact store, the tuning cache, the machine key): created
// private, read only when they are what they claim to be, and refused when another user can
// write them (as ssh refuses a key or an authorized_keys file that others can change).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gemmtune::securefs {

// Creates `dir` and every missing parent with mode 0700 (the umask can only take bits away).
// Components that exist are left as they are. Throws Error naming the path and errno's text.
void make_private_dirs(const std::filesystem::path& dir);

// Why another user could write `dir` (not owned by this user or root; group- or world-writable;
// not a directory), or "" when only this user (and root) can. A missing `dir` is "".
std::string foreign_writable(const std::filesystem::path& dir);

// Throws Error (ErrorCode::invalid) "<what> <dir> <why>; ..." when foreign_writable(dir) is not
// empty, with the fix (chmod go-w, or a directory of your own).
void require_private_dir(const std::filesystem::path& dir, const std::string& what);

// A bounded read of a regular file. `path`'s last component is not followed when it is a
// symlink, a FIFO or device never blocks or streams (O_NONBLOCK, then fstat must say regular
// file), and the size is checked before one byte is read.
struct Read {
  std::optional<std::string> bytes;  // the contents when read
  bool absent = false;               // ENOENT: a plain miss
  std::string problem;               // why not read, when the file exists (names the path)
};
// `max_bytes`: larger files are refused. `exact_size` (when given): any other size is refused.
// `follow_symlinks`: a link to a regular file is read (sources, not store entries).
Read read_regular(const std::filesystem::path& path, uint64_t max_bytes, std::optional<uint64_t> exact_size = {},
                  bool follow_symlinks = false);

// HMAC-SHA256 (RFC 2104) of `message` under `key`, as 64 lowercase hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

// This machine's store key: 32 random bytes kept, as 64 hex digits, in the 0600 file `path`
// (outside any store; created with its directory 0700 on first use, first writer wins). Throws
// Error naming the file when it cannot be created or read, or when it is not a regular file
// owned by this user that only this user can read (as ssh refuses a private key others can read).
std::string load_or_create_key(const std::filesystem::path& path);

}  // namespace gemmtune::securefs
