// Turns domain descriptions (config_description.h), from any source, into the Config the
// decision path reads: checks every domain, descriptor and rule, builds the descriptor trees
// (exact values, wildcards in declaration order, defaults), refuses duplicates, merges the
// descriptions of one domain under merge_domains, and collects the warnings. This is the one
// place that decides what a valid configuration is; sources only read.
//
// Every error is kInvalidArgument "<source>:<line>: <field path>: <what is wrong>" (see
// config_description.h), e.g. "limits/api.yaml:12: descriptors[0].rate_limit.unit: invalid unit
// 'fortnight' (expected second, minute, hour, day, week, month or year)". The first problem
// stops the validation, whether the validator found it or the source recorded it.
//
// A ConfigValidator is used by one thread at a time; ValidateConfig is safe from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/config/config.h"
#include "server/config/config_description.h"

namespace sluice {

struct ValidateOptions {
  // Several descriptions may name one domain; their descriptors are merged (a descriptor given
  // twice is still an error, naming both places) and they may set failure_mode once, or alike.
  // envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG. Otherwise a second description of a domain is
  // an error naming the first.
  bool merge_domains = false;
  // For the sources that read into descriptions (xds_config_reader.h): refuse what they would
  // otherwise take with a warning, as envoyproxy/ratelimit takes it (an unknown key in
  // metadata.sluice). --strict_config. (Files: ConfigLoadOptions::strict.)
  bool strict = false;
  // The backend keeps fixed windows only (memcached, whose one atomic operation is an
  // increment): a rule of another algorithm is refused, naming its file, line and algorithm
  // and why. Empty: every algorithm. Otherwise the backend's name, for the message.
  std::string fixed_windows_only{};
};

// Builds one Config from descriptions added one at a time, so that a source can read, and have
// checked, one domain before reading the next (a file's errors then come before the next file's
// syntax errors, and only one domain's description is held at a time).
class ConfigValidator {
 public:
  explicit ConfigValidator(const ValidateOptions& options = {});
  ConfigValidator(const ConfigValidator&) = delete;
  ConfigValidator& operator=(const ConfigValidator&) = delete;

  // Checks `domain` and adds it to the Config being built; moves its strings out. After an
  // error the Config being built is incomplete: do not call Finish.
  absl::Status AddDomain(DomainDescription domain);

  // The Config of every domain added, with their warnings (Config::warnings), in the order the
  // domains were added. REQUIRES: every AddDomain returned OK; called once.
  std::unique_ptr<Config> Finish();

 private:
  ValidateOptions options_;
  std::unique_ptr<Config> config_;
};

// Adds every domain of `description` in order (see ConfigValidator); an empty description gives
// an empty Config.
absl::StatusOr<std::unique_ptr<Config>> ValidateConfig(ConfigDescription description,
                                                       const ValidateOptions& options = {});

}  // namespace sluice
