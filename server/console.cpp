#include "server/console.h"

#include <fstream>
#include <optional>
#include <sstream>

#include <xxhash.h>

#include "server/console_assets.h"

namespace queen::server {
namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void replace_marker(std::string* page, std::string_view marker, std::string_view with) {
  size_t at = page->find(marker);
  if (at != std::string::npos) page->replace(at, marker.size(), with);
}

std::string compose(std::string page, std::string_view css, std::string_view js) {
  replace_marker(&page, "/*@console.css*/", css);
  replace_marker(&page, "/*@console.js*/", js);
  return page;
}

HttpAnswer page_answer(std::string page) {
  char etag[24];
  std::snprintf(etag, sizeof etag, "\"%016llx\"",
                static_cast<unsigned long long>(XXH3_64bits(page.data(), page.size())));
  HttpAnswer a{200, std::move(page), 0};
  a.content_type = "text/html; charset=utf-8";
  a.etag = etag;
  return a;
}

}  // namespace

HttpAnswer console_page(const std::string& dir) {
  if (dir.empty()) {
    static const std::string built = compose(std::string(kConsoleHtml), kConsoleCss, kConsoleJs);
    return page_answer(built);
  }
  std::string parts[3];
  const char* names[3] = {"index.html", "console.css", "console.js"};
  for (int i = 0; i < 3; ++i) {
    auto text = read_file(dir + "/" + names[i]);
    if (!text) {
      return error_answer(500, "internal",
                          std::string("QUEEN_CONSOLE_DIR: cannot read ") + dir + "/" + names[i]);
    }
    parts[i] = std::move(*text);
  }
  return page_answer(compose(std::move(parts[0]), parts[1], parts[2]));
}

}  // namespace queen::server
