// Which memcached server holds a key: envoyproxy/ratelimit's client (bradfitz/gomemcache at the
// version upstream pins, selector.go ServerList.PickServer) takes the CRC-32 (IEEE) of the key's
// first 256 bytes, modulo the number of servers, over the servers in the order they were given
// (MEMCACHE_HOST_PORT's, or the sorted SRV targets). Sluice places keys the same way, so that
// during a migration a key lives on one server for replicas of both. A server listed twice
// weighs twice, as upstream's.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace sluice {

// CRC-32 as Go's hash/crc32.ChecksumIEEE (and zlib's crc32) computes it.
uint32_t Crc32Ieee(absl::string_view data);

// The index, among `servers` servers, of the one holding `key`. REQUIRES: servers > 0.
size_t PickServer(absl::string_view key, size_t servers);

}  // namespace sluice
