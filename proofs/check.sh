#!/usr/bin/env bash
# Model-checks the protocol models in proofs/ with SPIN: every model must hold, every mutant
# (one rule broken) must be refuted, every witness (a state the model must be able to reach,
# so that a proof is not vacuous) must be found. One line per run; exits non-zero if any run
# ends otherwise. Work happens in a temporary folder, so the tree stays clean.
#
#   proofs/check.sh            every run
#   proofs/check.sh lease      only runs whose name contains "lease"
#
# Needs spin and gcc (Debian: apt-get install -y spin gcc). Environment knobs:
#   PROOFS_MEMLIM_MB  memory cap of one search (default 1024); a model run that hits it fails
#   PROOFS_KEEP=1     keep the work folder (pan sources and trails) and print where it is
set -u

here=$(cd "$(dirname "$0")" && pwd)
filter=${1:-}
memlim=${PROOFS_MEMLIM_MB:-1024}
depth=100000       # DFS stack bound; a search that reaches it is not a proof and fails

for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool not found (apt-get install -y spin gcc)"; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/queen-proofs.XXXXXX")
if [[ ${PROOFS_KEEP:-0} == 1 ]]; then
  echo "work folder: $work"
else
  trap 'rm -rf "$work"' EXIT
fi

# name | model | expect (holds, refuted, reached) | mode (safety, or ltl:NAME) | spin -D flags
runs=(
  "lease_exclusivity                 |lease_exclusivity.pml|holds  |safety|"
  "lease_exclusivity NO_SKEW_HOLD    |lease_exclusivity.pml|refuted|safety|-DMUTANT_NO_SKEW_HOLD"
  "lease_exclusivity NO_OWN_TERM_APPLY|lease_exclusivity.pml|refuted|safety|-DMUTANT_NO_OWN_TERM_APPLY"
  "lease_exclusivity ANSWER_BEFORE_COMMIT|lease_exclusivity.pml|refuted|safety|-DMUTANT_ANSWER_BEFORE_COMMIT"
  "lease_exclusivity NO_SKEW_WAIT    |lease_exclusivity.pml|refuted|safety|-DMUTANT_NO_SKEW_WAIT"
  "lease_exclusivity NO_LEADER_LEASE |lease_exclusivity.pml|refuted|safety|-DMUTANT_NO_LEADER_LEASE"
  "lease_exclusivity LEASE_FROM_RECEIPT|lease_exclusivity.pml|refuted|safety|-DMUTANT_LEASE_FROM_RECEIPT"
  "lease_exclusivity LL=4 (lease > wait)|lease_exclusivity.pml|refuted|safety|-DLL=4"
  "lease_exclusivity reach HANDOVER  |lease_exclusivity.pml|reached|safety|-DREACH_HANDOVER"
  "lease_exclusivity reach HELD_ENTRY|lease_exclusivity.pml|reached|safety|-DREACH_HELD_ENTRY"

  "checkpoint_answer                 |checkpoint_answer.pml|holds  |safety|"
  "checkpoint_answer ANSWER_BEFORE_COMMIT|checkpoint_answer.pml|refuted|safety|-DMUTANT_ANSWER_BEFORE_COMMIT"
  "checkpoint_answer READ_FROM_MEMORY|checkpoint_answer.pml|refuted|safety|-DMUTANT_READ_FROM_MEMORY"
  "checkpoint_answer SKIP_LEASE_CHECK|checkpoint_answer.pml|refuted|safety|-DMUTANT_SKIP_LEASE_CHECK"
  "checkpoint_answer LEASE_CHECK_FIRST|checkpoint_answer.pml|refuted|safety|-DMUTANT_LEASE_CHECK_FIRST"
  "checkpoint_answer ONLY_LAST_LEASE |checkpoint_answer.pml|refuted|safety|-DMUTANT_ONLY_LAST_LEASE"
  "checkpoint_answer UNLEASED_FAILED_ACK|checkpoint_answer.pml|refuted|safety|-DMUTANT_UNLEASED_FAILED_ACK"
  "checkpoint_answer SERVE_OVERLAP   |checkpoint_answer.pml|refuted|safety|-DMUTANT_SERVE_OVERLAP"
  "checkpoint_answer NO_OWN_TERM_APPLY|checkpoint_answer.pml|refuted|safety|-DMUTANT_NO_OWN_TERM_APPLY"
  "checkpoint_answer reach FAILED_REPEAT|checkpoint_answer.pml|reached|safety|-DREACH_FAILED_REPEAT"

  "txn_reservation                   |txn_reservation.pml|holds  |safety|"
  "txn_reservation NO_SHADOW         |txn_reservation.pml|refuted|safety|-DMUTANT_NO_SHADOW"
  "txn_reservation LEASE_NOT_HELD    |txn_reservation.pml|refuted|safety|-DMUTANT_LEASE_NOT_HELD"
  "txn_reservation CKPT_IGNORES_RESERVED|txn_reservation.pml|refuted|safety|-DMUTANT_CKPT_IGNORES_RESERVED"
  "txn_reservation TTL_AFTER_HANDOFF |txn_reservation.pml|refuted|safety|-DMUTANT_TTL_AFTER_HANDOFF"
  "txn_reservation NO_TTL_CHECK_AT_PLAN|txn_reservation.pml|refuted|safety|-DMUTANT_NO_TTL_CHECK_AT_PLAN"
  "txn_reservation REPLAY_PARTIAL_ENTRY|txn_reservation.pml|refuted|safety|-DMUTANT_REPLAY_PARTIAL_ENTRY"
  "txn_reservation reach LANDS_ELSEWHERE|txn_reservation.pml|reached|safety|-DREACH_LANDS_ELSEWHERE"

  "raft_election                     |raft_election.pml|holds  |safety|"
  "raft_election ltl                 |raft_election.pml|holds  |ltl:election_safety|-DLTL_ONLY"
  "raft_election relaxed, terms<=3   |raft_election.pml|holds  |safety|-DRELAXED -DMAXTERM=3"
  "raft_election VOTE_TWICE          |raft_election.pml|refuted|safety|-DMUTANT_VOTE_TWICE"
  "raft_election VOTE_TWICE ltl      |raft_election.pml|refuted|ltl:election_safety|-DLTL_ONLY -DMUTANT_VOTE_TWICE"
  "raft_election FORGET_VOTE         |raft_election.pml|refuted|safety|-DMUTANT_FORGET_VOTE"
  "raft_election STALE_VOTES         |raft_election.pml|refuted|safety|-DMUTANT_STALE_VOTES"
  "raft_election PREVOTE_AS_VOTE     |raft_election.pml|refuted|safety|-DMUTANT_PREVOTE_AS_VOTE"
  "raft_election reach SECOND_TERM   |raft_election.pml|reached|safety|-DREACH_SECOND_TERM"

  "membership_change                 |membership_change.pml|holds  |safety|"
  "membership_change 4 servers, log<=4|membership_change.pml|holds  |safety|-DN=4 -DINIT=7 -DLOGLEN=4"
  "membership_change 4 servers, data |membership_change.pml|holds  |safety|-DN=4 -DINIT=7 -DLOGLEN=3 -DWITH_DATA"
  "membership_change NO_OWN_TERM_COMMIT|membership_change.pml|refuted|safety|-DMUTANT_NO_OWN_TERM_COMMIT"
  "membership_change LEARNER_IN_QUORUM|membership_change.pml|refuted|safety|-DMUTANT_LEARNER_IN_QUORUM"
  "membership_change TWO_IN_FLIGHT   |membership_change.pml|refuted|safety|-DN=4 -DINIT=7 -DLOGLEN=4 -DMUTANT_TWO_IN_FLIGHT"
  "membership_change TWO_AT_ONCE     |membership_change.pml|refuted|safety|-DN=4 -DINIT=7 -DLOGLEN=4 -DMUTANT_TWO_AT_ONCE"
  "membership_change reach NEW_CONFIG|membership_change.pml|reached|safety|-DREACH_NEW_CONFIG"
  "membership_change reach PROMOTED  |membership_change.pml|reached|safety|-DN=4 -DINIT=7 -DLOGLEN=4 -DREACH_PROMOTED"
)

