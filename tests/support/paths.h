// Where the tests find the source tree (examples, case files) and the build's binaries. Kept out
// of every other file's compile flags, so that a clone in another folder compiles the tests to
// the same objects and a compiler cache serves them (scripts/ccache-env).
#pragma once

#include <string>

namespace sluice::testing {

// The source tree's root, e.g. "/work/main".
const std::string& SourceDir();
// The build directory (build/, build-asan/, ...), whose bin/ holds sluice and the tools.
const std::string& BinaryDir();

}  // namespace sluice::testing
