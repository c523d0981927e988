// The fuzz targets' stand-in for server/http_fetch.cpp: they never configure JWT_JWKS_URL, and
// leaving out the HTTPS client (Beast and Asio SSL) saves the tree its slowest file.
#include "server/http_fetch.h"

namespace queen::server {

Result<std::string> fetch_url(const std::string&, int64_t) {
  return make_error(Errc::unavailable, "the fuzz build has no HTTP client");
}

}  // namespace queen::server
