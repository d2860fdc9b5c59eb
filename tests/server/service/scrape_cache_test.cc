#include "server/service/scrape_cache.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"

namespace sluice {
namespace {

// Gets a page and waits for it, whichever thread gives it.
ScrapeCache::Page GetPage(ScrapeCache& cache) {
  absl::Notification done;
  ScrapeCache::Page page;
  cache.Get([&](ScrapeCache::Page given) {
    page = std::move(given);
    done.Notify();
  });
  done.WaitForNotificationWithTimeout(absl::Seconds(10));
  return page;
}

class ScrapeCacheTest : public ::testing::Test {
 protected:
  std::string Render() { return absl::StrCat("page ", ++renders_); }

  FakeClock clock_;
  std::atomic<int> renders_{0};
};

// Verifies a page is served again while fresh and rendered anew once older than max_age.
TEST_F(ScrapeCacheTest, RendersAtMostOncePerMaxAge) {
  ScrapeCache cache([this] { return Render(); }, {.max_age = absl::Seconds(1)}, clock_);
  EXPECT_EQ(*GetPage(cache), "page 1");
  clock_.AdvanceMicros(999999);
  EXPECT_EQ(*GetPage(cache), "page 1");
  EXPECT_EQ(cache.renders(), 1);
  EXPECT_EQ(cache.reused(), 1);
  clock_.AdvanceMicros(1);
  EXPECT_EQ(*GetPage(cache), "page 2");
  EXPECT_EQ(cache.renders(), 2);
}

// Verifies scrapes that ask while a page renders wait for that render and share its page.
TEST_F(ScrapeCacheTest, ScrapesDuringARenderShareIt) {
  absl::Notification started;
  absl::Notification go_on;
  ScrapeCache cache(
      [&] {
        started.Notify();
        go_on.WaitForNotification();
        return Render();
      },
      {}, clock_);
  std::atomic<int> given{0};
  std::vector<ScrapeCache::Page> pages(3);
  for (auto& page : pages) {
    cache.Get([&page, &given](ScrapeCache::Page p) {
      page = std::move(p);
      given.fetch_add(1);
    });
  }
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(given.load(), 0);  // none answered before the render ends
  go_on.Notify();
  for (int i = 0; i < 1000 && given.load() < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(given.load(), 3);
  EXPECT_EQ(cache.renders(), 1);
  EXPECT_EQ(pages[0].get(), pages[2].get());  // the same page, not copies
}

// Verifies slow readers cannot make the cache hold more than max_live_pages: while that many
// pages are still held, a scrape gets the newest however old, and a new one is rendered once a
// page is let go.
TEST_F(ScrapeCacheTest, LivePagesAreBounded) {
  ScrapeCache cache([this] { return Render(); },
                    {.max_age = absl::Seconds(1), .max_live_pages = 2}, clock_);
  ScrapeCache::Page first = GetPage(cache);
  clock_.AdvanceMicros(2000000);
  ScrapeCache::Page second = GetPage(cache);
  EXPECT_EQ(*second, "page 2");
  clock_.AdvanceMicros(2000000);
  // Two pages alive, the first held by a reader that has not finished: no third.
  EXPECT_EQ(*GetPage(cache), "page 2");
  EXPECT_EQ(cache.renders(), 2);
  first.reset();
  EXPECT_EQ(*GetPage(cache), "page 3");
}

}  // namespace
}  // namespace sluice
