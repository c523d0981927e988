// Carrying out what a node returned (io/outputs.h) through an environment: the one place
// where a node's decisions turn into Env calls, shared by io/real, io/sim and the tests.
#pragma once

#include <type_traits>
#include <utility>

#include "core/node/node.h"
#include "io/outputs.h"

namespace queen {

// Carries out `out` in order. A failed truncate or remove stops the node (Env::fatal).
inline void carry_out(Env& env, Outputs&& out) {
  for (Output& o : out.items()) {
    std::visit(
        [&](auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, output::SetTimer>) {
            env.set_timer(x.id, x.delay_ms);
          } else if constexpr (std::is_same_v<T, output::Append>) {
            env.append(x.file, std::move(x.data));
          } else if constexpr (std::is_same_v<T, output::Sync>) {
            env.sync(x.file, x.token);
          } else if constexpr (std::is_same_v<T, output::WriteWholeFile>) {
            env.write_whole_file(x.file, x.produce, x.token, x.expected_bytes);
          } else if constexpr (std::is_same_v<T, output::Truncate>) {
            if (!env.truncate(x.file, x.size_bytes).ok()) env.fatal("cannot truncate " + x.file);
          } else if constexpr (std::is_same_v<T, output::Remove>) {
            Status st = env.remove(x.file);
            if (!st.ok() && !(x.absent_ok && st.error().code == Errc::not_found))
              env.fatal("cannot remove " + x.file + ": " + st.error().message);
          } else if constexpr (std::is_same_v<T, output::Send>) {
            env.send(x.to_node, std::move(x.message));
          } else if constexpr (std::is_same_v<T, output::Forward>) {
            env.forward(x.to_node, x.forward_id, std::move(x.command), x.remaining_ms);
          } else if constexpr (std::is_same_v<T, output::Answer>) {
            env.reply(x.handle, std::move(x.reply));
          } else if constexpr (std::is_same_v<T, output::Members>) {
            env.members_changed(x.members);
          } else {
            static_assert(std::is_same_v<T, output::Fatal>);
            env.fatal(x.reason);
          }
        },
        o);
  }
}

// Carries out an event's outputs, then the restart in place they may ask for, and its own.
inline void carry_out(Env& env, Node& node, Outputs&& out) {
  bool restart = out.restart;
  carry_out(env, std::move(out));
  while (restart) {
    Outputs next = node.restart_in_place();
    restart = next.restart;
    carry_out(env, std::move(next));
  }
}

}  // namespace queen
