// The OpenSSL client context every TLS connection to one Redis target is made from: the trusted
// CAs, the client certificate, the verification rules of RedisTlsOptions. The files are read at
// Create (a missing or bad file fails the start, naming it) and looked at again for a change at
// most once per reload_interval when a connection is made, so a rotated client certificate or CA
// is used by the next connection. A change that cannot be read (a half-written key) keeps the
// context in force, logged; the next look tries again.
//
// Thread-safe: the connections of every loop thread make their sessions from one context.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/mutex.h"
#include "server/redis/tls_options.h"

namespace sluice {

struct SslDeleter {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslDeleter>;

class TlsClientContext {
 public:
  // REQUIRES: options.enabled.
  static absl::StatusOr<std::shared_ptr<TlsClientContext>> Create(RedisTlsOptions options);

  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  // A client session for a connection to `host` (a name or an IP literal, as connected to): SNI
  // and the name the certificate must carry are options.server_name, else `host`.
  absl::StatusOr<SslPtr> NewSession(absl::string_view host) ABSL_LOCKS_EXCLUDED(mu_);

  // Times the files were read again after a change (for tests and logs).
  int reloads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit TlsClientContext(RedisTlsOptions options);
  // Builds an SSL_CTX from the files as they are now.
  absl::StatusOr<SSL_CTX*> Build() const;
  // The files' stamps now; equal stamps mean unchanged files.
  std::string Stamps() const;
  void MaybeReload() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisTlsOptions options_;
  mutable Mutex mu_;
  SSL_CTX* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string stamps_ ABSL_GUARDED_BY(mu_);
  absl::Time next_look_ ABSL_GUARDED_BY(mu_);
  int reloads_ ABSL_GUARDED_BY(mu_) = 0;
};

// OpenSSL's error queue as one line (and cleared), e.g. "certificate verify failed"; `fallback`
// when the queue is empty.
std::string TakeSslErrors(absl::string_view fallback);

}  // namespace sluice
