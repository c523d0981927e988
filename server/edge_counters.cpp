#include "server/edge_counters.h"

namespace queen::server {

const char* admit_outcome_name(AdmitOutcome outcome) {
  switch (outcome) {
    case AdmitOutcome::admitted:
      return "admitted";
    case AdmitOutcome::waited:
      return "waited";
    case AdmitOutcome::overloaded:
      return "overloaded";
    case AdmitOutcome::queue_full:
      return "queue_full";
    case AdmitOutcome::storage_full:
      return "storage_full";
  }
  return "admitted";
}

EdgeCounters& edge_counters() {
  static EdgeCounters counters;
  return counters;
}

}  // namespace queen::server
