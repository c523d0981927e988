// One HTTP GET for the edge's own needs (the JWKS of JWT_JWKS_URL), on its own io_context.
//
// Contract: fetch_url() GETs an http:// or https:// URL within timeout_ms (TLS: the system's
// trusted roots, the host name checked) and answers the body of a 200, at most 1 MiB.
// Everything else (a bad URL, no answer in time, another status) is an error value.
#pragma once

#include <cstdint>
#include <string>

#include "core/common/result.h"

namespace queen::server {

Result<std::string> fetch_url(const std::string& url, int64_t timeout_ms);

}  // namespace queen::server
