// The options each part of the server is built with, filled from Settings: one small function
// per part, so that the assembly (assembly.h) reads as what it builds, and a setting's way into
// its part can be tested without building anything.
//
// Pure functions; thread-safe.
#pragma once

#include "server/backend/memcached_backend.h"
#include "server/backend/memory_backend.h"
#include "server/backend/redis_backend.h"
#include "server/config/config_loader.h"
#include "server/service/grpc_tls.h"
#include "server/service/http_server.h"
#include "server/service/rate_limiter.h"
#include "server/settings/settings.h"
#include "server/stats/statsd_sink.h"
#include "server/trace/otlp/batch_span_processor.h"
#include "server/trace/otlp/otlp_exporter_options.h"
#include "server/trace/tracer.h"

namespace sluice {

// The loader's options; a backend that keeps fixed windows only (memcached) makes it refuse
// rules of other algorithms.
ConfigLoadOptions ConfigLoadOptionsFrom(const ConfigSettings& config,
                                        const BackendSettings& backend);
// The name of the backend when it keeps fixed windows only (ValidateOptions), else empty.
std::string FixedWindowsOnlyBackend(const BackendSettings& backend);

// --backend=memcached: the servers, TLS, and the budget, breaker and I/O threads the Redis
// backend's flags set (one failure policy for both); keys start with --redis_key_prefix.
MemcachedBackendOptions MemcachedBackendOptionsFrom(const BackendSettings& backend,
                                                    const LimiterSettings& limiter);

// The memory backend's bounds (--memory_max_keys, --memory_max_mib).
MemoryBackendOptions MemoryBackendOptionsFrom(const BackendSettings& backend);

// One Redis: `target` (the main or the per-second one), a cluster or not, with the settings
// both share; with `target.sentinels`, the client finds the master through them (TLS, when on,
// to the sentinels too). REQUIRES: `target.addresses` or `target.sentinels` is not empty
// (ValidateSettings). `key_prefix` (--redis_key_prefix) is the storage keys', which the
// backend reads back with --redis_key_layout=upstream. `replicas` (--replicas_hint) bounds what
// each replica's leases hold.
RedisBackendOptions RedisBackendOptionsFrom(const RedisSettings& shared,
                                            const RedisTargetSettings& target, bool cluster,
                                            absl::string_view key_prefix = "", int replicas = 1);

// The limiter's options; its failure_mode local store takes the memory backend's bounds.
RateLimiterOptions RateLimiterOptionsFrom(const Settings& settings);

// The HTTP server's options, with --http_max_connections as given (the assembly lowers it to
// the file-descriptor limit's share, HttpConnectionCap).
HttpServerOptions HttpServerOptionsFrom(const Settings& settings);
MetricsOptions MetricsOptionsFrom(const Settings& settings);

GrpcTlsSettings GrpcTlsSettingsFrom(const GrpcSettings& grpc);

// The statsd sink's options (--statsd_*). REQUIRES: `statsd.address` is not empty.
StatsdSinkOptions StatsdSinkOptionsFrom(const StatsdSettings& statsd);

// The OTLP exporter's options: the endpoint (the protocol's default when none is given), headers,
// timeout, CA and the resource. An empty --tracing_service_instance_id stays empty here: the
// assembly makes one random UUID per process for it.
OtlpExporterOptions OtlpExporterOptionsFrom(const TracingSettings& tracing);
BatchSpanProcessorOptions BatchSpanProcessorOptionsFrom(const TracingSettings& tracing);
TracerOptions TracerOptionsFrom(const TracingSettings& tracing);

}  // namespace sluice
