// Long polls: pops that wait for messages, and their deadlines.
#include "core/node/node_impl.h"

namespace queen {

// -------------------------------------------------------------- pops
void NodeImpl::handle(ReplyHandle h, CommandEnvelope& env_cmd, PopCmd& cmd) {
  int64_t now_ms = env.now_ms();
  auto r = engine.pop(cmd, env.now_us());
  if (r.outcome == Engine::PopOutcome::error) {
    send(Parked{h, Reply{r.error}});
    return;
  }
  if (r.outcome == Engine::PopOutcome::delivered) {
    answer_after_checkpoint(h, Reply{std::move(r.reply)});
    return;
  }
  int64_t left_ms = env_cmd.deadline_ms - now_ms;
  int64_t stop_at =
      env_cmd.deadline_ms - std::min(kClaimMarginMsMax, std::max<int64_t>(0, left_ms / 4));
  stop_at = std::min(stop_at, env_cmd.deadline_ms - config.pop_reply_margin_ms);
  if (!cmd.wait || now_ms >= stop_at || polls.size() >= config.long_poll_waiters_max) {
    send(Parked{h, Reply{std::move(r.reply)}});
    return;
  }
  uint64_t seq = ++poll_seq;
  polls[seq] = LongPoll{h, cmd, stop_at};
  polls_by_queue[cmd.queue].insert(seq);
  poll_of_handle[h] = seq;
  poll_deadlines.insert({stop_at, seq});
}

void NodeImpl::drop_poll(uint64_t seq) {
  auto it = polls.find(seq);
  if (it == polls.end()) return;
  auto& set = polls_by_queue[it->second.cmd.queue];
  set.erase(seq);
  if (set.empty()) polls_by_queue.erase(it->second.cmd.queue);
  poll_of_handle.erase(it->second.handle);
  poll_deadlines.erase({it->second.stop_at_ms, seq});
  polls.erase(it);
}

void NodeImpl::serve_polls(const std::string& queue) {
  auto qit = polls_by_queue.find(queue);
  if (qit == polls_by_queue.end()) return;
  std::vector<uint64_t> seqs(qit->second.begin(), qit->second.end());
  for (uint64_t seq : seqs) {
    LongPoll& lp = polls.at(seq);
    auto r = engine.pop(lp.cmd, env.now_us());
    if (r.outcome == Engine::PopOutcome::empty) continue;
    ReplyHandle h = lp.handle;
    drop_poll(seq);
    if (r.outcome == Engine::PopOutcome::error) {
      send(Parked{h, Reply{r.error}});
    } else {
      answer_after_checkpoint(h, Reply{std::move(r.reply)});
    }
  }
}

void NodeImpl::expire_polls(int64_t now_ms) {
  while (!poll_deadlines.empty() && poll_deadlines.begin()->first <= now_ms) {
    uint64_t seq = poll_deadlines.begin()->second;
    LongPoll lp = polls.at(seq);
    drop_poll(seq);
    PopReply empty;
    empty.queue = lp.cmd.queue;
    empty.group = lp.cmd.group;
    empty.empty_reason = "timeout";
    send(Parked{lp.handle, Reply{std::move(empty)}});
  }
}

}  // namespace queen
