// Fuzz target: the qlog record, entry and frame decoders and the request-outcome decoder on
// arbitrary bytes. They must never
// crash or read out of bounds, and a record they accept must re-encode to the same bytes
// (so no corrupt record is silently accepted as something else).
#include <cstddef>
#include <cstdint>

#include "core/common/assert.h"
#include "core/node/outcome.h"
#include "core/qlog/record.h"
#include "core/state/entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace queen;
  auto rec = decode_record(data, size);
  if (rec.ok()) {
    const RecordView& v = rec.value();
    Bytes again;
    encode_record(v.header, v.body, v.body_size, &again);
    QUEEN_ASSERT(again.size() == v.total_size, "re-encoded size differs");
    QUEEN_ASSERT(std::equal(again.begin(), again.end(), data), "re-encoded bytes differ");
  }
  auto entry = decode_entry(data, size);
  if (entry.ok()) {
    Bytes again = encode_entry(entry.value());
    auto twice = decode_entry(again.data(), again.size());
    QUEEN_ASSERT(twice.ok() && twice.value() == entry.value(), "entry does not round-trip");
  }
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (auto outcome = decode_outcome(bytes)) {
    // An accepted outcome re-encodes and decodes to an answer of the same kind.
    auto again = decode_outcome(encode_outcome(*outcome));
    QUEEN_ASSERT(!encode_outcome(*outcome).empty() && again.has_value() &&
                     again->body.index() == outcome->body.index(),
                 "outcome does not round-trip");
  }
  if (size >= 4) {
    EffAppend a;
    a.count = data[0] % 16;
    (void)decode_frames(data + 1, size - 1, &a);
  }
  return 0;
}
