#include "core/kv/maintenance.h"

#include <charconv>

namespace queen {
namespace {

bool flag(const std::string& value, const std::string& name) {
  return value.find("\"" + name + "\":true") != std::string::npos;
}

int64_t number(const std::string& value, const std::string& name) {
  std::string tag = "\"" + name + "\":";
  size_t at = value.find(tag);
  if (at == std::string::npos) return 0;
  int64_t v = 0;
  std::from_chars(value.data() + at + tag.size(), value.data() + value.size(), v);
  return v;
}

}  // namespace

std::string encode_maintenance(const Maintenance& m) {
  return std::string("{\"push\":") + (m.push ? "true" : "false") +
         ",\"pop\":" + (m.pop ? "true" : "false") +
         ",\"pushSince\":" + std::to_string(m.push_since_us) + "}";
}

Maintenance decode_maintenance(const KvRow* row) {
  Maintenance m;
  if (row == nullptr) return m;
  m.push = flag(row->value, "push");
  m.pop = flag(row->value, "pop");
  m.push_since_us = m.push ? number(row->value, "pushSince") : 0;
  return m;
}

Maintenance maintenance_of(const Store& store) {
  return decode_maintenance(store.kv_row(KvKey{kSystemNamespace, kMaintenanceKey}));
}

}  // namespace queen
