// `gemmtune report ARGS...`: the report lives in the Python package (python/gemmtune/report,
// docs/report.md); this command runs `<python> -m gemmtune.report ARGS...` in place of itself
// (exec: its exit code, stdout and stderr are the report's), with the interpreter and the package
// folder the compile workers use (compile.python, compile.python_dir: the checkout's .venv and
// python/ unless $GEMMTUNE_PYTHON / $GEMMTUNE_PYTHON_DIR say otherwise).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "commands.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"

namespace gemmtune::cli {

int cmd_report(const ReportArgs& args) {
  const CompileOptions o = resolve(CompileOptions{});
  if (o.python_dir.empty())
    GT_THROW("report: no Python package folder (set $GEMMTUNE_PYTHON_DIR to the checkout's python/)");
  const std::string inherited = inherited_pythonpath();
  const std::string path = o.python_dir.string() + (inherited.empty() ? "" : ":" + inherited);
  if (::setenv("PYTHONPATH", path.c_str(), 1) != 0) GT_THROW(std::string("report: setenv: ") + std::strerror(errno));

  // The command line as typed, for the page's "made by" line.
  std::string made_by = "gemmtune report";
  for (const std::string& a : args.args) made_by += " " + a;
  std::vector<std::string> argv{o.python, "-m", "gemmtune.report", "--made-by", made_by};
  argv.insert(argv.end(), args.args.begin(), args.args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());  // returns only on failure
  GT_THROW("report: cannot run " + o.python + " (" + std::strerror(errno) +
           "); run scripts/setup.sh or set $GEMMTUNE_PYTHON to a python with matplotlib");
}

}  // namespace gemmtune::cli
