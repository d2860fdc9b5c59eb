#include "server/key/reset_log_key.h"

#include <string>

#include "gtest/gtest.h"
#include "server/common/std_view.h"
#include "server/key/storage_key.h"
#include "server/redis/cluster/hash_slot.h"

namespace sluice {
namespace {

// Verifies the reset log is one key in one hash tag (one slot on a cluster), under the prefix,
// and no storage key's tag can be its tag: a storage key's tag holds '|' after the domain.
TEST(ResetLogKeyTest, OneKeyInATagNoStorageKeyHas) {
  const std::string key = ResetLogKey("sluice:");
  EXPECT_EQ(key, "sluice:{sluice_reset_log}");
  EXPECT_EQ(HashTagOf(StdView(key)), "sluice_reset_log");
  const std::string storage = StorageKey("sluice:", "sluice_reset_log", {{"k", "v"}}, "fw:60");
  EXPECT_NE(HashTagOf(StdView(storage)), HashTagOf(StdView(key)));
  EXPECT_EQ(ResetLogKey("other:"), "other:{sluice_reset_log}");
}

}  // namespace
}  // namespace sluice
