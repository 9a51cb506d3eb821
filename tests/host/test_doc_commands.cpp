// Every command the README and docs show runs as written: each `gemmtune` command line of a
// ```sh block in README.md and docs/*.md is classified in doc_commands.txt (beside this file),
// and the ones that need no GPU and no kernel store are run against the built CLI, their exit
// code and a key line of output checked. A doc edit that changes or adds a command without
// updating the list fails (the command is unlisted, or a listed one is gone); one that breaks a
// listed command fails when it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda.hpp"
#include "host/problems.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kSource = GEMMTUNE_TEST_SOURCE_DIR;

// What doc_commands.txt says to do with one command (its format is in its header).
struct Listed {
  std::string doc, command;
  enum Kind { run, nogpu, skip } kind = skip;
  int code = 0;      // run, nogpu: the expected exit code
  std::string text;  // run, nogpu: a substring of stdout + stderr; skip: the reason
  int line = 0;      // in doc_commands.txt
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Runs of blanks as one space, ends trimmed: a command as compared between doc and list.
std::string squeeze(const std::string& s) { return trim(std::regex_replace(s, std::regex("[ \t]+"), " ")); }

// A shell line without its trailing comment (a '#' after a blank, outside quotes).
std::string strip_comment(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) quote = c == quote ? 0 : quote;
    else if (c == '\'' || c == '"') quote = c;
    else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return line.substr(0, i);
  }
  return line;
}

// The index of the program word of `cmd` (after VAR=value assignments) if it is the gemmtune
// CLI (`gemmtune` or `build/gemmtune`), else npos.
size_t cli_word(const std::string& cmd) {
  static const std::regex re(R"(^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)(build/)?gemmtune(\s|$))");
  std::smatch m;
  return std::regex_search(cmd, m, re) ? size_t(m.length(1)) : std::string::npos;
}

// The gemmtune commands of the ```sh blocks of `doc` (relative to the source tree):
// backslash continuations joined, comments stripped, blanks squeezed.
std::vector<std::string> doc_commands(const std::string& doc) {
  std::ifstream in(kSource / doc);
  std::vector<std::string> out;
  bool in_sh = false;
  std::string pending;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      in_sh = !in_sh && trim(line) == "```sh";
      pending.clear();
      continue;
    }
    if (!in_sh) continue;
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    const std::string cmd = squeeze(strip_comment(pending + line));
    pending.clear();
    if (cli_word(cmd) != std::string::npos) out.push_back(cmd);
  }
  return out;
}

std::vector<std::string> docs() {
  std::vector<std::string> out{"README.md"};
  for (const auto& e : fs::directory_iterator(kSource / "docs"))
    if (e.path().extension() == ".md") out.push_back("docs/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Listed> read_list() {
  const fs::path path = kSource / "tests" / "host" / "doc_commands.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<Listed> out;
  std::string doc;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (trim(line).empty() || line[0] == '#') continue;
    const std::string where = path.filename().string() + ":" + std::to_string(n) + ": ";
    if (line.front() == '[' && line.back() == ']') {
      doc = line.substr(1, line.size() - 2);
    } else if (line.rfind("$ ", 0) == 0) {
      EXPECT_FALSE(doc.empty()) << where << "a command before any [doc]";
      out.push_back({doc, squeeze(line.substr(2)), Listed::skip, 0, "", n});
    } else if (line.rfind("= ", 0) == 0 && !out.empty() && out.back().line == n - 1) {
      Listed& l = out.back();
      std::istringstream words(line.substr(2));
      std::string kind;
      words >> kind;
      if (kind == "skip") {
        l.kind = Listed::skip;
      } else {
        l.kind = kind == "nogpu" ? Listed::nogpu : Listed::run;
        std::string code = kind;  // "= CODE TEXT"
        if (l.kind == Listed::nogpu) words >> code;  // "= nogpu CODE TEXT"
        if (code.empty() || code.find_first_not_of("0123456789") != std::string::npos) {
          ADD_FAILURE() << where << "'" << code << "' is not an exit code (nor skip, nogpu)";
          continue;
        }
        l.code = std::stoi(code);
      }
      std::getline(words, l.text);
      l.text = trim(l.text);
      EXPECT_FALSE(l.text.empty()) << where << "needs a key line (run, nogpu) or a reason (skip)";
    } else {
      ADD_FAILURE() << where << "not [doc], '$ command' or '= expectation' after its command: " << line;
    }
  }
  for (const Listed& l : out)
    EXPECT_FALSE(l.text.empty()) << path.filename().string() << ":" << l.line << ": no '= ...' line";
  return out;
}

}  // namespace

