#include "core/node/outcome.h"

#include "core/common/bytes.h"

namespace queen {
namespace {

constexpr uint8_t kPushOutcome = 1;

}  // namespace

std::string encode_outcome(const Reply& reply) {
  const auto* push = std::get_if<PushReply>(&reply.body);
  if (!push || push->refused) return {};
  Bytes out;
  ByteWriter w(&out);
  w.u8(kPushOutcome);
  w.u32(static_cast<uint32_t>(push->results.size()));
  for (const PushResult& r : push->results) {
    w.u8(static_cast<uint8_t>(r.status));
    w.uuid(r.message_id);
    w.u64(r.partition_id.value);
    w.u64(r.offset.value);
    if (r.status == PushStatus::error) w.str(r.error);
  }
  return std::string(out.begin(), out.end());
}

std::optional<Reply> decode_outcome(const std::string& bytes) {
  ByteReader r(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (r.u8() != kPushOutcome) return std::nullopt;
  PushReply push;
  uint32_t n = r.count(33);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    PushResult x;
    x.index = i;
    uint8_t status = r.u8();
    if (status > static_cast<uint8_t>(PushStatus::error)) return std::nullopt;
    x.status = static_cast<PushStatus>(status);
    x.message_id = r.uuid();
    x.partition_id = PartitionId(r.u64());
    x.offset = Offset(r.u64());
    if (x.status == PushStatus::error) x.error = r.str();
    push.results.push_back(std::move(x));
  }
  if (!r.ok() || r.left() != 0) return std::nullopt;
  return Reply{std::move(push)};
}

void fill_outcome_names(const PushCmd& retried, Reply* reply) {
  auto* push = std::get_if<PushReply>(&reply->body);
  if (!push) return;
  for (PushResult& r : push->results) {
    if (!r.queue.empty() || r.index >= retried.items.size()) continue;
    const PushItem& item = retried.items[r.index];
    r.transaction_id = item.transaction_id;
    r.queue = item.queue;
    r.partition = item.partition;
  }
}

}  // namespace queen
