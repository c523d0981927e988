// Fuzz target: bytes off a connection through Beast's request parser (the edge's header and
// body limits) and, for every complete request, through the router and the disk gate's
// classifier, as the edge runs them, without a node. Pipelined requests in one input are
// parsed one after another. Nothing may crash or throw past the parser.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fuzz/fuzz_edge.h"
#include "server/admission.h"
#include "server/api/routes.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace queen;

constexpr uint64_t kBodyBytesMax = 1u << 20;
constexpr uint32_t kHeaderBytesMax = 64u << 10;
constexpr int kRequestsMax = 16;

void route(const http::request<http::string_body>& req) {
  auto method = req.method_string();
  auto target = req.target();
  std::string_view m(method.data(), method.size());
  std::string_view t(target.data(), target.size());
  (void)server::access_for(m, t.substr(0, t.find('?')));
  server::EdgeSettings settings;
  fuzz::FixedIds ids;
  server::Routed routed = server::route(m, t, req.body(), settings, ids);
  if (routed.parsed.command) (void)server::grows_storage(routed.parsed.command->command);
  fuzz::check_parsed(routed.parsed);
}

// Parses one request from the front of `input`; the bytes it used, or 0 when it stopped.
size_t parse_one(std::string_view input) {
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  parser.body_limit(kBodyBytesMax);
  parser.header_limit(kHeaderBytesMax);
  beast::error_code ec;
  size_t used = 0;
  while (!parser.is_done() && used < input.size()) {
    size_t n = parser.put(boost::asio::buffer(input.data() + used, input.size() - used), ec);
    if (ec == http::error::need_more) break;
    if (ec) return 0;
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_done()) {
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }
  route(parser.get());
  return used;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < kRequestsMax && !input.empty(); ++i) {
    size_t used = parse_one(input);
    if (used == 0) break;
    input.remove_prefix(used);
  }
  return 0;
}
