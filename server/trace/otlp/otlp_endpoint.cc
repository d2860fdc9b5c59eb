#include "server/trace/otlp/otlp_endpoint.h"

#include <curl/curl.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

absl::Status Invalid(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("URL \"", url, "\": ", why));
}

struct UrlDeleter {
  void operator()(CURLU* url) const { curl_url_cleanup(url); }
};
using UrlHandle = std::unique_ptr<CURLU, UrlDeleter>;

// One part of `url`; "" when it has none (CURLUE_NO_*).
std::string Part(CURLU* url, CURLUPart part, unsigned int flags = 0) {
  char* text = nullptr;
  if (curl_url_get(url, part, &text, flags) != CURLUE_OK || text == nullptr) {
    return "";
  }
  std::string copy(text);
  curl_free(text);
  return copy;
}

}  // namespace

std::string OtlpEndpoint::Authority() const { return absl::StrCat(host, ":", port); }

absl::StatusOr<OtlpEndpoint> ParseOtlpEndpoint(absl::string_view url,
                                               absl::string_view default_path) {
  const size_t scheme_end = url.find("://");
  const std::string scheme =
      absl::AsciiStrToLower(url.substr(0, scheme_end == absl::string_view::npos ? 0 : scheme_end));
  if (scheme != "http" && scheme != "https") {
    return Invalid(url, "must start with http:// or https://");
  }
  UrlHandle parsed(curl_url());
  if (parsed == nullptr) {
    return absl::ResourceExhaustedError("curl_url: out of memory");
  }
  const std::string text(url);
  if (const CURLUcode code = curl_url_set(parsed.get(), CURLUPART_URL, text.c_str(), 0);
      code != CURLUE_OK) {
    return Invalid(url, curl_url_strerror(code));
  }
  if (!Part(parsed.get(), CURLUPART_USER).empty() ||
      !Part(parsed.get(), CURLUPART_PASSWORD).empty()) {
    return Invalid(url, "user information (user@) is not supported; send credentials as headers");
  }
  if (absl::StrContains(url, '#')) {
    return Invalid(url, "a fragment (#) has no meaning here");
  }
  OtlpEndpoint endpoint;
  endpoint.tls = scheme == "https";
  endpoint.host = Part(parsed.get(), CURLUPART_HOST);
  if (!absl::SimpleAtoi(Part(parsed.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT), &endpoint.port) ||
      endpoint.port < 1 || endpoint.port > 65535) {
    return Invalid(url, "the port is not 1 to 65535");
  }
  // libcurl gives a URL without a path the path "/": whether one was written is read here.
  const absl::string_view after_scheme = url.substr(scheme_end + 3);
  if (after_scheme.find_first_of("/?") == absl::string_view::npos) {
    const std::string path(default_path.empty() ? "/" : default_path);
    if (const CURLUcode code = curl_url_set(parsed.get(), CURLUPART_PATH, path.c_str(), 0);
        code != CURLUE_OK) {
      return Invalid(url, absl::StrCat("the default path ", path, ": ", curl_url_strerror(code)));
    }
  }
  endpoint.path = Part(parsed.get(), CURLUPART_PATH);
  if (const std::string query = Part(parsed.get(), CURLUPART_QUERY); !query.empty()) {
    absl::StrAppend(&endpoint.path, "?", query);
  }
  endpoint.url = Part(parsed.get(), CURLUPART_URL);
  return endpoint;
}

}  // namespace sluice
