// sluice: the rate-limit decision server. The only place that builds the real object graph:
// flags -> config -> backend -> rate limiter -> gRPC and HTTP servers; then waits for signals
// (SIGHUP reloads the config, SIGTERM/SIGINT drain and exit 0).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/backend/memory_backend.h"
#include "server/backend/redis_backend.h"
#include "server/common/clock.h"
#include "server/common/env_flags.h"
#include "server/common/logging.h"
#include "server/config/config_loader.h"
#include "server/config/config_store.h"
#include "server/config/config_watcher.h"
#include "server/service/grpc_options.h"
#include "server/service/grpc_service.h"
#include "server/service/http_server.h"
#include "server/service/metrics.h"
#include "server/service/rate_limiter.h"

ABSL_FLAG(std::string, config, "", "YAML config file, or a directory of *.yaml files (one domain each)");
ABSL_FLAG(std::string, grpc_address, "0.0.0.0:8081", "gRPC listen address (HOST:PORT)");
ABSL_FLAG(std::string, http_address, "0.0.0.0:8080",
          "HTTP listen address for /json, /healthz, /readyz, /config, /metrics (HOST:PORT)");
ABSL_FLAG(std::string, backend, "memory",
          "where limits are kept: memory (in process), redis or redis_cluster (shared by every "
          "replica)");
ABSL_FLAG(std::string, redis_addresses, "127.0.0.1:6379",
          "redis: the server, HOST:PORT; redis_cluster: seed nodes, HOST:PORT,HOST:PORT,...");
ABSL_FLAG(std::string, redis_username, "", "Redis ACL user (with --redis_password)");
ABSL_FLAG(std::string, redis_password, "", "Redis password (AUTH)");
ABSL_FLAG(int32_t, redis_db, 0, "Redis database number (standalone only)");
ABSL_FLAG(std::string, redis_key_prefix, "sluice:", "prefix of every key Sluice writes");
ABSL_FLAG(absl::Duration, redis_timeout, absl::Milliseconds(10),
          "per-decision budget; past it the decision follows --failure_mode");
ABSL_FLAG(std::string, redis_clock, "redis",
          "redis: Redis' clock, one for all replicas (this process's clock plus an offset "
          "sampled with TIME every second); local: this process's clock (replicas must agree)");
ABSL_FLAG(int32_t, redis_io_threads, 1, "Redis I/O threads");
ABSL_FLAG(int32_t, redis_connections, 2, "Redis connections per I/O thread");
ABSL_FLAG(int32_t, redis_max_batch, 16,
          "redis: most lone checks of one algorithm, from any requests, decided by one script "
          "call (1: each request's checks on their own); ignored by redis_cluster");
ABSL_FLAG(bool, redis_caller_writes, true,
          "a request thread writes its Redis commands itself when the connection is idle, "
          "sparing the I/O thread a wake-up (false: the I/O thread writes every command)");
ABSL_FLAG(int64_t, over_limit_cache_keys, 100000,
          "redis backend: keys remembered as over limit, answered without a Redis call until "
          "their retry time (0 disables)");
ABSL_FLAG(std::string, failure_mode, "allow",
          "when the backend cannot answer in budget: allow (answer OK) or deny (OVER_LIMIT)");
ABSL_FLAG(bool, check_config, false, "validate the config, print the result and exit 0 or 1");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(int32_t, max_descriptors, 64, "most descriptors accepted in one request");
ABSL_FLAG(int32_t, max_entries, 32, "most entries accepted in one descriptor");
ABSL_FLAG(int32_t, max_key_bytes, 1024, "longest domain, descriptor key or value accepted");
ABSL_FLAG(int64_t, memory_max_keys, 1000000, "memory backend: most keys kept at once");
ABSL_FLAG(absl::Duration, config_poll_interval, absl::Seconds(5),
          "how often to check the config files for changes (0 disables; SIGHUP always reloads)");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "on SIGTERM, how long in-flight calls may take before they are cancelled");

namespace sluice {
namespace {

const std::vector<std::string> kFlagNames = {
    "config",          "grpc_address",      "http_address",      "backend",
    "check_config",    "log_level",         "max_descriptors",   "max_entries",
    "max_key_bytes",   "memory_max_keys",   "config_poll_interval", "shutdown_grace",
    "redis_addresses", "redis_username",    "redis_password",    "redis_db",
    "redis_key_prefix", "redis_timeout",    "redis_clock",       "redis_io_threads",
    "redis_connections", "redis_max_batch", "redis_caller_writes", "failure_mode",
    "over_limit_cache_keys"};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "sluice: %s\n", message.c_str());
  std::exit(1);
}

