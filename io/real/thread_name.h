// Names the calling thread (at most 15 characters), so `top -H`, `ps -L` and `perf` tell the
// node's threads apart. A name that does not fit is cut; a failure is ignored.
#pragma once

namespace queen::real {

void name_this_thread(const char* name);

}  // namespace queen::real
