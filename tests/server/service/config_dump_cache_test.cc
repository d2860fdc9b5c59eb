#include "server/service/config_dump_cache.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config_loader.h"
#include "tests/support/notification.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// Verifies a dump within the cap is served whole.
TEST(CapConfigDumpTest, KeepsADumpWithinTheCap) {
  EXPECT_EQ(CapConfigDump("a\nb\n", 4), "a\nb\n");
}

// Verifies a longer dump is cut after its last whole line within the cap, and says so.
TEST(CapConfigDumpTest, CutsAtALineBoundaryAndSaysSo) {
  EXPECT_EQ(CapConfigDump("one\ntwo\nthree\n", 10),
            "one\ntwo\n... truncated: 8 of 14 bytes shown; raise --config_dump_max_bytes to see "
            "them all\n");
}

// Verifies a first line longer than the cap is cut mid-line rather than dropped whole.
TEST(CapConfigDumpTest, CutsALongFirstLine) {
  EXPECT_THAT(CapConfigDump("abcdefgh\n", 3), ::testing::StartsWith("abc... truncated: 3 of 9"));
}

std::shared_ptr<const Config> Load(const std::string& yaml) {
  auto config = LoadConfigText("c.yaml", yaml);
  EXPECT_TRUE(config.ok()) << config.status();
  return std::shared_ptr<const Config>(std::move(*config));
}

// Waits for the page the cache hands to `done`.
ConfigDumpCache::Page GetPage(ConfigDumpCache& cache, std::shared_ptr<const Config> config) {
  auto page = std::make_shared<ConfigDumpCache::Page>();
  auto done = std::make_shared<testing::Notification>();
  cache.Get(std::move(config), [page, done](ConfigDumpCache::Page rendered) {
    *page = std::move(rendered);
    done->Notify();
  });
  EXPECT_TRUE(done->WaitForNotificationWithTimeout(absl::Seconds(10)));
  return *page;
}

// Verifies a config is rendered once, later asks are answered from the cache, and another
// config is rendered anew.
TEST(ConfigDumpCacheTest, RendersEachConfigOnce) {
  ConfigDumpCache cache(1 << 20);
  const std::string rule = "    rate_limit: {unit: second, requests_per_unit: 1}\n";
  auto first = Load("domain: d\ndescriptors:\n  - key: a\n" + rule);
  EXPECT_THAT(*GetPage(cache, first), HasSubstr("d.a: "));
  EXPECT_THAT(*GetPage(cache, first), HasSubstr("d.a: "));
  EXPECT_EQ(cache.renders(), 1);
  auto second = Load("domain: d\ndescriptors:\n  - key: b\n" + rule);
  EXPECT_THAT(*GetPage(cache, second), HasSubstr("d.b: "));
  EXPECT_EQ(cache.renders(), 2);
  EXPECT_EQ(*GetPage(cache, nullptr), "");
}

}  // namespace
}  // namespace sluice
