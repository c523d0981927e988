#!/usr/bin/env bash
# Fails when core/ reaches the world directly: I/O, threads, clocks, OS randomness or the
# cipher (OpenSSL) must come through the environment interface (io/env.h). What the node
# does (appends, syncs, timers, messages, forwards, replies, a fatal stop) it returns as a
# record (io/outputs.h); a call of those Env members from core/ fails too. Run by ctest and
# by .ci/run.
set -u
dir=${1:-core}
bad=$(grep -rnE '#include *[<"](boost/asio|boost/beast|asio|thread|mutex|condition_variable|shared_mutex|future|filesystem|fstream|chrono|random|unistd\.h|fcntl\.h|sys/[a-z_]+\.h|sockets?\.h|netinet/[a-z_]+\.h|arpa/[a-z_]+\.h|pthread\.h|ctime|time\.h|openssl/[a-z0-9_]+\.h)[>"]' "$dir")
clk=$(grep -rnE '(system_clock|steady_clock|high_resolution_clock)::now|random_device|std::rand\(|[^_a-z]rand\(\)|time\(NULL\)|time\(nullptr\)|fopen\(|std::thread|sleep_for' "$dir")
act=$(grep -rnE '\benv_?(\.|->)(set_timer|append|sync|write_whole_file|send|forward|reply|fatal)\(' "$dir")
if [[ -n "$bad$clk$act" ]]; then
  echo "core/ must stay pure (DESIGN.md). Offending lines:"
  [[ -n "$bad" ]] && echo "$bad"
  [[ -n "$clk" ]] && echo "$clk"
  [[ -n "$act" ]] && echo "$act"
  exit 1
fi
echo "core purity: ok ($(find "$dir" -name '*.h' -o -name '*.cpp' | wc -l) files checked)"
