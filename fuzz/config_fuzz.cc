// Fuzzes the config loader: any bytes as one domain file. The loader must return a config or
// an error, never crash, hang or leak; every error is kInvalidArgument naming the file (and,
// through it, the line and field); an accepted config must answer lookups.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "server/config/config_loader.h"
#include "server/key/storage_key.h"

namespace {

constexpr absl::string_view kFile = "fuzz.yaml";

void Fail(const char* what, absl::string_view detail) {
  std::fprintf(stderr, "config_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = sluice::LoadConfigText(kFile, text);
  if (!config.ok()) {
    if (config.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail("an error that is not kInvalidArgument", config.status().ToString());
    }
    if (!absl::StartsWith(config.status().message(), kFile)) {
      Fail("an error that does not name the file", config.status().message());
    }
    return 0;
  }
  // An accepted config can be printed, counted and matched against.
  const std::string dump = (*config)->Dump();
  (void)(*config)->RuleCount();
  for (const auto& [name, domain] : (*config)->domains()) {
    if (!(*config)->HasDomain(name) || (*config)->FindDomain(name) == nullptr) {
      Fail("a loaded domain cannot be found", name);
    }
    // A few descriptors made of the input's own words: keys and values it may configure.
    std::vector<sluice::DescriptorEntryView> entries;
    size_t start = 0;
    for (size_t i = 0; i <= text.size() && entries.size() < 4; ++i) {
      if (i == text.size() || text[i] == ' ' || text[i] == '\n' || text[i] == ':') {
        if (i > start) {
          const absl::string_view word = text.substr(start, i - start);
          entries.push_back({word, word});
          (void)(*config)->Match(name, entries);
        }
        start = i + 1;
      }
    }
  }
  return 0;
}
