// The web console: one self-contained HTML page (its CSS and script inlined) served at GET /.
// It speaks only the public HTTP API from the browser, so it needs no route of its own.
//
// Contract:
// - The page is built from server/console/{index.html,console.css,console.js}, compiled into
//   the binary (no network, no build step beyond CMake): index.html's `/*@console.css*/` and
//   `/*@console.js*/` markers are replaced by the two files.
// - With QUEEN_CONSOLE_DIR set, the three files are read from that folder at each request
//   instead (editing the console without rebuilding); a missing file answers 500 naming it.
// - The answer is text/html with an ETag of its bytes; Cache-Control no-cache, so a browser
//   revalidates and an upgraded node's console is seen at once.
#pragma once

#include <string>

#include "server/api/api.h"

namespace queen::server {

// GET /: the console page, from `dir` when it is not empty, else the compiled-in copy.
HttpAnswer console_page(const std::string& dir);

}  // namespace queen::server
