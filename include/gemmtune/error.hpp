// gemmtune: the one exception type, and the check macros that raise it.
//
// Library code never exits the process: every failure becomes a gemmtune::Error that
// carries the file:line where it was raised and, for CUDA and cuBLASLt, the library's own
// message. Errors about user input name the offending field ("problem.k: must be >= 1").
//
// Each error carries a code, so that callers (the C API's GT_ERR_* statuses, the CLI's exit
// codes) tell bad input from a missing GPU from a failure without reading the message.
#pragma once

#include <stdexcept>
#include <string>

namespace gemmtune {

enum class ErrorCode {
  invalid,    // bad input: a problem, options, JSON, a file's contents (the message names the field)
  no_device,  // no usable CUDA device
  runtime,    // CUDA, a backend, no correct candidate: the input was fine, running it failed
  internal,   // a broken invariant of ours
};

// "invalid", "no_device", "runtime", "internal".
inline const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid: return "invalid";
    case ErrorCode::no_device: return "no_device";
    case ErrorCode::runtime: return "runtime";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line, ErrorCode code = ErrorCode::runtime)
      : std::runtime_error(std::string(message) + " [" + base_name(file) + ":" + std::to_string(line) + "]"),
        message_(std::move(message)),
        code_(code) {}

  ErrorCode code() const noexcept { return code_; }

  // The message without the source location (for user-facing errors and logs).
  const std::string& message() const noexcept { return message_; }

 private:
  static std::string base_name(const char* path) {
    std::string p(path);
    auto slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
  }
  std::string message_;
  ErrorCode code_;
};

}  // namespace gemmtune

// An Error with ErrorCode::runtime (GT_THROW, GT_CHECK) or with `code` (GT_THROW_CODE).
#define GT_THROW(msg) throw ::gemmtune::Error((msg), __FILE__, __LINE__)
#define GT_THROW_CODE(code, msg) throw ::gemmtune::Error((msg), __FILE__, __LINE__, ::gemmtune::ErrorCode::code)
#define GT_CHECK(cond, msg)      \
  do {                           \
    if (!(cond)) GT_THROW(msg);  \
  } while (0)
// Bad input (ErrorCode::invalid): problem and option validation, JSON parsing.
#define GT_INVALID(msg) GT_THROW_CODE(invalid, msg)
#define GT_CHECK_INVALID(cond, msg)  \
  do {                               \
    if (!(cond)) GT_INVALID(msg);    \
  } while (0)
