// Linear probing over a power-of-two vector of slots, shared by the open-addressing tables
// (the in-flight dedup hashes, the partition-name index, the ring generations). A table says
// which slots are used and where each slot's probe run begins (its home); walk() owns the
// walking of runs. erase_at() is the backward-shift deletion for a table that erases without
// tombstones (the in-flight hashes); the name index keeps tombstones and rebuilds instead.
#pragma once

#include <cstddef>
#include <vector>

namespace queen::probe {

// The first slot at or after `i` (wrapping) for which `stop(slot)` holds. The table must
// have a slot where it does (one that is not full always has an unused slot).
template <class Slot, class Stop>
size_t walk(const std::vector<Slot>& slots, size_t i, Stop stop) {
  size_t mask = slots.size() - 1;
  while (!stop(slots[i])) i = (i + 1) & mask;
  return i;
}

// Empties slot `i`, moving each later slot of its run whose home is not in (i, j] into the
// hole, so every remaining slot stays reachable from its home. An empty slot is `Slot{}`.
template <class Slot, class Used, class Home>
void erase_at(std::vector<Slot>& slots, size_t i, Used used, Home home) {
  size_t mask = slots.size() - 1;
  for (size_t j = (i + 1) & mask; used(slots[j]); j = (j + 1) & mask) {
    size_t k = home(slots[j]);
    bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    slots[i] = slots[j];
    i = j;
  }
  slots[i] = Slot{};
}

}  // namespace queen::probe