int Run() {
  LogLevel level;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    Die(absl::StrCat("--log_level: '", absl::GetFlag(FLAGS_log_level),
                     "' is not debug, info, warning or error"));
  }
  SetMinLogLevel(level);

  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) {
    Die("--config is required (a YAML file or a directory of them)");
  }
  auto loaded = LoadConfigPath(config_path);
  if (!loaded.ok()) {
    Die(absl::StrCat("invalid config: ", loaded.status().message()));
  }
  std::shared_ptr<const Config> config(std::move(*loaded));
  if (absl::GetFlag(FLAGS_check_config)) {
    std::printf("config OK: %zu domains, %zu rules\n%s", config->domains().size(),
                config->RuleCount(), config->Dump().c_str());
    return 0;
  }
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  if (backend_name != "memory" && backend_name != "redis" && backend_name != "redis_cluster") {
    Die(absl::StrCat("--backend: '", backend_name, "' is not memory, redis or redis_cluster"));
  }
  const std::string failure_mode = absl::GetFlag(FLAGS_failure_mode);
  if (failure_mode != "allow" && failure_mode != "deny") {
    Die(absl::StrCat("--failure_mode: '", failure_mode, "' is not allow or deny"));
  }
  const std::string redis_clock = absl::GetFlag(FLAGS_redis_clock);
  if (redis_clock != "redis" && redis_clock != "local") {
    Die(absl::StrCat("--redis_clock: '", redis_clock, "' is not redis or local"));
  }
  if (absl::GetFlag(FLAGS_redis_timeout) <= absl::ZeroDuration()) {
    Die("--redis_timeout must be positive");
  }
  for (auto [name, value] : {std::pair{"max_descriptors", absl::GetFlag(FLAGS_max_descriptors)},
                             std::pair{"max_entries", absl::GetFlag(FLAGS_max_entries)},
                             std::pair{"max_key_bytes", absl::GetFlag(FLAGS_max_key_bytes)}}) {
    if (value < 1) {
      Die(absl::StrCat("--", name, " must be at least 1"));
    }
  }

  // A write to a socket whose peer has gone (hiredis' and libevent's write(2), not send with
  // MSG_NOSIGNAL) must fail with EPIPE, not end the process.
  signal(SIGPIPE, SIG_IGN);
  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Clock& clock = RealClock::Get();
  Metrics metrics;
  ConfigStore store(config);
  metrics.SetConfigRules(static_cast<double>(config->RuleCount()));
  std::unique_ptr<Backend> backend;
  RedisBackend* redis = nullptr;
  if (backend_name == "memory") {
    MemoryBackendOptions memory_options;
    memory_options.max_keys =
        static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_memory_max_keys)));
    backend = std::make_unique<MemoryBackend>(clock, memory_options);
  } else {
    RedisBackendOptions options;
    std::vector<std::string> addresses =
        absl::StrSplit(absl::GetFlag(FLAGS_redis_addresses), ',', absl::SkipEmpty());
    if (addresses.empty()) {
      Die("--redis_addresses is empty");
    }
    options.cluster = backend_name == "redis_cluster";
    if (!options.cluster && addresses.size() > 1) {
      Die("--redis_addresses: --backend=redis takes one HOST:PORT (use --backend=redis_cluster "
          "for several seed nodes)");
    }
    if (options.cluster && absl::GetFlag(FLAGS_redis_db) != 0) {
      Die("--redis_db: a Redis Cluster has only database 0");
    }
    options.cluster_seeds = addresses;
    options.client.address = addresses.front();
    options.client.username = absl::GetFlag(FLAGS_redis_username);
    options.client.password = absl::GetFlag(FLAGS_redis_password);
    options.client.db = absl::GetFlag(FLAGS_redis_db);
    options.client.io_threads = absl::GetFlag(FLAGS_redis_io_threads);
    options.client.connections_per_thread = absl::GetFlag(FLAGS_redis_connections);
    if (!absl::GetFlag(FLAGS_redis_caller_writes)) {
      options.client.caller_write_horizon = absl::ZeroDuration();
    }
    options.timeout = absl::GetFlag(FLAGS_redis_timeout);
    options.use_caller_clock = redis_clock == "local";
    if (absl::GetFlag(FLAGS_redis_max_batch) < 1) {
      Die("--redis_max_batch must be at least 1");
    }
    options.max_batch = static_cast<size_t>(absl::GetFlag(FLAGS_redis_max_batch));
    auto created = RedisBackend::Create(options, clock);
    if (!created.ok()) {
      Die(absl::StrCat("--backend=", backend_name, ": ", created.status().message()));
    }
    redis = created->get();
    // Serve even if Redis is not up yet: decisions follow --failure_mode until it is.
    if (!redis->WaitUntilReady(absl::Seconds(2))) {
      SLUICE_LOG(WARNING) << backend_name << " at " << absl::GetFlag(FLAGS_redis_addresses)
                          << " is not reachable yet; answering by --failure_mode=" << failure_mode
                          << " until it is";
    }
    backend = std::move(*created);
  }

  RateLimiterOptions limiter_options;
  limiter_options.max_descriptors = absl::GetFlag(FLAGS_max_descriptors);
  limiter_options.max_entries = absl::GetFlag(FLAGS_max_entries);
  limiter_options.max_key_bytes = absl::GetFlag(FLAGS_max_key_bytes);
  limiter_options.key_prefix = absl::GetFlag(FLAGS_redis_key_prefix);
  limiter_options.failure_mode = failure_mode == "deny" ? FailureMode::kDeny : FailureMode::kAllow;
  // The memory backend is as fast as the cache: only a remote backend gets one.
  std::unique_ptr<OverLimitCache> over_limit_cache;
  if (redis != nullptr && absl::GetFlag(FLAGS_over_limit_cache_keys) > 0) {
    over_limit_cache = std::make_unique<OverLimitCache>(
        clock, static_cast<size_t>(absl::GetFlag(FLAGS_over_limit_cache_keys)));
  }
  RateLimiter limiter(store, *backend, metrics, limiter_options, over_limit_cache.get());

  RateLimitGrpcService service(limiter);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ApplyGrpcServerSettings(GrpcServerSettings{}, builder);
  int grpc_port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_grpc_address), grpc::InsecureServerCredentials(),
                           &grpc_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || grpc_port == 0) {
    Die(absl::StrCat("cannot listen on gRPC address ", absl::GetFlag(FLAGS_grpc_address)));
  }
  server->GetHealthCheckService()->SetServingStatus(true);

  HttpServer http(limiter, store, *backend, metrics);
  if (absl::Status s = http.Start(absl::GetFlag(FLAGS_http_address)); !s.ok()) {
    Die(std::string(s.message()));
  }
  SLUICE_LOG(INFO) << "sluice serving: gRPC on port " << grpc_port << ", HTTP on port "
                   << http.port() << ", backend " << backend->Name() << ", "
                   << config->RuleCount() << " rules";

  ConfigWatcher watcher(config_path, store, [&metrics](bool ok, const Config* next) {
    metrics.CountConfigReload(ok);
    if (next != nullptr) {
      metrics.SetConfigRules(static_cast<double>(next->RuleCount()));
    }
  });
  const absl::Duration poll = absl::GetFlag(FLAGS_config_poll_interval);
  while (true) {
    timespec wait = absl::ToTimespec(poll > absl::ZeroDuration() ? poll : absl::Hours(1));
    siginfo_t info;
    int sig = sigtimedwait(&signals, &info, &wait);
    if (sig == SIGHUP) {
      watcher.Poll(/*force=*/true);
    } else if (sig == SIGINT || sig == SIGTERM) {
      SLUICE_LOG(INFO) << "signal " << sig << ": draining";
      break;
    } else if (poll > absl::ZeroDuration()) {
      watcher.Poll(/*force=*/false);
    }
  }

  http.SetDraining();
  server->GetHealthCheckService()->SetServingStatus(false);
  // Stop accepting, let in-flight calls finish (up to the grace period), then stop.
  server->Shutdown(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(absl::GetFlag(FLAGS_shutdown_grace)));
  server->Wait();
  if (redis != nullptr) {
    // Completes any /json call still waiting on Redis before the HTTP loop goes away.
    redis->Stop();
  }
  http.Stop();
  SLUICE_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Sluice rate-limit service (Envoy RLS v3).\n"
      "  sluice --config=PATH [--grpc_address=HOST:PORT] [--http_address=HOST:PORT]\n"
      "Every flag can also be set as environment variable SLUICE_<FLAG IN UPPER CASE>.");
  if (absl::Status s = sluice::ApplyFlagsFromEnvironment("SLUICE_", sluice::kFlagNames); !s.ok()) {
    std::fprintf(stderr, "sluice: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  absl::ParseCommandLine(argc, argv);
  // gRPC locks absl::Mutex on every call; Debian's abseil checks each lock for deadlock cycles
  // by default, which costs a few percent of CPU per request. (Kept identical in sluice-floor.)
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return sluice::Run();
}
