// Where an installed copy finds its own files (src/core/settings.cpp, audit D20): relative to the
// binary, never through the build tree's absolute paths, never under a folder others may write.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/settings.hpp"

namespace fs = std::filesystem;
using gemmtune::installed_python_dir;
using gemmtune::runs_from_build_tree;
using gemmtune::writable_by_others;

namespace {

struct Tmp {
  fs::path root;
  Tmp() {
    std::string t = (fs::temp_directory_path() / "gt-layout-XXXXXX").string();
    root = fs::canonical(mkdtemp(t.data()));
    ::chmod(root.c_str(), 0755);
  }
  ~Tmp() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  // Creates <root>/rel/gemmtune/worker.py and returns <root>/rel.
  fs::path package(const fs::path& rel) const {
    fs::create_directories(root / rel / "gemmtune");
    std::ofstream(root / rel / "gemmtune" / "worker.py") << "# worker\n";
    return root / rel;
  }
};

}  // namespace

TEST(InstallLayout, CmakeInstallFromBinAndLib) {
  Tmp t;
  const fs::path py = t.package("prefix/share/gemmtune/python");
  fs::create_directories(t.root / "prefix" / "bin");
  fs::create_directories(t.root / "prefix" / "lib");
  EXPECT_EQ(installed_python_dir(t.root / "prefix" / "bin"), py);
  EXPECT_EQ(installed_python_dir(t.root / "prefix" / "lib"), py);
}

TEST(InstallLayout, WheelLibraryAndCli) {
  Tmp t;
  const fs::path site = t.package("site-packages");
  fs::create_directories(site / "gemmtune" / "_bin");
  EXPECT_EQ(installed_python_dir(site / "gemmtune"), site);            // gemmtune/libgemmtune_c.so
  EXPECT_EQ(installed_python_dir(site / "gemmtune" / "_bin"), site);   // gemmtune/_bin/gemmtune
}

TEST(InstallLayout, NothingInstalledIsEmpty) {
  Tmp t;
  fs::create_directories(t.root / "build");
  EXPECT_TRUE(installed_python_dir(t.root / "build").empty());
  EXPECT_TRUE(installed_python_dir({}).empty());
}

TEST(InstallLayout, FolderOthersMayWriteIsRefused) {
  Tmp t;
  const fs::path py = t.package("open/share/gemmtune/python");
  fs::create_directories(t.root / "open" / "bin");
  ASSERT_EQ(::chmod((t.root / "open").c_str(), 0777), 0);  // world-writable, no sticky bit
  EXPECT_TRUE(writable_by_others(py));
  EXPECT_TRUE(installed_python_dir(t.root / "open" / "bin").empty());
  ASSERT_EQ(::chmod((t.root / "open").c_str(), 01777), 0);  // sticky (as /tmp): others cannot replace it
  EXPECT_FALSE(writable_by_others(py));
  EXPECT_EQ(installed_python_dir(t.root / "open" / "bin"), py);
}

TEST(InstallLayout, BuildTreePathsOnlyFromInsideTheBuildTree) {
  Tmp t;
  fs::create_directories(t.root / "build" / "tests");
  fs::create_directories(t.root / "build2");
  EXPECT_TRUE(runs_from_build_tree(t.root / "build" / "gemmtune", t.root / "build"));
  EXPECT_TRUE(runs_from_build_tree(t.root / "build" / "tests" / "gemmtune_host_tests", t.root / "build"));
  EXPECT_FALSE(runs_from_build_tree(t.root / "build2" / "gemmtune", t.root / "build"));  // a sibling prefix
  EXPECT_FALSE(runs_from_build_tree("/usr/local/bin/gemmtune", t.root / "build"));
  EXPECT_FALSE(runs_from_build_tree(t.root / "build" / "gemmtune", t.root / "gone"));   // deleted build tree
  EXPECT_FALSE(runs_from_build_tree(t.root / "build" / "gemmtune", ""));                // relocatable build
}
