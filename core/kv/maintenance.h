// The broker's maintenance switches, kept as one KV row (`queen-system`/`maintenance`) so they
// are logged, replicated and checkpointed like any write. Push maintenance: pushes are stored
// durably and answered `buffered`, and consumers see nothing created at or after `push_since_us`
// until it is switched off. Pop maintenance: every pop answers empty at once.
#pragma once

#include <cstdint>
#include <string>

#include "core/state/store.h"

namespace queen {

constexpr const char* kSystemNamespace = "queen-system";
constexpr const char* kMaintenanceKey = "maintenance";

struct Maintenance {
  bool push = false;
  bool pop = false;
  int64_t push_since_us = 0;  // when push maintenance was switched on
  bool operator==(const Maintenance&) const = default;
};

// The row's value, compact JSON: {"push":true,"pop":false,"pushSince":<us>}.
std::string encode_maintenance(const Maintenance& m);
// The switches a row holds; all off for no row or a value this module did not write.
Maintenance decode_maintenance(const KvRow* row);
// The switches as the store holds them now.
Maintenance maintenance_of(const Store& store);

}  // namespace queen
