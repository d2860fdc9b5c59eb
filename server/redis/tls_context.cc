#include "server/redis/tls_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/logging.h"

namespace sluice {
namespace {

bool IsIpLiteral(const std::string& host) {
  in6_addr v6;
  in_addr v4;
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace

std::string TakeSslErrors(absl::string_view fallback) {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    // "error:0A000086:SSL routines::certificate verify failed": the reason is what reads well.
    const char* reason = ERR_reason_error_string(code);
    absl::StrAppend(&text, text.empty() ? "" : "; ", reason != nullptr ? reason : buf);
  }
  return text.empty() ? std::string(fallback) : text;
}

absl::StatusOr<std::shared_ptr<TlsClientContext>> TlsClientContext::Create(
    RedisTlsOptions options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("redis TLS: a client certificate needs its key, and a key "
                                      "its certificate");
  }
  std::shared_ptr<TlsClientContext> context(new TlsClientContext(std::move(options)));
  absl::StatusOr<SSL_CTX*> ctx = context->Build();
  if (!ctx.ok()) {
    return ctx.status();
  }
  MutexLock lock(context->mu_);
  context->ctx_ = *ctx;
  context->stamps_ = context->Stamps();
  context->next_look_ = absl::Now() + context->options_.reload_interval;
  return context;
}

TlsClientContext::TlsClientContext(RedisTlsOptions options) : options_(std::move(options)) {}

TlsClientContext::~TlsClientContext() {
  MutexLock lock(mu_);
  SSL_CTX_free(ctx_);
}

absl::StatusOr<SSL_CTX*> TlsClientContext::Build() const {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("redis TLS: ", TakeSslErrors("cannot make an OpenSSL context")));
  }
  auto fail = [ctx](std::string what) {
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(
        absl::StrCat("redis TLS: ", what, ": ", TakeSslErrors("unknown OpenSSL error")));
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // The output buffer may grow (and move) between a write the socket refused and its retry, and
  // a write may take only part of the buffer: the connection writes what it can. (Not
  // SSL_MODE_RELEASE_BUFFERS: a connection is busy, and it would free and allocate the
  // buffers at every record.)
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read what the socket holds in one read (not a record's header, then its body): the stream
  // then drains what the session holds before it waits for the socket again.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // As upstream: the given CAs are trusted besides the system's.
  SSL_CTX_set_default_verify_paths(ctx);
  if (!options_.ca_file.empty() &&
      SSL_CTX_load_verify_locations(ctx, options_.ca_file.c_str(), nullptr) != 1) {
    return fail(absl::StrCat("cannot read the CA certificates ", options_.ca_file));
  }
  if (!options_.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options_.cert_file.c_str()) != 1) {
      return fail(absl::StrCat("cannot read the client certificate ", options_.cert_file));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options_.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail(absl::StrCat("cannot use the client key ", options_.key_file, " with ",
                               options_.cert_file));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return fail(absl::StrCat("the client key ", options_.key_file, " does not match ",
                               options_.cert_file));
    }
  }
  return ctx;
}

std::string TlsClientContext::Stamps() const {
  std::string stamps;
  for (const std::string* path : {&options_.ca_file, &options_.cert_file, &options_.key_file}) {
    struct stat st {};
    if (path->empty() || stat(path->c_str(), &st) != 0) {
      absl::StrAppend(&stamps, "-;");
      continue;
    }
    absl::StrAppend(&stamps, st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                    st.st_mtim.tv_nsec, ";");
  }
  return stamps;
}

void TlsClientContext::MaybeReload() {
  const absl::Time now = absl::Now();
  if (now < next_look_) {
    return;
  }
  next_look_ = now + options_.reload_interval;
  std::string stamps = Stamps();
  if (stamps == stamps_) {
    return;
  }
  absl::StatusOr<SSL_CTX*> ctx = Build();
  if (!ctx.ok()) {
    // Perhaps caught mid-rotation (the certificate written, not yet its key): keep what works
    // and look again next time.
    SLUICE_LOG_EVERY_SECONDS(WARNING, 60)
        << ctx.status().message() << " (after a change; the previous files stay in use)";
    return;
  }
  SSL_CTX_free(ctx_);  // sessions made from it hold their own reference
  ctx_ = *ctx;
  stamps_ = std::move(stamps);
  ++reloads_;
  SLUICE_LOG(INFO) << "redis TLS: certificates re-read after a change";
}

absl::StatusOr<SslPtr> TlsClientContext::NewSession(absl::string_view host) {
  SslPtr ssl;
  {
    MutexLock lock(mu_);
    MaybeReload();
    ssl.reset(SSL_new(ctx_));
  }
  if (ssl == nullptr) {
    return absl::InternalError(
        absl::StrCat("redis TLS: ", TakeSslErrors("cannot make an OpenSSL session")));
  }
  const std::string name = options_.server_name.empty() ? std::string(host) : options_.server_name;
  const bool ip = IsIpLiteral(name);
  // SNI carries host names only (RFC 6066).
  if (!ip && !name.empty() && SSL_set_tlsext_host_name(ssl.get(), name.c_str()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis TLS: cannot send the server name ", name, ": ",
                     TakeSslErrors("rejected by OpenSSL")));
  }
  if (!options_.skip_hostname_verification) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (set != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis TLS: cannot check the server name ", name, ": ",
                       TakeSslErrors("rejected by OpenSSL")));
    }
  }
  return ssl;
}

int TlsClientContext::reloads() const {
  MutexLock lock(mu_);
  return reloads_;
}

}  // namespace sluice
