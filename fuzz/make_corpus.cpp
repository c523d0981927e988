// Writes the seed corpora of the fuzz targets: well-formed records, entries, Raft messages
// and small log folders, so the fuzzers start from the shapes the decoders accept.
#include <cstdio>
#include <string>

#include "core/api/command_codec.h"
#include "core/qlog/log.h"
#include "core/qlog/record.h"
#include "core/raft/raft.h"

using namespace queen;

static void write(const std::string& path, const Bytes& b) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

static Entry sample(uint64_t index) {
  Entry e;
  e.index = LogIndex(index);
  e.term = Term(1);
  e.now_us = 1000 + index;
  e.effects.push_back(EffCreateQueue{QueueId(1), "q", QueueOptions{}});
  e.effects.push_back(EffCreatePartition{PartitionId(1), QueueId(1), "Default"});
  EffAppend a;
  a.pid = PartitionId(1);
  a.queue = QueueId(1);
  a.count = 1;
  a.hashes = {Hash128{1, 2}};
  a.frames = {MessageFrame{Uuid{}, "t", "", "{\"x\":1}"}};
  e.effects.push_back(a);
  return e;
}

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "fuzz/corpus";
  Entry e = sample(1);
  Bytes body = encode_entry(e);
  write(dir + "/record_fuzz/entry_body", body);
  Bytes rec;
  encode_record(RecordHeader{1, 1, 0, 0, 5, RecordKind::entry}, body.data(), body.size(), &rec);
  write(dir + "/record_fuzz/entry_record", rec);
  Bytes frames = encode_frames(std::get<EffAppend>(e.effects[2]));
  Bytes msg;
  encode_record(RecordHeader{1, 1, 0, 1, 5, RecordKind::message}, frames.data(), frames.size(),
                &msg);
  write(dir + "/record_fuzz/message_record", msg);
  raft::Message m;
  m.type = raft::MsgType::append;
  m.from = NodeId(1);
  m.to = NodeId(2);
  m.term = Term(2);
  m.entries = {raft::LogEntry{LogIndex(1), Term(2), body}};
  write(dir + "/raft_message_fuzz/append", raft::encode_message(m));
  m.type = raft::MsgType::vote;
  m.entries.clear();
  write(dir + "/raft_message_fuzz/vote", raft::encode_message(m));
  // A forwarded push and transaction, and a reply.
  ForwardedCommand push;
  PushItem item;
  item.queue = "q";
  item.payload = "{\"x\":1}";
  push.command = PushCmd{{item}};
  write(dir + "/raft_message_fuzz/forwarded_push", encode_command(push));
  ForwardedCommand txn;
  TxnCmd t;
  t.operations.resize(2);
  t.operations[0].is_ack = true;
  t.operations[1].items = {item};
  t.kv.resize(1);
  txn.command = t;
  write(dir + "/raft_message_fuzz/forwarded_txn", encode_command(txn));
  PopReply pop;
  pop.messages.resize(2);
  write(dir + "/raft_message_fuzz/forwarded_reply", encode_reply(Reply{pop}));
  // A recovery input: the system log and queue logs concatenated as the target splits them.
  Bytes logs = msg;
  logs.insert(logs.end(), rec.begin(), rec.end());
  write(dir + "/recovery_fuzz/one_entry", logs);
  return 0;
}
