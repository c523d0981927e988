#include "server/forward_counters.h"

namespace queen::server {

ForwardCounters& forward_counters() {
  static ForwardCounters counters;
  return counters;
}

}  // namespace queen::server
