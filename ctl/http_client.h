// queenctl's one connection to a node: blocking HTTP/1.1 over Boost.Beast, kept alive across
// requests and opened again once when the node closed it.
//
// Contract:
// - The base URL is http://host[:port] (default port 6632); https is refused with a message
//   (put a TLS-terminating proxy in front, as the broker itself serves plain HTTP).
// - Every request carries `Authorization: Bearer <token>` when a token is set.
// - A transport failure (refused, reset, timed out after timeout_ms) is an error value with
//   its reason, never an exception past this module.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace queen::ctl {

struct Url {
  std::string host;
  std::string port;
};
// nullopt with `error` set when `text` is not an http:// URL.
std::optional<Url> parse_url(const std::string& text, std::string* error);

struct Response {
  int status = 0;  // 0: no answer (see error)
  std::string body;
  std::string error;  // the transport failure
};

class HttpClient {
 public:
  HttpClient(Url url, std::string token, int64_t timeout_ms);
  ~HttpClient();
  Response request(const std::string& method, const std::string& target,
                   const std::string& body = "");
  Response get(const std::string& target) { return request("GET", target); }
  // With a timeout of its own (a long poll).
  Response request_within(const std::string& method, const std::string& target,
                          const std::string& body, int64_t timeout_ms);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes one path segment or query value.
std::string encode(const std::string& text);

}  // namespace queen::ctl
