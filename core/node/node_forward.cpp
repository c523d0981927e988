// A follower's forwarding of client commands (NodeConfig::forward_commands): a command this
// node cannot serve goes to the leader under its request id (output::Forward), and again under
// the same id after a retry answer, a failed stream or a change of leader, until its
// deadline; the leader's answer is the client's. A logged or consuming command whose last
// attempt may have been applied, and whose deadline came first, is answered outcome_unknown.
// Once this node leads, a held command is served here (a retry under its id).
#include "core/node/node_impl.h"

namespace queen {

namespace {

void look_up_each(std::vector<PushItem>& items) {
  for (PushItem& item : items) item.txn_minted = false;
}

// A forwarded command may be planned more than once (an attempt after a lost answer or a
// change of leader), so no transactionId in it is taken as new: each is looked up.
void look_up_every_transaction_id(Command& c) {
  if (auto* push = std::get_if<PushCmd>(&c)) look_up_each(push->items);
  if (auto* txn = std::get_if<TxnCmd>(&c))
    for (TxnOperation& op : txn->operations) look_up_each(op.items);
}

}  // namespace

bool NodeImpl::forwards_it(const CommandEnvelope& c, const CommandTraits& traits) const {
  return cluster && config.forward_commands && !c.forwarded && !traits.any_node &&
         !cluster->writable;
}

void NodeImpl::start_forward(ReplyHandle h, CommandEnvelope c) {
  if (forwards.size() >= config.forwards_max) {
    send(Parked{
        h, error_reply(api::Errc::overloaded, "this node forwards too many commands already", 1)});
    return;
  }
  if (c.deadline_ms <= 0) c.deadline_ms = env.now_ms() + config.forward_timeout_ms;
  look_up_every_transaction_id(c.command);
  if (next_forward_id == 0) next_forward_id = (env.random_u64() >> 1) | 1;
  Forward& f = forwards[h];
  f.handle = h;
  f.envelope = std::make_shared<const CommandEnvelope>(std::move(c));
  f.last = not_serving_reply();
  try_forward(f);
  arm_forward_timer();
}

void NodeImpl::try_forward(Forward& f) {
  int64_t now_ms = env.now_ms();
  int64_t left_ms = f.envelope->deadline_ms - now_ms;
  if (left_ms <= kForwardReplyMarginMs || f.attempts >= kForwardAttemptsMax)
    return give_up_forward(f);
  uint64_t leader = leader_id();
  if (leader == config.node_id && cluster->writable && !handing_over) {
    // This node leads now: served here, as a retry under the same request id.
    if (f.attempts > 0) ++stats.forward_retries;
    CommandEnvelope c = *f.envelope;
    c.forwarded = true;
    ReplyHandle h = f.handle;
    end_forward(h, std::nullopt);
    serve_command(*this, h, std::move(c));
    return;
  }
  if (leader == 0 || leader == config.node_id) {
    f.retry_at_ms = now_ms + config.forward_retry_ms;
    return;
  }
  if (f.attempts > 0) {
    ++stats.forward_retries;
    if (config.mutants.forward_fresh_request_id) {
      auto fresh = std::make_shared<CommandEnvelope>(*f.envelope);
      fresh->request_id = RequestId{make_uuid_v7(env.now_ms(), env.random_u64(), env.random_u64())};
      f.envelope = std::move(fresh);
    }
  }
  ++f.attempts;
  ++stats.forwarded;
  f.leader = leader;
  f.attempt = next_forward_id++;
  forward_attempts[f.attempt] = f.handle;
  out.forward(leader, f.attempt, f.envelope, left_ms - kForwardReplyMarginMs);
}

void NodeImpl::on_forward_reply(uint64_t id, std::optional<Reply> reply) {
  auto at = forward_attempts.find(id);
  if (at == forward_attempts.end()) return;  // abandoned, or meant for an earlier run
  ReplyHandle h = at->second;
  forward_attempts.erase(at);
  Forward& f = forwards.at(h);
  uint64_t was_at = f.leader;
  f.leader = 0;
  f.attempt = 0;
  f.retry_at_ms = env.now_ms() + config.forward_retry_ms;
  if (!reply) return;  // the stream failed: try again shortly
  const auto* e = std::get_if<ErrorReply>(&reply->body);
  if (!e || !api::is_retry(e->code)) return end_forward(h, std::move(*reply));
  uint64_t hint = e->leader;
  f.last = std::move(*reply);
  // The node it reached named another leader: go there at once.
  if (hint != 0 && hint != was_at && hint != config.node_id) try_forward(f);
}

// Every forward_retry_ms while commands are held: retries that are due, commands past their
// deadline, and attempts waiting at a node that no longer leads (they follow the new one).
void NodeImpl::forward_tick() {
  forward_armed = false;
  int64_t now_ms = env.now_ms();
  uint64_t leader = leader_id();
  std::vector<ReplyHandle> due;
  for (const auto& [h, f] : forwards) {
    bool moved = f.leader != 0 && leader != 0 && leader != f.leader;
    if ((f.leader == 0 && now_ms >= f.retry_at_ms) || moved ||
        f.envelope->deadline_ms - now_ms <= kForwardReplyMarginMs)
      due.push_back(h);
  }
  for (ReplyHandle h : due) {
    auto it = forwards.find(h);
    if (it == forwards.end()) continue;
    Forward& f = it->second;
    if (f.attempt != 0) forward_attempts.erase(f.attempt);
    f.attempt = 0;
    f.leader = 0;
    try_forward(f);
  }
  arm_forward_timer();
}

void NodeImpl::arm_forward_timer() {
  if (forward_armed || forwards.empty()) return;
  forward_armed = true;
  out.set_timer(kForwardTimer, config.forward_retry_ms);
}

void NodeImpl::give_up_forward(Forward& f) {
  CommandTraits traits = traits_of(f.envelope->command);
  bool may_have_applied = f.attempts > 0 && (traits.logged || traits.consumes);
  if (!may_have_applied) return end_forward(f.handle, f.last);
  ++stats.forward_unknown;
  end_forward(f.handle, error_reply(api::Errc::outcome_unknown,
                                    "the leader did not answer before the deadline; the request "
                                    "may have been applied",
                                    1));
}

void NodeImpl::end_forward(ReplyHandle h, std::optional<Reply> reply) {
  auto it = forwards.find(h);
  QUEEN_ASSERT(it != forwards.end(), "end_forward: handle %llu is not forwarded",
               static_cast<unsigned long long>(h));
  if (it->second.attempt != 0) forward_attempts.erase(it->second.attempt);
  forwards.erase(it);
  if (reply) send(Parked{h, std::move(*reply)});
}

bool NodeImpl::cancel_forward(ReplyHandle h) {
  if (forwards.count(h) == 0) return false;
  end_forward(h, std::nullopt);
  return true;
}

}  // namespace queen
