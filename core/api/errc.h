// The error codes the core answers with (ErrorReply::code). They say what went wrong in the
// broker's own terms; the edge maps each to an HTTP status and the reference's code string
// in one table (server/api/render.cpp), so nothing in the core reasons in HTTP.
//
// Contract: values are stable (they travel in forwarded replies); `errc_last` is the last one,
// so a decoder refuses a byte past it.
#pragma once

#include <cstdint>

namespace queen::api {

enum class Errc : uint8_t {
  internal,         // the node failed a request it should have served
  bad_request,      // the request names something impossible (a forwarded body undecodable)
  not_found,        // the message, trace or row it names is not there
  queue_not_found,  // the queue it names does not exist
  no_leader,        // no leader is known yet: retry
  not_leader,       // this node cannot serve it now (not the leader, settling, changed): retry
  outcome_unknown,  // a logged write's fate is unknown (its leader changed): look before retrying
  timeout,          // the deadline passed before the node answered
  overloaded,       // a queue or budget is full: retry later
  storage_full,     // the disk gate refuses writes that grow storage
  encryption_unavailable,  // a queue seals its payloads and this node cannot: nothing stored
};
constexpr Errc kErrcLast = Errc::encryption_unavailable;
// For the binary walk (core/api/binary.h), found by argument-dependent lookup.
constexpr Errc enum_last(Errc) {
  return kErrcLast;
}

// The request was refused for what it says and changed nothing: sending it again as it is
// cannot succeed. The others may succeed on a retry.
constexpr bool is_refusal(Errc e) {
  return e == Errc::bad_request || e == Errc::not_found || e == Errc::queue_not_found;
}

// The node asks the client to send the same request again (to it or to the leader it names).
constexpr bool is_retry(Errc e) {
  return e == Errc::no_leader || e == Errc::not_leader;
}

}  // namespace queen::api
