#include "server/memcached/srv_resolver.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netinet/in.h>
#include <resolv.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/common/log_text.h"
#include "server/common/logging.h"

namespace sluice {

bool IsSrvName(absl::string_view srv) {
  if (srv.size() < 2 || srv[0] != '_') {
    return false;
  }
  const size_t first = srv.find("._", 2);
  if (first == absl::string_view::npos) {
    return false;
  }
  const size_t second = srv.find('.', first + 3);
  return second != absl::string_view::npos && second > first + 2 && second + 1 < srv.size();
}

absl::StatusOr<std::vector<std::string>> DnsSrvResolver::Lookup(absl::string_view srv) {
  if (!IsSrvName(srv)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", LogText(srv), "' is not an SRV name, _service._proto.name"));
  }
  struct __res_state state;
  std::memset(&state, 0, sizeof(state));
  if (res_ninit(&state) != 0) {
    return absl::UnavailableError("SRV lookup: the resolver cannot be set up");
  }
  if (!nameserver_.empty()) {
    const size_t colon = nameserver_.rfind(':');
    int port = 53;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(nameserver_).substr(colon + 1), &port) ||
        inet_pton(AF_INET, nameserver_.substr(0, colon).c_str(), &address.sin_addr) != 1) {
      res_nclose(&state);
      return absl::InvalidArgumentError(absl::StrCat("bad name server ", nameserver_));
    }
    address.sin_port = htons(static_cast<uint16_t>(port));
    state.nsaddr_list[0] = address;
    state.nscount = 1;
    state.retry = 2;
    state.retrans = 1;
  }
  std::vector<unsigned char> answer(64 * 1024);
  const std::string name(srv);
  const int length = res_nquery(&state, name.c_str(), ns_c_in, ns_t_srv, answer.data(),
                                static_cast<int>(answer.size()));
  res_nclose(&state);
  if (length < 0) {
    return absl::UnavailableError(absl::StrCat("SRV lookup of ", LogText(srv), " failed"));
  }
  ns_msg message;
  if (ns_initparse(answer.data(), length, &message) != 0) {
    return absl::UnavailableError(absl::StrCat("SRV lookup of ", LogText(srv),
                                               ": an answer that does not parse"));
  }
  std::vector<std::string> servers;
  int port_zero = 0;
  const int count = ns_msg_count(message, ns_s_an);
  for (int i = 0; i < count; ++i) {
    ns_rr record;
    if (ns_parserr(&message, ns_s_an, i, &record) != 0 || ns_rr_type(record) != ns_t_srv ||
        ns_rr_rdlen(record) < 7) {
      continue;
    }
    const unsigned char* data = ns_rr_rdata(record);
    const int port = (data[4] << 8) | data[5];
    if (port == 0) {
      ++port_zero;  // nothing listens there: the other targets still serve
      continue;
    }
    char target[NS_MAXDNAME];
    if (ns_name_uncompress(ns_msg_base(message), ns_msg_end(message), data + 6, target,
                           sizeof(target)) < 0) {
      continue;
    }
    // Go's net.LookupSRV gives targets as fully qualified names, with the final dot.
    std::string host = target;
    if (host.empty() || host.back() != '.') {
      host.push_back('.');
    }
    servers.push_back(absl::StrCat(host, ":", port));
  }
  if (port_zero > 0) {
    SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
        << "SRV lookup of " << LogText(srv) << ": skipped " << port_zero
        << " target(s) with port 0";
  }
  if (servers.empty()) {
    return absl::UnavailableError(
        absl::StrCat("SRV lookup of ", LogText(srv), ": no servers",
                     port_zero > 0 ? absl::StrCat(" (", port_zero, " with port 0)") : ""));
  }
  std::sort(servers.begin(), servers.end());
  return servers;
}

}  // namespace sluice
