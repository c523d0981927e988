// Result<T>: the channel for expected errors in core/. No exception crosses core/; an
// error is an Errc plus a message naming what was wrong (a field, a file, an offset).
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "core/common/assert.h"

namespace queen {

enum class Errc {
  ok = 0,
  corrupt,    // a record failed its checksum or its framing
  truncated,  // fewer bytes than a record says it has
  io,         // the environment failed a disk call
  not_found,
  bad_request,
  invalid_lease,
  unavailable,  // the environment cannot do it (e.g. no encryption key)
};

struct Error {
  Errc code = Errc::ok;
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {
    QUEEN_ASSERT(std::get<Error>(v_).code != Errc::ok, "error result with Errc::ok");
  }
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    QUEEN_ASSERT(ok(), "value() of an error result");
    return std::get<T>(v_);
  }
  const T& value() const {
    QUEEN_ASSERT(ok(), "value() of an error result");
    return std::get<T>(v_);
  }
  const Error& error() const {
    QUEEN_ASSERT(!ok(), "error() of an ok result");
    return std::get<Error>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() {
  return Unit{};
}
inline Error make_error(Errc code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace queen