// The list and the docs name the same commands, each once.
TEST(DocCommands, EveryDocCommandIsListedAndEveryListedOneIsInItsDoc) {
  const std::vector<Listed> list = read_list();
  std::map<std::pair<std::string, std::string>, int> listed;
  for (const Listed& l : list) ++listed[{l.doc, l.command}];
  std::map<std::pair<std::string, std::string>, int> shown;
  for (const std::string& doc : docs())
    for (const std::string& cmd : doc_commands(doc)) ++shown[{doc, cmd}];
  ASSERT_FALSE(shown.empty()) << "no gemmtune command found in the docs' ```sh blocks under " << kSource;
  for (const auto& [key, count] : shown)
    EXPECT_EQ(listed[key], 1) << key.first << " shows `" << key.second
                              << "`: list it once in tests/host/doc_commands.txt under [" << key.first
                              << "] (run / nogpu / skip)";
  for (const Listed& l : list)
    EXPECT_EQ(shown.count({l.doc, l.command}), 1u)
        << "doc_commands.txt:" << l.line << ": " << l.doc << " no longer shows `" << l.command
        << "` in a ```sh block (fix the doc, or update the list)";
}

// The runnable commands run as written, all at once (`info` spends seconds starting compile
// workers), in a scratch directory holding the source tree's bench/ and tests/ (so relative paths
// resolve as from the repository root, and files a command writes land in the scratch directory)
// with the caches pointed into it.
TEST(DocCommands, RunAsWritten) {
  const bool gpu = gemmtune::cuda_device_present();
  gemmtune::host_test::TempDir dir("gemmtune_doc_");
  for (const char* sub : {"bench", "tests"}) fs::create_directory_symlink(kSource / sub, dir.root / sub);
  std::vector<Listed> runs;
  for (const Listed& l : read_list())
    if (l.kind == Listed::run || (l.kind == Listed::nogpu && !gpu)) runs.push_back(l);
  ASSERT_GT(runs.size(), gpu ? 0u : 5u) << "the list runs too few commands";

  std::vector<std::future<int>> codes;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string cmd = runs[i].command;
    const size_t at = cli_word(cmd);
    ASSERT_NE(at, std::string::npos) << cmd;
    const size_t len = cmd.compare(at, 6, "build/") == 0 ? 14 : 8;  // "build/gemmtune" or "gemmtune"
    cmd.replace(at, len, std::string("'") + GEMMTUNE_CLI + "'");
    const fs::path home = dir.root / ("run" + std::to_string(i));
    fs::create_directory(home);
    const std::string shell = "cd '" + dir.root.string() + "' && export GEMMTUNE_CACHE='" +
                              (home / "cache.sqlite").string() + "' XDG_CACHE_HOME='" + home.string() + "' && " +
                              cmd + " >'" + (home / "out.txt").string() + "' 2>&1 </dev/null";
    codes.push_back(std::async(std::launch::async, [shell] {
      const int status = std::system(shell.c_str());
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const Listed& l = runs[i];
    const int code = codes[i].get();
    const std::string output = gemmtune::slurp(dir.root / ("run" + std::to_string(i)) / "out.txt").value_or("");
    EXPECT_EQ(code, l.code) << l.doc << ": `" << l.command << "`\n" << output;
    EXPECT_TRUE(output.find(l.text) != std::string::npos)
        << l.doc << ": `" << l.command << "`: no '" << l.text << "' in its output:\n" << output;
  }
}
