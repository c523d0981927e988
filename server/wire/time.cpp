// ISO-8601 times (server/wire/time.h).
#include "server/wire/time.h"

#include <cstdio>

namespace queen::server {

namespace {

// ---------- small helpers ----------

int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

}  // namespace

namespace {

namespace {

// `v` as exactly `width` decimal digits (v < 10^width).
char* put_digits(char* out, uint64_t v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return out + width;
}

}  // namespace

}  // namespace

size_t format_iso_us(int64_t unix_us, char* out) {
  int64_t secs = unix_us >= 0 ? unix_us / 1000000 : -((-unix_us + 999999) / 1000000);
  auto frac = static_cast<int>(unix_us - secs * 1000000);
  int64_t days = secs >= 0 ? secs / 86400 : -((-secs + 86399) / 86400);
  int64_t sod = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  if (y < 0 || y > 9999) {
    return static_cast<size_t>(
        std::snprintf(out, kIsoUsCharsMax, "%04lld-%02u-%02uT%02d:%02d:%02d.%06dZ",
                      static_cast<long long>(y), m, d, static_cast<int>(sod / 3600),
                      static_cast<int>(sod / 60 % 60), static_cast<int>(sod % 60), frac));
  }
  char* p = put_digits(out, static_cast<uint64_t>(y), 4);
  *p++ = '-';
  p = put_digits(p, m, 2);
  *p++ = '-';
  p = put_digits(p, d, 2);
  *p++ = 'T';
  p = put_digits(p, static_cast<uint64_t>(sod / 3600), 2);
  *p++ = ':';
  p = put_digits(p, static_cast<uint64_t>(sod / 60 % 60), 2);
  *p++ = ':';
  p = put_digits(p, static_cast<uint64_t>(sod % 60), 2);
  *p++ = '.';
  p = put_digits(p, static_cast<uint64_t>(frac), 6);
  *p++ = 'Z';
  return static_cast<size_t>(p - out);
}

std::string format_iso_us(int64_t unix_us) {
  char buf[kIsoUsCharsMax];
  return std::string(buf, format_iso_us(unix_us, buf));
}

// YYYY-MM-DD[(T| )HH:MM[:SS[.fraction]]][Z|(+|-)HH[:]MM]; no zone means UTC.
std::optional<int64_t> parse_iso_us(std::string_view t) {
  size_t i = 0;
  auto digits = [&](size_t count) -> std::optional<int> {
    if (i + count > t.size()) return std::nullopt;
    int v = 0;
    for (size_t k = 0; k < count; ++k) {
      char c = t[i + k];
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    i += count;
    return v;
  };
  auto expect = [&](char c) {
    if (i < t.size() && t[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  auto year = digits(4);
  if (!year || !expect('-')) return std::nullopt;
  auto month = digits(2);
  if (!month || !expect('-')) return std::nullopt;
  auto day = digits(2);
  if (!day || *month < 1 || *month > 12 || *day < 1 || *day > 31) return std::nullopt;
  int hour = 0, minute = 0, second = 0;
  int64_t frac_us = 0;
  if (i < t.size() && (t[i] == 'T' || t[i] == 't' || t[i] == ' ')) {
    ++i;
    auto h = digits(2);
    if (!h || !expect(':')) return std::nullopt;
    auto mi = digits(2);
    if (!mi) return std::nullopt;
    hour = *h, minute = *mi;
    if (expect(':')) {
      auto s = digits(2);
      if (!s) return std::nullopt;
      second = *s;
      if (expect('.') || expect(',')) {
        int64_t scale = 100000;
        size_t start = i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
          frac_us += (t[i] - '0') * scale;
          scale /= 10;
          ++i;
        }
        if (i == start) return std::nullopt;
      }
    }
    if (hour > 23 || minute > 59 || second > 60) return std::nullopt;
  }
  int64_t offset_s = 0;
  if (i < t.size()) {
    if (t[i] == 'Z' || t[i] == 'z') {
      ++i;
    } else if (t[i] == '+' || t[i] == '-') {
      int sign = t[i] == '-' ? -1 : 1;
      ++i;
      auto oh = digits(2);
      if (!oh) return std::nullopt;
      expect(':');
      auto om = digits(2);
      if (!om || *oh > 23 || *om > 59) return std::nullopt;
      offset_s = sign * (*oh * 3600 + *om * 60);
    }
  }
  if (i != t.size()) return std::nullopt;
  int64_t days = days_from_civil(*year, static_cast<unsigned>(*month), static_cast<unsigned>(*day));
  int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_s;
  return secs * 1000000 + frac_us;
}

}  // namespace queen::server
