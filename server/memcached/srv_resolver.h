// DNS SRV lookups for --memcached_srv (upstream's MEMCACHE_SRV): the name _service._proto.name
// asked for its SRV records, each target "host:port", sorted as strings as upstream sorts them
// (src/srv/srv.go), since the order decides where keys live. An interface, so that tests can
// give a table; DnsSrvResolver asks the system's resolver (res_nquery, /etc/resolv.conf), or a
// name server of the caller's choice.
//
// Thread-safety: Lookup may be called from any thread; it blocks (off the request path: the
// client's refresh thread and the start).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

// The most targets MemcachedClient takes from one SRV answer: each is a server with connections,
// a breaker and metric series of its own, and the answer is whatever the name server says. An
// answer naming more fails the start, or is not applied by a refresh (the list stays).
inline constexpr size_t kMaxSrvTargets = 1024;

class SrvResolver {
 public:
  virtual ~SrvResolver() = default;
  // The targets of `srv` as "host:port", sorted. kInvalidArgument when `srv` is not
  // _service._proto.name; kUnavailable (naming `srv`) when the lookup fails or finds nothing.
  // A record with port 0 names no server: DnsSrvResolver skips it (and logs it).
  virtual absl::StatusOr<std::vector<std::string>> Lookup(absl::string_view srv) = 0;
};

class DnsSrvResolver final : public SrvResolver {
 public:
  // `nameserver`: "ip:port" of the server to ask instead of /etc/resolv.conf's (tests); empty:
  // the system's.
  explicit DnsSrvResolver(std::string nameserver = {}) : nameserver_(std::move(nameserver)) {}
  absl::StatusOr<std::vector<std::string>> Lookup(absl::string_view srv) override;

 private:
  const std::string nameserver_;
};

// Whether `srv` has upstream's form, _service._proto.name (srv.go's ^_(.+?)\._(.+?)\.(.+)$).
bool IsSrvName(absl::string_view srv);

}  // namespace sluice
