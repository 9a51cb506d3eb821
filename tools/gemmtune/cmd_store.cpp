// `gemmtune store trust [DIR]`: the explicit trust step for a kernel pack built on another
// machine (docs/kernel-packs.md). No GPU needed.
#include <iostream>

#include "commands.hpp"
#include "core/settings.hpp"
#include "gemmtune/error.hpp"
#include "store/artifact_store.hpp"

namespace gemmtune::cli {

int cmd_store(const StoreArgs& args) {
  GT_CHECK(args.action == "trust", "store: unknown action '" + args.action + "'");
  CompileOptions opt;
  opt.artifacts = args.dir;
  opt = resolve(std::move(opt));
  ArtifactStore store(opt.artifacts, log_stderr, 0, opt.store_key);
  const ArtifactStore::TrustCount n = store.trust();
  std::cout << "trusted " << n.trusted << " artifact" << (n.trusted == 1 ? "" : "s") << " of "
            << store.root().string() << " (" << n.already << " already trusted, " << n.set_aside
            << " corrupt set aside) with the key " << opt.store_key.string() << "\n";
  return n.set_aside ? kError : kOk;
}

}  // namespace gemmtune::cli
