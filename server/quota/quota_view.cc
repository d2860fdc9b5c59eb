#include "server/quota/quota_view.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/common/prometheus_label.h"
#include "server/quota/bucket_key.h"

namespace sluice::quota {
namespace {

// A per-process salt, so that a hash on the page cannot be matched against hashes of guessed
// values computed elsewhere.
const std::array<unsigned char, 16>& Salt() {
  static const std::array<unsigned char, 16> salt = [] {
    std::array<unsigned char, 16> s{};
    if (RAND_bytes(s.data(), static_cast<int>(s.size())) != 1) {
      s.fill(0x5a);
    }
    return s;
  }();
  return salt;
}

std::string RedactedValue(absl::string_view value) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  EVP_DigestInit_ex(context, EVP_sha256(), nullptr);
  EVP_DigestUpdate(context, Salt().data(), Salt().size());
  EVP_DigestUpdate(context, value.data(), value.size());
  EVP_DigestFinal_ex(context, digest, &length);
  EVP_MD_CTX_free(context);
  return absl::StrFormat("<redacted %d bytes #%02x%02x%02x%02x>", value.size(), digest[0],
                         digest[1], digest[2], digest[3]);
}

// A demand not measured yet is infinite to the division: "?" here.
std::string Numbers(const std::vector<double>& values) {
  return absl::StrJoin(values, ", ", [](std::string* out, double x) {
    absl::StrAppend(out, std::isfinite(x) ? absl::StrFormat("%.1f", x) : std::string("?"));
  });
}

}  // namespace

std::string PageText(absl::string_view text) {
  const bool cut = text.size() > kShownBytes;
  if (cut) {
    text = text.substr(0, kShownBytes);
  }
  std::string out;
  out.reserve(text.size() + 3);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e || c == '\\') {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", byte));
    } else {
      out.push_back(c);
    }
  }
  if (cut) {
    out += "...";
  }
  return out;
}

std::string DescribeQuotaView(const QuotaView& view, bool show_values) {
  std::string out = absl::StrCat("rlqs: ", view.streams, " streams, ", view.buckets,
                                 " buckets, ", view.subscriptions, " subscriptions, ",
                                 view.bytes >> 10, " KiB");
  if (view.stale > 0) {
    absl::StrAppend(&out, "; ", view.stale,
                    " buckets answered by the failure mode (their exchange with the other "
                    "replicas failed)");
  }
  absl::StrAppend(&out, show_values ? "" : "; values redacted (--rlqs_page_values shows them)",
                  "\n");
  for (const QuotaView::Line& line : view.lines) {
    absl::StrAppend(&out, PageText(line.domain));
    for (const auto& [k, v] : BucketPairs(line.bucket)) {
      absl::StrAppend(&out, " ", PageText(k), "=", show_values ? PageText(v) : RedactedValue(v));
    }
    switch (line.kind) {
      case QuotaRule::Kind::kAllowAll:
        absl::StrAppend(&out, line.shadow ? absl::StrFormat(": shadow %.1f/s", line.rate)
                                          : std::string(": allow_all"));
        break;
      case QuotaRule::Kind::kDenyAll:
        absl::StrAppend(&out, ": deny_all");
        break;
      case QuotaRule::Kind::kShare:
        absl::StrAppend(&out, absl::StrFormat(": %.1f/s", line.rate));
        break;
    }
    if (line.stale) {
      absl::StrAppend(&out, " (failure mode)");
    }
    absl::StrAppend(&out, "; here ", line.demands.size(), " (demand ", Numbers(line.demands),
                    "; sent ", Numbers(line.sent), ")");
    if (!line.remote.empty()) {
      absl::StrAppend(&out, "; other replicas ", line.remote.size(), " (", Numbers(line.remote),
                      ")");
    }
    absl::StrAppend(&out, "\n");
  }
  if (view.not_shown > 0) {
    absl::StrAppend(&out, "... and ", view.not_shown, " buckets less demanded\n");
  }
  return out;
}

void AppendRuleGauges(const QuotaView& view, std::string* out) {
  const struct {
    absl::string_view name;
    absl::string_view help;
    double QuotaView::RuleGauges::*value;
  } families[] = {
      {"sluice_rlqs_rule_demand",
       "Requests a second this replica's Envoys report for the buckets of a rule, by stat key",
       &QuotaView::RuleGauges::demand},
      {"sluice_rlqs_rule_share",
       "Requests a second assigned to this replica's Envoys for the buckets of a rule (token "
       "buckets; for a shadow-mode rule, what enforcing it would assign), by stat key",
       &QuotaView::RuleGauges::share},
      {"sluice_rlqs_rule_over_share",
       "Requests a second this replica's Envoys ask beyond their shares of a rule's buckets: what "
       "they deny, or for a shadow-mode rule would deny, by stat key",
       &QuotaView::RuleGauges::over},
  };
  for (const auto& family : families) {
    absl::StrAppend(out, "# HELP ", family.name, " ", family.help, "\n# TYPE ", family.name,
                    " gauge\n");
    for (const auto& [key, gauges] : view.per_rule) {
      absl::StrAppend(out, family.name, "{key=\"");
      AppendLabelValue(key, out);
      absl::StrAppend(out, "\"} ", gauges.*family.value, "\n");
    }
  }
}

}  // namespace sluice::quota
