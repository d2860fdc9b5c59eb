// How Sluice speaks TLS to Redis: the same for every node of a target (standalone, every node of
// a cluster, the per-second Redis, the sentinels), as upstream shares one TLS setup between its
// Redis pools. A plain value; tls_context.h turns it into the OpenSSL context connections use.
#pragma once

#include <string>

#include "absl/time/time.h"

namespace sluice {

struct RedisTlsOptions {
  // Off: plain TCP (or a unix socket). The other fields need it on.
  bool enabled = false;
  // PEM certificates trusted besides the system's store (upstream adds its CA to the system
  // pool too); empty: the system's store alone.
  std::string ca_file{};
  // A client certificate chain and its key (PEM), for servers that ask for one (mutual TLS,
  // `tls-auth-clients yes`). Both or neither.
  std::string cert_file{};
  std::string key_file{};
  // The name sent as SNI and checked against the server's certificate; empty: each node's own
  // host as it was given or learned (an IP literal is checked against the IP addresses the
  // certificate names).
  std::string server_name{};
  // The certificate chain is still verified against the trusted CAs, but not the name in it
  // (upstream's REDIS_TLS_SKIP_HOSTNAME_VERIFICATION).
  bool skip_hostname_verification = false;
  // How often the files are looked at for a change (a rotated client certificate, a new CA);
  // a change is used by the connections made after it.
  absl::Duration reload_interval = absl::Seconds(5);
};

}  // namespace sluice
