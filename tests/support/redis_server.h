// Test helper: a real redis-server child process on a free 127.0.0.1 port, with its own
// temporary directory and no persistence, that a test can kill, restart on the same port, and
// pause (SIGSTOP, a hung Redis) and resume. Command() runs one command on a fresh blocking
// connection for test setup and assertions. A cluster launcher builds on it by passing
// cluster-enabled and friends through RedisServerOptions::extra_config, one server per node.
//
// With RedisServerOptions::tls the server also listens with TLS on a second free port
// (tls_port()), beside the plain one that Command() keeps using; or, with tls.plain_port false,
// with TLS alone on TCP, and Command() goes through a unix socket in dir(). Redis 7.0 keeps its
// TLS files in memory: ReloadCertificate() makes it read them again (certificate rotation).
//
// Not thread-safe: one thread drives a server object. Distinct servers are independent.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/process.h"

namespace sluice::testing {

// The redis.conf tls-* settings of a test server. The files are PEM, e.g. from
// tests/support/certificates.h.
struct RedisServerTlsOptions {
  // tls-auth-clients: whether a TLS client must present a certificate that ca_file verifies.
  // (Only TLS connections are asked; the plain port never is.)
  enum class ClientAuth {
    kNo,        // never asked for
    kYes,       // required: a client without one is dropped in the handshake
    kOptional,  // checked if presented
  };

  // Off: no tls-* lines at all, and the other fields are ignored.
  bool enabled = false;
  // tls-cert-file and tls-key-file: the server's certificate chain and key. Redis also presents
  // them as the client certificate of its own outgoing TLS links (replication, cluster bus), so
  // a certificate with extendedKeyUsage serverAuth alone breaks those under tls-auth-clients yes
  // (the peer answers "unsupported certificate"). MakeCert's have no extendedKeyUsage: fine.
  std::string cert_file{};
  std::string key_file{};
  // tls-ca-cert-file: the CAs that verify client certificates and the peers of outgoing links.
  // Empty: no such line; Redis then refuses to start if it asks clients for certificates or
  // runs replication or the cluster bus over TLS.
  std::string ca_file{};
  // Unlike redis.conf, whose default is yes.
  ClientAuth client_auth = ClientAuth::kNo;
  // tls-port; 0 picks FreePort().
  int port = 0;
  // False: `port 0`, no plain TCP port. Command() then connects through the unix socket
  // dir()/redis.sock (whose path must fit in 107 bytes: mind a long $TMPDIR), port() is 0 and
  // address() means nothing.
  bool plain_port = true;
};

struct RedisServerOptions {
  // 0 picks FreePort().
  int port = 0;
  // requirepass: the default user's password. Command() authenticates with it.
  std::string password{};
  // ACL users, each a redis.conf `user` line without the keyword, e.g.
  // "alice on >secret ~* &* +@all".
  std::vector<std::string> acl_users{};
  // More redis.conf lines, e.g. "cluster-enabled yes".
  std::vector<std::string> extra_config{};
  std::string binary = "redis-server";
  // Command-line arguments after the config file, e.g. {"--sentinel"} to run a Redis Sentinel
  // (whose Command() then talks to the sentinel).
  std::vector<std::string> arguments{};
  // The address the server binds, and that address() and Command() use.
  std::string host = "127.0.0.1";
  // A command the server runs under, e.g. {"ip", "netns", "exec", "<name>"} to start it in a
  // network namespace. It must exec the server, so that the child's pid is the server's.
  std::vector<std::string> launcher{};
  // How long Start and Restart wait for the server to answer PING.
  std::chrono::milliseconds start_timeout{15000};
  // TLS; off by default.
  RedisServerTlsOptions tls{};
};

class RedisServer {
 public:
  // Starts the server and waits until it answers PING. The error includes the server's log.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});

  // Stops the server (resuming it first if paused).
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // The plain TCP port; 0 when tls.plain_port is false.
  int port() const { return port_; }
  // "<host>:<port>".
  std::string address() const;
  // The TLS port; 0 without TLS.
  int tls_port() const { return tls_port_; }
  // "<host>:<tls_port>"; "" without TLS.
  std::string tls_address() const;
  // The server's working directory (its redis.conf and redis.log live there).
  const std::string& dir() const { return dir_.path(); }
  pid_t pid() const;
  bool running();

  // Stops the server if it runs (SIGTERM) and starts it again on the same ports and directory,
  // with the certificate of the last ReloadCertificate, waiting until it answers. Data and
  // loaded scripts are gone (nothing is persisted).
  absl::Status Restart();
  // SIGKILL, at once, like a crash. Restart() brings it back.
  void Kill();
  // SIGSTOP / SIGCONT: connections stay open but nothing is answered while paused.
  void Pause();
  void Resume();

  // Runs one command on a new blocking connection (authenticated with `password` if set) and
  // returns the reply as text: a status or string as is, an integer in decimal, nil as
  // "(nil)", an array as its elements joined by '\n'. An error reply is kUnknown with the
  // error text; an I/O failure or timeout is kUnavailable.
  absl::StatusOr<std::string> Command(const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Makes the running server serve the certificate chain and key in these files, read now, to
  // the TLS handshakes that begin after it (open connections keep theirs); Restart keeps them.
  // The paths may be the current ones with new content: Redis 7.0 reads the files again on
  // every `CONFIG SET tls-cert-file <path> tls-key-file <path>`, which is what this sends (both
  // in one command, so that no handshake meets a mismatched pair). A pair Redis cannot load is
  // an error, and the old one stays. kFailedPrecondition without TLS.
  absl::Status ReloadCertificate(const std::string& cert_file, const std::string& key_file);

  // The server's output so far.
  std::string ReadLog() const;

 private:
  explicit RedisServer(RedisServerOptions options);
  absl::Status Launch();
  // (Re)writes redis.conf from options_ and the ports.
  void WriteConfig();
  // Where Command() connects, for messages.
  std::string CommandEndpoint() const;

  RedisServerOptions options_;
  TempDir dir_;
  int port_ = 0;
  int tls_port_ = 0;
  // Where Command() connects when there is no plain port.
  std::string unix_socket_;
  std::string config_path_;
  std::unique_ptr<ChildProcess> process_;
  bool paused_ = false;
};

}  // namespace sluice::testing