now_ms() { date +%s%3N; }
trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; echo "${s%"${s##*[![:space:]]}"}"; }

failures=0
count=0
total_start=$(now_ms)
printf '%-40s %-9s %-10s %12s %9s %9s\n' run expect result states search_s total_s

for entry in "${runs[@]}"; do
  IFS='|' read -r name model expect mode flags <<<"$entry"
  name=$(trim "$name"); expect=$(trim "$expect"); mode=$(trim "$mode")
  read -ra dflags <<<"$flags"
  [[ -n $filter && $name != *"$filter"* ]] && continue
  count=$((count + 1))
  dir="$work/run$count"
  mkdir -p "$dir"
  cp "$here/$model" "$dir/"
  start=$(now_ms)

  # Exhaustive searches get the optimiser and a big hash table; refutations stop early and
  # only need to compile fast.
  opt=-O1; hash=-w22
  [[ $expect != holds ]] && { opt=-O0; hash=-w19; }
  cflags=(-DMEMLIM="$memlim" -w)
  panflags=(-m"$depth" "$hash")
  if [[ $mode == safety ]]; then
    cflags+=(-DSAFETY -DNOCLAIM)
  else
    panflags+=(-a -N "${mode#ltl:}")
  fi

  result=""
  if ! (cd "$dir" && spin -a "${dflags[@]}" "$model" >spin.out 2>&1); then
    result=ERROR; detail=$(head -3 "$dir/spin.out")
  elif ! (cd "$dir" && gcc "$opt" "${cflags[@]}" -o pan pan.c >gcc.out 2>&1); then
    result=ERROR; detail=$(head -3 "$dir/gcc.out")
  else
    (cd "$dir" && ./pan "${panflags[@]}" >pan.out 2>&1)
    out="$dir/pan.out"
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out" | tail -1)
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | tail -1)
    secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\).*/\1/p' "$out" | tail -1)
    truncated=""
    grep -q 'max search depth too small' "$out" && truncated="depth bound reached"
    grep -q 'reached -DMEMLIM bound' "$out" && truncated="memory bound reached"
    if [[ -z $errors ]]; then
      result=ERROR; detail=$(grep -v '^$' "$out" | head -3)
    elif [[ $errors == 0 ]]; then
      if [[ -n $truncated ]]; then result=INCOMPLETE; detail=$truncated
      else result=holds; detail="no violation in the whole state space"; fi
    else
      # an error found: which kind, for the record
      if grep -q 'acceptance cycle' "$out"; then kind="acceptance cycle"
      elif grep -q 'invalid end state' "$out" && ! grep -q 'assertion violated' "$out"; then
        kind="invalid end state"
      else kind=$(grep -m1 -o 'assertion violated.*' "$out" | cut -c1-100); fi
      if [[ $expect == reached ]]; then result=reached; else result=refuted; fi
      detail=$kind
    fi
  fi
  total=$(( $(now_ms) - start ))

  ok=0
  [[ $result == "$expect" ]] && ok=1
  printf '%-40s %-9s %-10s %12s %9s %9s\n' "$name" "$expect" "$result" "${states:--}" \
    "${secs:--}" "$(printf '%d.%01d' $((total / 1000)) $(((total % 1000) / 100)))"
  if [[ $ok == 0 ]]; then
    failures=$((failures + 1))
    echo "    ^ expected $expect: ${detail:-}"
    if [[ $expect == holds && $result == refuted ]]; then
      # show the counterexample: the model prints one "T ..." line per step it takes
      (cd "$dir" && spin -t "${dflags[@]}" "$model" 2>&1 | grep -E '^ *T |assertion violated' | sed 's/^ */    /' | tail -60)
    fi
  fi
  states=""; secs=""; detail=""
done

elapsed=$(( $(now_ms) - total_start ))
if [[ $count == 0 ]]; then echo "check.sh: no run matches '$filter'"; exit 2; fi
echo "runs=$count unexpected=$failures total_s=$((elapsed / 1000))"
[[ $failures == 0 ]]
