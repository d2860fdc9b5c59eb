// gRPC's own log lines (gpr_log: a TLS handshake a peer broke off, a bad HTTP/2 frame, a port
// that cannot be bound) go through Sluice's log: its format, its --log_level, and a rate limit,
// since a peer decides how often they come. Each line is cut to 512 bytes with non-printable
// bytes escaped (LogText), and at most one a second per gRPC severity is written; the next says
// how many were left out.
#pragma once

namespace sluice {

// Installs the route (gpr_set_log_function). Idempotent; call before gRPC logs anything worth
// keeping (at process start).
void RouteGrpcLogs();

}  // namespace sluice
