// Parsing JSON that comes from outside (C API problems and options, cache imports): the nesting
// depth is capped while parsing, so nothing later (dump, recursive walks) can run out of stack, and
// every parse failure, number overflow (1e400) included, is an Error(invalid).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "gemmtune/error.hpp"

namespace gemmtune {

// Deepest nesting of arrays and objects accepted (the top-level object counts as 1). Problems,
// options and cache exports need 4 at most.
inline constexpr int kMaxJsonDepth = 32;

// Parses text. Throws Error(invalid) "<what>: ..." for invalid JSON, a number out of range, or a
// value nested deeper than kMaxJsonDepth; the last two name the field ("<what>.device: ...").
inline nlohmann::json parse_json_input(const std::string& text, const std::string& what) {
  using json = nlohmann::json;
  // labels[i]: the key being read in the object at depth i+1 ("" before its first key, and in
  // arrays). The field named is what.key.key... (array levels left out).
  std::vector<std::string> labels;
  auto field = [&] {
    std::string s = what;
    for (const std::string& l : labels)
      if (!l.empty()) s += "." + (l.size() > 40 ? l.substr(0, 37) + "..." : l);
    return s;
  };
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        labels.resize(size_t(depth));
        if (depth >= kMaxJsonDepth)
          GT_INVALID(field() + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        labels.emplace_back();
        break;
      case json::parse_event_t::key:
        if (depth >= 1) labels[size_t(depth) - 1] = parsed.get<std::string>();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end: labels.resize(size_t(depth)); break;
      case json::parse_event_t::value: break;
    }
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::out_of_range& e) {
    GT_INVALID(field() + ": " + (e.id == 406 ? "number out of range" : std::string(e.what())));
  } catch (const json::exception& e) {
    std::string reason = e.what();  // quotes the offending token, which can be megabytes long
    if (reason.size() > 200) reason = reason.substr(0, 197) + "...";
    GT_INVALID(what + ": invalid JSON (" + reason + ")");
  }
}

}  // namespace gemmtune
