#include "core/kv/kv.h"

#include <algorithm>
#include <charconv>

namespace queen {
namespace {

std::optional<int64_t> as_integer(const std::string& json) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(json.data(), json.data() + json.size(), v);
  if (ec != std::errc() || p != json.data() + json.size()) return std::nullopt;
  return v;
}

// The precondition of `expect` against the current row; empty when it holds.
std::string expect_fails(const std::optional<uint64_t>& expect, const std::optional<KvRow>& cur) {
  if (!expect) return {};
  if (*expect == 0) return cur ? "exists" : "";
  if (!cur) return "absent";
  return cur->version == *expect ? "" : "version";
}

}  // namespace

KvRowView kv_view(const std::string& key, const KvRow& row) {
  return KvRowView{key, row.value, row.version, row.expires_us, row.updated_us};
}

std::optional<KvRow> KvPlanner::lookup(const KvKey& key, int64_t now_us,
                                       const KvScratch* scratch) const {
  std::optional<KvRow> row;
  if (scratch) {
    if (auto it = scratch->writes.find(key); it != scratch->writes.end()) {
      row = it->second;
      return row && row->live(now_us) ? row : std::nullopt;
    }
  }
  if (auto it = overlay_.find(key); it != overlay_.end()) {
    row = it->second.first;
  } else if (const KvRow* r = store_.kv_row(key)) {
    row = *r;
  }
  return row && row->live(now_us) ? row : std::nullopt;
}

std::vector<std::pair<std::string, KvRow>> KvPlanner::scan(
    const std::string& ns, const std::string& prefix, const std::string& after, uint32_t limit,
    int64_t now_us, const KvScratch* scratch, bool* truncated) const {
  std::map<std::string, std::optional<KvRow>> merged;
  auto in_range = [&](const KvKey& k) {
    return k.first == ns && k.second.compare(0, prefix.size(), prefix) == 0 && k.second > after;
  };
  std::string start = std::max(prefix, after);
  size_t wanted = size_t{limit} + 1 + overlay_.size() + (scratch ? scratch->writes.size() : 0);
  for (auto it = store_.kv().lower_bound({ns, start}); it != store_.kv().end(); ++it) {
    if (it->first.first != ns || it->first.second.compare(0, prefix.size(), prefix) != 0) break;
    if (!in_range(it->first)) continue;
    merged[it->first.second] = it->second;
    if (merged.size() >= wanted) break;
  }
  for (const auto& [k, v] : overlay_)
    if (in_range(k)) merged[k.second] = v.first;
  if (scratch)
    for (const auto& [k, v] : scratch->writes)
      if (in_range(k)) merged[k.second] = v;
  std::vector<std::pair<std::string, KvRow>> out;
  *truncated = false;
  for (const auto& [k, v] : merged) {
    if (!v || !v->live(now_us)) continue;
    if (out.size() >= limit) {
      *truncated = true;
      break;
    }
    out.emplace_back(k, *v);
  }
  return out;
}

void KvPlanner::write(const KvKey& key, std::optional<KvRow> row, KvScratch* scratch) {
  if (row) {
    scratch->effects.push_back(EffKvPut{key.first, key.second, *row});
  } else {
    scratch->effects.push_back(EffKvDelete{key.first, key.second});
  }
  scratch->writes[key] = std::move(row);
}

