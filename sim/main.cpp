// queen-sim: runs the real node on the simulator, one seed at a time, and checks DESIGN.md's
// invariants. See sim/README.md.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/sim/trace.h"
#include "sim/params.h"
#include "sim/run.h"

namespace queen::sim {
namespace {

struct Args {
  uint64_t first = 1;
  uint64_t last = 1;
  int nodes = 1;
  Mutant mutant = Mutant::none;
  bool check_determinism = false;
  bool quiet = false;
  bool trace = false;
  bool expect_violation = false;
  bool stop_at_first = false;
  std::vector<std::string> without;  // faults turned off (params.cpp's table)
};

// The command that replays `seed` as this run ran it.
std::string replay_command(const Args& a, uint64_t seed) {
  std::string s = strf("queen-sim --replay %llu --trace --nodes %d",
                       static_cast<unsigned long long>(seed), a.nodes);
  if (a.mutant != Mutant::none) s += std::string(" --mutant ") + mutant_name(a.mutant);
  for (const std::string& f : a.without) s += " --without " + f;
  return s;
}

const char* kUsage =
    "usage: queen-sim [--seed N | --seeds A-B | --replay N] [--nodes K] [--trace]\n"
    "                 [--check-determinism] [--mutant NAME] [--quiet]\n"
    "                 [--stop-at-first] [--expect-violation] [--without FAULT]...\n"
    "  --nodes: 1 (a single node), 3, 5 or 7 (a Raft cluster with network faults)\n"
    "  --mutant: answer-before-fsync | skip-lease-check | replay-partial-entry |\n"
    "            commit-without-majority | vote-twice | no-foreign-lease-grace |\n"
    "            snapshot-without-log-files (clusters) | delta-after-recovery\n"
    "  --expect-violation: exit 0 only if some seed reports a violation (mutant checks)\n"
    "  --without: turns one fault off in every seed (the faults= list of a seed's line names\n"
    "             the ones it has): crash | crash-after-push-reply | crash-mid-sync | pause |\n"
    "             reply-loss | slow-sync | fsync-fail | read-corrupt | writer-backpressure |\n"
    "             net-drop | net-dup | net-forge | partition | long-outage | graceful-stop\n"
    "             membership\n";

Args g_args;

// A failed QUEEN_ASSERT in the core aborts the process: report it like a violation (seed,
// last trace lines, replay command) before dying.
// A seed whose child process runs longer than this (wall time) is stuck in an endless loop:
// the watchdog reports it like an assertion. Only a watchdog: no output depends on it.
constexpr unsigned kSeedWatchdogS = 120;

extern "C" void on_abort(int sig) {
  SimWorld* w = current_world();
  if (w != nullptr) {
    std::printf("VIOLATION seed=%llu invariant=\"%s\" at=%.6fs: %s\n",
                static_cast<unsigned long long>(w->seed()),
                sig == SIGALRM ? "8 liveness (watchdog)" : "core assertion",
                static_cast<double>(w->elapsed_us()) / 1e6,
                sig == SIGALRM ? "one event ran for minutes of wall time" : "the process aborted");
    std::printf("  last %zu trace events:\n", SimWorld::kViolationTraceLines);
    for (const std::string& line : w->trace().tail(SimWorld::kViolationTraceLines)) {
      std::printf("    %s\n", line.c_str());
    }
    std::printf("  replay: %s\n", replay_command(g_args, w->seed()).c_str());
    std::fflush(stdout);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool parse_u64(const char* s, uint64_t* out) {
  char* end = nullptr;
  *out = std::strtoull(s, &end, 10);
  return end != s && *end == '\0';
}

bool parse_range(const char* s, uint64_t* a, uint64_t* b) {
  const char* dash = std::strchr(s, '-');
  if (dash == nullptr) return parse_u64(s, a) && (*b = *a, true);
  std::string lo(s, dash);
  return parse_u64(lo.c_str(), a) && parse_u64(dash + 1, b) && *a <= *b;
}

bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    uint64_t n = 0;
    if ((f == "--seed" || f == "--replay") && v && parse_u64(v, &n)) {
      a->first = a->last = n;
      if (f == "--replay") a->trace = true;
      ++i;
    } else if (f == "--seeds" && v && parse_range(v, &a->first, &a->last)) {
      ++i;
    } else if (f == "--nodes" && v && parse_u64(v, &n)) {
      a->nodes = static_cast<int>(n);
      ++i;
    } else if (f == "--mutant" && v && parse_mutant(v)) {
      a->mutant = *parse_mutant(v);
      ++i;
    } else if (f == "--check-determinism") {
      a->check_determinism = true;
    } else if (f == "--quiet") {
      a->quiet = true;
    } else if (f == "--trace") {
      a->trace = true;
    } else if (f == "--expect-violation") {
      a->expect_violation = true;
    } else if (f == "--stop-at-first") {
      a->stop_at_first = true;
    } else if (f == "--without" && v) {
      RunParams probe;
      if (!turn_off_fault(&probe, v)) return false;
      a->without.emplace_back(v);
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

void print_violation(const Args& a, const RunOutcome& o, const Violation& v) {
  std::printf("VIOLATION seed=%llu invariant=\"%s\" at=%.6fs: %s\n",
              static_cast<unsigned long long>(o.seed), v.invariant.c_str(),
              static_cast<double>(v.elapsed_us) / 1e6, v.detail.c_str());
  std::printf("  last %zu trace events:\n", v.trace_tail.size());
  for (const std::string& line : v.trace_tail) std::printf("    %s\n", line.c_str());
  std::printf("  replay: %s\n", replay_command(a, o.seed).c_str());
}

// With --expect-violation, only a violation of the mutant's own invariant counts (another
// one is a real bug found on the way, reported but not proof that the mutant is caught).
bool counts(const Args& a, const Violation& v) {
  if (!a.expect_violation || a.mutant == Mutant::none) return true;
  std::string want = std::string(mutant_invariant(a.mutant)) + " ";
  return v.invariant.compare(0, want.size(), want) == 0;
}

// Runs one seed (twice with --check-determinism); returns its violations.
size_t run_one(const Args& a, uint64_t seed, Counters* totals) {
  RunParams p = choose_params(seed, a.nodes, a.mutant);
  for (const std::string& f : a.without) turn_off_fault(&p, f);
  if (!a.quiet)
    std::printf("seed=%llu %s\n", static_cast<unsigned long long>(seed), p.describe().c_str());
  std::fflush(stdout);
  RunOptions opt;
  opt.trace_out = a.trace ? stdout : nullptr;
  RunOutcome o = run_seed(p, opt);
  if (a.check_determinism) {
    RunOutcome again = run_seed(p, RunOptions{});
    if (again.trace_hash != o.trace_hash || again.trace_lines != o.trace_lines) {
      o.violations.push_back(
          Violation{"determinism",
                    strf("two runs of the seed differ: hash %016llx/%016llx, %llu/%llu trace lines",
                         static_cast<unsigned long long>(o.trace_hash),
                         static_cast<unsigned long long>(again.trace_hash),
                         static_cast<unsigned long long>(o.trace_lines),
                         static_cast<unsigned long long>(again.trace_lines)),
                    again.sim_us,
                    {}});
    }
  }
  for (const auto& [name, count] : o.counters) (*totals)[name] += count;
  (*totals)["sim_ms"] += static_cast<uint64_t>(o.sim_us / 1000);
  if (!o.violations.empty()) {
    print_violation(a, o, o.violations.front());
  } else if (!a.quiet) {
    std::printf("seed=%llu ok hash=%016llx sim_s=%.1f trace_lines=%llu\n",
                static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(o.trace_hash), static_cast<double>(o.sim_us) / 1e6,
                static_cast<unsigned long long>(o.trace_lines));
  }
  std::fflush(stdout);
  size_t n = 0;
  for (const Violation& v : o.violations) {
    if (!counts(a, v)) continue;
    ++n;
    if (a.expect_violation) {
      std::printf("mutant %s caught: seed=%llu invariant=\"%s\"\n", mutant_name(a.mutant),
                  static_cast<unsigned long long>(seed), v.invariant.c_str());
    }
  }
  return n;
}

// Runs one seed in a child process, so that a core assertion that aborts the process is
// reported as that seed's violation (by on_abort, in the child) and the range goes on. The
// child sends its counters back as "name=value" lines.
size_t run_isolated(const Args& a, uint64_t seed, Counters* totals) {
  int fds[2];
  if (pipe(fds) != 0) return run_one(a, seed, totals);
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_one(a, seed, totals);
  }
  if (child == 0) {
    close(fds[0]);
    std::signal(SIGALRM, on_abort);
    alarm(kSeedWatchdogS);
    Counters local;
    size_t v = run_one(a, seed, &local);
    std::string out = strf("violations=%zu\n", v);
    for (const auto& [name, count] : local) {
      out += strf("%s=%llu\n", name.c_str(), static_cast<unsigned long long>(count));
    }
    for (size_t off = 0; off < out.size();) {
      ssize_t n = write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    std::fflush(stdout);
    _exit(0);
  }
  close(fds[1]);
  std::string in;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) in.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {  // it aborted: on_abort reported it
    return a.expect_violation && a.mutant != Mutant::none ? 0 : 1;
  }
  size_t violations = 0;
  for (size_t pos = 0; pos < in.size();) {
    size_t end = in.find('\n', pos);
    std::string line = in.substr(pos, end - pos);
    pos = end == std::string::npos ? in.size() : end + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    uint64_t value = std::strtoull(line.c_str() + eq + 1, nullptr, 10);
    if (line.compare(0, eq, "violations") == 0) {
      violations = value;
    } else {
      (*totals)[line.substr(0, eq)] += value;
    }
  }
  return violations;
}

void print_summary(uint64_t seeds, uint64_t violating, const Counters& totals) {
  static const char* const kFirst[] = {
      "crashes",          "restarts",     "torn_writes",     "dropped_writes", "fsync_errors",
      "read_corruptions", "lost_replies", "node_pauses",     "fatal_exits",    "lease_expiries",
      "redeliveries",     "dlq_moves",    "pushes_answered", "pops_answered",  "acks_answered"};
  std::string line = strf("seeds=%llu violations=%llu", static_cast<unsigned long long>(seeds),
                          static_cast<unsigned long long>(violating));
  for (const char* name : kFirst) {
    auto it = totals.find(name);
    line += strf(" %s=%llu", name,
                 static_cast<unsigned long long>(it == totals.end() ? 0 : it->second));
  }
  for (const auto& [name, count] : totals) {
    bool listed = false;
    for (const char* f : kFirst) listed = listed || name == f;
    if (!listed) line += strf(" %s=%llu", name.c_str(), static_cast<unsigned long long>(count));
  }
  std::printf("%s\n", line.c_str());
}

int main_impl(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, &a)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (a.nodes < 1 || a.nodes > 7 || (a.nodes > 1 && a.nodes % 2 == 0)) {
    std::fprintf(stderr, "queen-sim: --nodes must be 1, 3, 5 or 7 (got %d)\n", a.nodes);
    return 2;
  }
  g_args = a;
  std::signal(SIGABRT, on_abort);
  Counters totals;
  uint64_t seeds = 0;
  uint64_t violating = 0;
  for (uint64_t seed = a.first; seed <= a.last; ++seed) {
    ++seeds;
    bool isolate = a.first != a.last && !a.trace;
    if ((isolate ? run_isolated(a, seed, &totals) : run_one(a, seed, &totals)) > 0) ++violating;
    if (violating > 0 && a.stop_at_first) break;
    if (seed == UINT64_MAX) break;
  }
  print_summary(seeds, violating, totals);
  if (a.expect_violation) {
    if (violating == 0) {
      std::printf("expected a violation of invariant %s (mutant %s); none found\n",
                  mutant_invariant(a.mutant), mutant_name(a.mutant));
    }
    return violating > 0 ? 0 : 1;
  }
  return violating > 0 ? 1 : 0;
}

}  // namespace
}  // namespace queen::sim

int main(int argc, char** argv) {
  return queen::sim::main_impl(argc, argv);
}
