#include "core/kv/locks.h"

#include <charconv>
#include <cstdio>

namespace queen {

std::string lock_key(const std::string& name, uint32_t slot) {
  return name + "#" + std::to_string(slot);
}

std::string lock_value(const std::string& owner, int64_t now_us) {
  std::string out = "{\"owner\":\"";
  for (unsigned char c : owner) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "\",\"acquiredAt\":" + std::to_string(now_us / 1000) + "}";
  return out;
}

std::string lock_owner(const std::string& value) {
  const std::string head = "{\"owner\":\"";
  if (value.compare(0, head.size(), head) != 0) return {};
  std::string out;
  for (size_t i = head.size(); i < value.size(); ++i) {
    char c = value[i];
    if (c == '"') break;
    if (c == '\\' && i + 1 < value.size()) {
      char n = value[++i];
      if (n == 'u' && i + 4 < value.size()) {
        unsigned code = 0;
        std::from_chars(value.data() + i + 1, value.data() + i + 5, code, 16);
        out += static_cast<char>(code);
        i += 4;
      } else {
        out += n;
      }
      continue;
    }
    out += c;
  }
  return out;
}

// The acquiredAt (ms) a permit row's value records, or 0.
static int64_t lock_acquired_ms(const std::string& value) {
  const std::string tag = "\"acquiredAt\":";
  size_t at = value.rfind(tag);
  if (at == std::string::npos) return 0;
  int64_t ms = 0;
  const char* first = value.data() + at + tag.size();
  std::from_chars(first, value.data() + value.size(), ms);
  return ms;
}

std::vector<LockHolder> LockPlanner::holders(const std::string& name, int64_t now_us,
                                             const KvScratch* scratch) {
  bool truncated = false;
  auto rows = kv_.scan(kLocksNamespace, name + "#", "", kLockSlotsMax, now_us, scratch,
                       &truncated);
  std::vector<LockHolder> out;
  for (const auto& [key, row] : rows) {
    uint32_t slot = 0;
    const char* first = key.data() + name.size() + 1;
    const char* last = key.data() + key.size();
    auto [p, ec] = std::from_chars(first, last, slot);
    if (ec != std::errc() || p != last) continue;  // not a permit row
    out.push_back(LockHolder{slot, lock_owner(row.value), row.version, row.expires_us,
                             lock_acquired_ms(row.value) * 1000, row.updated_us});
  }
  return out;
}

LockResult LockPlanner::acquire(const LockOp& op, int64_t now_us, KvScratch* scratch) {
  LockResult res;
  res.name = op.name;
  res.owner = op.owner;
  uint32_t limit = std::max<uint32_t>(1, op.limit);
  std::optional<uint32_t> free_slot;
  for (uint32_t slot = 0; slot < limit; ++slot) {
    auto row = kv_.lookup({kLocksNamespace, lock_key(op.name, slot)}, now_us, scratch);
    if (!row) {
      if (!free_slot) free_slot = slot;
      continue;
    }
    if (lock_owner(row->value) == op.owner) {  // the same permit, acquired again
      res.ok = res.already = true;
      res.slot = slot;
      res.token = row->version;
      res.expires_us = row->expires_us;
      return res;
    }
  }
  if (!free_slot) {
    res.reason = "held";  // every permit is taken
    res.holders = holders(op.name, now_us, scratch);
    return res;
  }
  KvRow row;
  row.version = kv_.mint_version();
  row.updated_us = now_us;
  row.value = lock_value(op.owner, now_us);
  row.expires_us = now_us + std::max<int64_t>(1, op.ttl_s) * 1'000'000;
  kv_.write({kLocksNamespace, lock_key(op.name, *free_slot)}, row, scratch);
  res.ok = true;
  res.slot = *free_slot;
  res.token = row.version;
  res.expires_us = row.expires_us;
  return res;
}

LockResult LockPlanner::renew(const LockOp& op, int64_t now_us, KvScratch* scratch) {
  LockResult res;
  res.name = op.name;
  res.owner = op.owner;
  for (const LockHolder& h : holders(op.name, now_us, scratch)) {
    if (h.token != op.token || (op.slot && *op.slot != h.slot)) continue;
    if (!op.owner.empty() && op.owner != h.owner) break;
    KvRow row;
    row.version = kv_.mint_version();
    row.updated_us = now_us;
    row.value = lock_value(h.owner, now_us);
    row.expires_us = now_us + std::max<int64_t>(1, op.ttl_s) * 1'000'000;
    kv_.write({kLocksNamespace, lock_key(op.name, h.slot)}, row, scratch);
    res.ok = true;
    res.slot = h.slot;
    res.token = row.version;
    res.owner = h.owner;
    res.expires_us = row.expires_us;
    return res;
  }
  res.reason = "lost";  // expired, released, or taken over: the token no longer holds
  res.holders = holders(op.name, now_us, scratch);
  return res;
}

LockResult LockPlanner::release(const LockOp& op, int64_t now_us, KvScratch* scratch) {
  LockResult res;
  res.name = op.name;
  for (const LockHolder& h : holders(op.name, now_us, scratch)) {
    if (h.token != op.token || (op.slot && *op.slot != h.slot)) continue;
    kv_.write({kLocksNamespace, lock_key(op.name, h.slot)}, std::nullopt, scratch);
    res.ok = true;
    res.slot = h.slot;
    res.token = h.token;
    res.owner = h.owner;
    return res;
  }
  res.reason = "lost";
  res.holders = holders(op.name, now_us, scratch);
  return res;
}

LockReply LockPlanner::run(const LockCmd& cmd, int64_t now_us, KvScratch* scratch) {
  LockReply reply;
  for (uint32_t i = 0; i < cmd.ops.size(); ++i) {
    const LockOp& op = cmd.ops[i];
    LockResult r;
    switch (op.op) {
      case LockOpKind::acquire: r = acquire(op, now_us, scratch); break;
      case LockOpKind::renew: r = renew(op, now_us, scratch); break;
      case LockOpKind::release: r = release(op, now_us, scratch); break;
      case LockOpKind::get:
        r.name = op.name;
        r.holders = holders(op.name, now_us, scratch);
        r.ok = !r.holders.empty();  // held
        break;
    }
    r.index = i;
    r.op = op.op;
    reply.results.push_back(std::move(r));
  }
  return reply;
}

}  // namespace queen