KvResult KvPlanner::run_one(const KvOp& op, uint32_t index, int64_t now_us, KvScratch* scratch,
                            bool* lost) {
  KvResult res;
  res.index = index;
  res.op = op.op;
  res.row.key = op.key;
  KvKey key{op.ns, op.key};
  if (op.op == KvOpKind::get_many) {
    for (const auto& k : op.keys) {
      if (auto row = lookup({op.ns, k}, now_us, scratch)) {
        res.rows.push_back(kv_view(k, *row));
      } else {
        res.missing.push_back(k);
      }
    }
    res.applied = true;
    return res;
  }
  if (op.op == KvOpKind::get_prefix) {
    auto rows = scan(op.ns, op.prefix, op.after, std::min(op.limit, kPrefixLimitMax), now_us,
                     scratch, &res.truncated);
    for (auto& [k, row] : rows) {
      KvRowView v = kv_view(k, row);
      if (op.keys_only) v.value.clear();
      res.rows.push_back(std::move(v));
    }
    if (res.truncated && !rows.empty()) res.next_after = rows.back().first;
    res.applied = true;
    return res;
  }
  std::optional<KvRow> cur = lookup(key, now_us, scratch);
  std::optional<uint64_t> expect = op.op == KvOpKind::put_if_absent ? std::optional<uint64_t>(0)
                                                                     : op.expect;
  res.reason = expect_fails(expect, cur);
  if (op.op == KvOpKind::get || (op.op == KvOpKind::check && res.reason.empty())) {
    res.found = cur.has_value();
    if (cur) res.row = kv_view(op.key, *cur);
    res.applied = op.op == KvOpKind::check || res.found;
    return res;
  }
  if (op.op == KvOpKind::del && res.reason.empty() && !cur) res.reason = "absent";
  std::optional<int64_t> counter;
  if (op.op == KvOpKind::incr && res.reason.empty()) {
    int64_t base = 0;
    if (cur) {
      auto v = as_integer(cur->value);
      if (!v) res.reason = "type";
      base = v.value_or(0);
    }
    counter = base + op.delta;
    if (res.reason.empty() && ((op.min && *counter < *op.min) || (op.max && *counter > *op.max)))
      res.reason = "limit";
  }
  if (!res.reason.empty()) {
    if (cur) res.row = kv_view(op.key, *cur);
    *lost = op.required;
    return res;
  }
  res.applied = true;
  if (op.op == KvOpKind::check) return res;
  if (op.op == KvOpKind::del) {
    write(key, std::nullopt, scratch);
    return res;
  }
  KvRow row;
  row.version = mint_version();
  row.updated_us = now_us;
  row.value = counter ? std::to_string(*counter) : op.value;
  row.expires_us = op.forever ? 0 : now_us + op.ttl_s * 1'000'000;
  if (op.op == KvOpKind::incr && cur) row.expires_us = cur->expires_us;  // TTL set on create
  write(key, row, scratch);
  res.found = true;
  res.row = kv_view(op.key, row);
  return res;
}

KvReply KvPlanner::run(const std::vector<KvOp>& ops, int64_t now_us, KvScratch* scratch) {
  KvReply reply;
  for (uint32_t i = 0; i < ops.size(); ++i) {
    bool lost = false;
    KvResult r = run_one(ops[i], i, now_us, scratch, &lost);
    if (lost) {
      reply.ok = false;
      reply.failed_index = i;
      reply.kv_reason = r.reason;
      reply.failed_row = r.row;
      reply.results.clear();
      return reply;
    }
    reply.results.push_back(std::move(r));
  }
  return reply;
}

void KvPlanner::commit(KvScratch&& scratch, OpenEntry* open) {
  uint64_t idx = open->entry.index.value;
  for (auto& [k, v] : scratch.writes) overlay_[k] = {std::move(v), idx};
  for (auto& e : scratch.effects) open->entry.effects.push_back(std::move(e));
}

void KvPlanner::on_applied(const Entry& entry) {
  for (auto it = overlay_.begin(); it != overlay_.end();) {
    if (it->second.second <= entry.index.value) {
      it = overlay_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<Effect> KvPlanner::sweep(int64_t now_us, uint64_t entry_index) {
  std::vector<Effect> out;
  for (const auto& [at, k] : store_.kv_expiries()) {
    if (at > now_us || out.size() >= kSweepRowsMax) break;
    if (overlay_.contains(k)) continue;  // rewritten or already being swept
    out.push_back(EffKvDelete{k.first, k.second});
    overlay_[k] = {std::nullopt, entry_index};
  }
  return out;
}

}  // namespace queen
