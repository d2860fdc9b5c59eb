#include "tests/support/paths.h"

namespace sluice::testing {

// SLUICE_SOURCE_DIR and SLUICE_BINARY_DIR are set for this file alone (tests/CMakeLists.txt).
const std::string& SourceDir() {
  static const std::string* const kDir = new std::string(SLUICE_SOURCE_DIR);
  return *kDir;
}

const std::string& BinaryDir() {
  static const std::string* const kDir = new std::string(SLUICE_BINARY_DIR);
  return *kDir;
}

}  // namespace sluice::testing
