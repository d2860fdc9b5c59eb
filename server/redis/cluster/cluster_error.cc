#include "server/redis/cluster/cluster_error.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "server/redis/address.h"
#include "server/redis/cluster/hash_slot.h"

namespace sluice {
namespace {

bool ParseInt(std::string_view text, int* value) {
  auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && ptr == text.data() + text.size();
}

// Parses "<slot> <host>:<port>" (the text after MOVED/ASK).
bool ParseRedirect(std::string_view rest, std::string_view replying_address, ClusterError* out) {
  size_t space = rest.find(' ');
  if (space == std::string_view::npos) {
    return false;
  }
  int slot = -1;
  if (!ParseInt(rest.substr(0, space), &slot) || slot < 0 || slot >= kClusterSlots) {
    return false;
  }
  std::string_view endpoint = rest.substr(space + 1);
  size_t colon = endpoint.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || !ParseInt(endpoint.substr(colon + 1), &port) ||
      port <= 0 || port > 65535) {
    return false;
  }
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (!host.empty() && !IsPlausibleHost(host)) {
    return false;  // not a redirect: the error as it is
  }
  if (host.empty()) {
    size_t replying_colon = replying_address.rfind(':');
    if (replying_colon == std::string_view::npos) {
      return false;
    }
    host = replying_address.substr(0, replying_colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
  }
  out->slot = slot;
  out->address = JoinHostPort(host, port);
  return true;
}

}  // namespace

std::string JoinHostPort(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos) {
    return absl::StrCat("[", absl::string_view(host.data(), host.size()), "]:", port);
  }
  return absl::StrCat(absl::string_view(host.data(), host.size()), ":", port);
}

ClusterError ParseClusterError(const RedisReply& reply, std::string_view replying_address) {
  ClusterError error;
  std::string_view code = reply.ErrorCode();
  if (code.empty()) {
    return error;
  }
  std::string_view text = reply.str();
  std::string_view rest = text.size() > code.size() ? text.substr(code.size() + 1) : "";
  if (code == "MOVED" || code == "ASK") {
    if (ParseRedirect(rest, replying_address, &error)) {
      error.kind = code == "MOVED" ? ClusterErrorKind::kMoved : ClusterErrorKind::kAsk;
    }
  } else if (code == "TRYAGAIN") {
    error.kind = ClusterErrorKind::kTryAgain;
  } else if (code == "CLUSTERDOWN") {
    error.kind = ClusterErrorKind::kClusterDown;
  } else if (code == "LOADING" || code == "MASTERDOWN" || code == "READONLY") {
    error.kind = ClusterErrorKind::kNodeNotServing;
  }
  return error;
}

}  // namespace sluice
