// The engine's log: one line per message, filtered by level (EngineOptions::log_level).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gemmtune/engine_options.hpp"

namespace gemmtune {

class Log {
 public:
  Log() = default;  // silent
  Log(std::function<void(const std::string&)> sink, LogLevel level)
      : sink_(sink ? std::make_shared<std::function<void(const std::string&)>>(std::move(sink)) : nullptr),
        level_(level) {}

  bool enabled(LogLevel l) const { return sink_ && l != LogLevel::quiet && int(l) <= int(level_); }
  void warn(const std::string& m) const { emit(LogLevel::warning, "warning: " + m); }
  void info(const std::string& m) const { emit(LogLevel::info, m); }
  void debug(const std::string& m) const { emit(LogLevel::debug, m); }
  void operator()(const std::string& m) const { info(m); }

  // Plain sinks for parts that take one (stores, worker pools): warnings (their text as given,
  // "warning: " added when missing) and info lines.
  std::function<void(const std::string&)> warnings() const {
    return [self = *this](const std::string& m) {
      self.emit(LogLevel::warning, m.rfind("warning", 0) == 0 ? m : "warning: " + m);
    };
  }
  std::function<void(const std::string&)> infos() const {
    return [self = *this](const std::string& m) { self.info(m); };
  }
  std::function<void(const std::string&)> debugs() const {
    return [self = *this](const std::string& m) { self.debug(m); };
  }

 private:
  void emit(LogLevel l, const std::string& line) const {
    if (enabled(l)) (*sink_)(line);
  }
  std::shared_ptr<std::function<void(const std::string&)>> sink_;
  LogLevel level_ = LogLevel::quiet;
};

}  // namespace gemmtune
