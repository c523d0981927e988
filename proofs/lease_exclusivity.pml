/*
 * lease_exclusivity.pml: one consumer group's lease on one partition across leader changes.
 *
 * Abstracts
 *   Real time advances in ticks. Each engine node i reads clock(i) = real + off[i], with off[i]
 *   in 0..SKEW fixed at start, so two clocks differ by at most SKEW ticks
 *   (QUEEN_RAFT_MAX_CLOCK_SKEW_MS); drift is folded into the offset. Times are kept as
 *   countdowns (ticks left), so states that differ only by the hour collapse and no horizon
 *   is needed: the search covers runs of any length.
 *   Raft is reduced to the guarantees this protocol leans on (raft_election.pml checks the
 *   election side): terms are totally ordered; only the newest leader commits directly; at
 *   an election at most one in-flight entry of a term not older than the last committed one
 *   may be in the new leader's log, and it commits when the new leader's own-term entry does;
 *   once that own-term entry is committed no older-term entry ever commits.
 *   The engine keeps the cursor row in memory and logs it in checkpoints; a pop is answered
 *   only when the checkpoint holding its lease commits in the engine's own term.
 *   A lease is timed on the granting leader's clock: a consumer holds it from the answer
 *   until the granter's clock reaches the stored expiry.
 *
 * Rules modelled (DESIGN.md, seed "After a leader change", reference 3.7)
 *   R1 an engine serves only while it leads and heard from a quorum within LL ticks
 *      (QUEEN_CONSUME_LEADER_LEASE_MS), dated from the send of the heartbeat round;
 *   R2 a new leader serves only after applying an entry of its own term, and then only after
 *      CK + SKEW ticks more (QUEEN_CONSUME_CHECKPOINT_MS + QUEEN_RAFT_MAX_CLOCK_SKEW_MS);
 *   R3 it loads the lease from the committed cursor row;
 *   R4 a lease timed by another node is held SKEW ticks past its stored expiry;
 *   R5 a pop is answered only after its checkpoint commits.
 *
 * Bounds: 2 engine nodes (a third voter is implied by "majority"), terms <= MAXTERM (3),
 *   one group and partition, one checkpoint in flight per engine, unbounded pops and ticks.
 *   SKEW = 2, LL = 2, CK = 1, LT = 5 ticks: a tick stands for 250 ms, so 500 ms of skew, and
 *   the 400 ms leader lease and 5 ms checkpoint interval round up. What decides P2 is
 *   CK + SKEW >= LL (505 >= 400 ms), which the rounding keeps; -DLL=4 breaks it.
 *
 * Properties (assertions)
 *   P1 lease exclusivity: a lease reaches its consumer only when no lease told earlier is
 *      still live in real time: assert(told_left == 0) at every answer, where told_left is
 *      the most real ticks any told lease has left; i.e. [] !(live(a) && live(b)), a != b
 *   P2 serving exclusivity: [] !(serving(0) && serving(1)): at no tick do two engines hand
 *      out leases (what R1 + R2's wait buy; P1 alone holds without them, see README).
 *
 * Mutants (each must be refuted)
 *   MUTANT_NO_SKEW_HOLD        R4 dropped: a loaded lease ends at its expiry on the new clock
 *   MUTANT_NO_OWN_TERM_APPLY   R2/R3: serve at election from the node's own, possibly stale, rows
 *   MUTANT_ANSWER_BEFORE_COMMIT R5 dropped (QUEEN_CONSUME_FAST=1)
 *   MUTANT_NO_SKEW_WAIT        R2's wait is the checkpoint interval only
 *   MUTANT_NO_LEADER_LEASE     R1 dropped: a deposed leader serves until it hears of the new term
 *   MUTANT_LEASE_FROM_RECEIPT  R1 dated from when the quorum's answers arrive: an answer sent
 *                              before the election and delivered late renews a deposed leader
 *   -DLL=4                     a leader lease longer than the new leader's wait (P2 fails)
 *
 * Witnesses (must be reachable, so the proof is not vacuous)
 *   REACH_HANDOVER             a lease of a later term reaches a consumer after one of term 1
 *   REACH_HELD_ENTRY           a deposed leader's checkpoint commits through the new leader
 */

#ifndef SKEW
#define SKEW 2     /* max clock skew, ticks */
#endif
#define CK 1       /* checkpoint interval (5 ms rounds up to a tick) */
#ifndef LL
#define LL 2       /* leader lease */
#endif
#define LT 5       /* the queue's leaseTime: longer than the new leader's wait, as in practice */
#define MAXTERM 3
#define NE 2

#ifdef MUTANT_NO_SKEW_WAIT
#define WAIT CK
#else
#define WAIT (CK + SKEW)
#endif

/*
 * A row's lease is kept as v = real ticks until the granter's clock reaches the stored
 * expiry, plus BIAS; it floors at 0, where every node's view has expired, and "no lease" is
 * v = 0. Node j's clock shows the expiry off[by] - off[j] ticks later than real.
 */
#define BIAS (2 * SKEW)
#ifdef MUTANT_NO_SKEW_HOLD
#define HOLD(j, by) 0
#else
#define HOLD(j, by) (by == j -> 0 : SKEW)
#endif
#define LIVE_AT(j, v, by) (v + off[by] + HOLD(j, by) > BIAS + off[j])

#ifdef MUTANT_NO_LEADER_LEASE
#define LEASED(i) true
#else
#define LEASED(i) (ll[i] > 0)
#endif
#define SERVING(i) (led[i] && ready[i] && wait[i] == 0 && LEASED(i))

#define DEC(x) if :: x > 0 -> x-- :: else fi

byte off[NE];
byte term;                   /* newest elected term (a majority has it) */

/* the committed cursor row: lease, granter, term of the entry that wrote it */
byte c_v, c_by, c_term;

bool led[NE];                /* believes it leads (a deposed leader may not know yet) */
byte eterm[NE];
bool ready[NE];              /* own-term entry applied, row loaded */
byte wait[NE];               /* ticks left before a ready leader serves */
byte ll[NE];                 /* ticks left of the leader lease (heartbeat round dated at send) */
byte m_v[NE], m_by[NE];      /* the engine's row */
bool dirty[NE];
bool fl[NE], inc[NE];        /* checkpoint in flight; held by the newest leader's log */
byte f_v[NE], f_by[NE], f_term[NE];
#ifdef MUTANT_NO_OWN_TERM_APPLY
byte a_v[NE], a_by[NE];      /* what the node has applied so far */
#endif
byte told_left;              /* real ticks left of the longest lease consumers were told of */
#ifdef MUTANT_LEASE_FROM_RECEIPT
bool late[NE];               /* an answer to a heartbeat sent before the election is en route */
#endif
bool told_t1;                /* ghost: a lease of term 1 reached its consumer */

inline tell(v) {
  printf("T a consumer is told a lease with %d real ticks left\n", v - BIAS);
  assert(told_left == 0);                                          /* P1 */
  if :: v > BIAS && v - BIAS > told_left -> told_left = v - BIAS :: else fi
}

inline tick() {
  printf("T tick\n");
  for (i : 0 .. NE - 1) {
    DEC(m_v[i]); DEC(f_v[i]); DEC(ll[i]); DEC(wait[i]);
#ifdef MUTANT_NO_OWN_TERM_APPLY
    DEC(a_v[i]);
#endif
  }
  DEC(c_v); DEC(told_left);
  i = 0
}

#ifdef MUTANT_LEASE_FROM_RECEIPT
/* the lease dated from when the answers arrive: one sent before the election may come late */
#define HB_OK(i)     (led[i] && (eterm[i] == term || late[i]))
#else
#define HB_OK(i)     (led[i] && eterm[i] == term)
#endif
#ifdef MUTANT_LEASE_FROM_RECEIPT
#define LATE_DONE(i) if :: eterm[i] < term -> late[i] = false :: else fi
#else
#define LATE_DONE(i) skip
#endif
#define POP_OK(i)    (SERVING(i) && !LIVE_AT(i, m_v[i], m_by[i]))
#define CKPT_OK(i)   (led[i] && dirty[i] && !fl[i])
#define COMMIT_OK(i) (led[i] && fl[i] && eterm[i] == term && f_term[i] == term)
#define DEPOSE_OK(i) (led[i] && eterm[i] < term)
#define OWN_OK(i)    (led[i] && eterm[i] == term && c_term < term)

inline pop(i) {
  printf("T e%d (term %d) leases the partition\n", i, eterm[i]);
  m_v[i] = LT + BIAS; m_by[i] = i; dirty[i] = true;
#ifdef MUTANT_ANSWER_BEFORE_COMMIT
  tell(m_v[i])
#else
  skip
#endif
}

inline checkpoint(i) {
  printf("T e%d logs a checkpoint\n", i);
  fl[i] = true; inc[i] = false;
  f_v[i] = m_v[i]; f_by[i] = m_by[i]; f_term[i] = eterm[i];
  dirty[i] = false
}

/* the newest leader's checkpoint reaches a majority: committed, its pop is answered */
inline commit(i) {
#ifdef REACH_HANDOVER
  assert(!(told_t1 && term >= 2));  /* witness: a new leader hands out a lease after the old did */
#endif
  if :: term == 1 -> told_t1 = true :: else fi;
  printf("T e%d's checkpoint commits in term %d\n", i, term);
  c_v = f_v[i]; c_by = f_by[i]; c_term = term;
  fl[i] = false;
#ifndef MUTANT_ANSWER_BEFORE_COMMIT
  tell(f_v[i])
#else
  skip
#endif
}

/* node j wins term+1 */
inline elect(j) {
  printf("T e%d wins term %d\n", j, term + 1);
  /* entries older than the last commit can never commit; at most one other may be in j's log */
  for (i : 0 .. NE - 1) {
    inc[i] = false;
    if
    :: fl[i] && f_term[i] < c_term -> fl[i] = false
    :: else
    fi
  }
  i = 0;
  if
  :: fl[0] -> inc[0] = true
  :: fl[1] -> inc[1] = true
  :: true
  fi;
#ifdef MUTANT_LEASE_FROM_RECEIPT
  for (i : 0 .. NE - 1) { late[i] = (led[i] && i != j) }
  i = 0;
#endif
  term++;
  led[j] = true; eterm[j] = term; dirty[j] = false; m_v[j] = 0; m_by[j] = 0;
  ll[j] = LL;                            /* the votes were a quorum's answer */
#ifdef MUTANT_NO_OWN_TERM_APPLY
  ready[j] = true; wait[j] = WAIT;
  m_v[j] = a_v[j]; m_by[j] = a_by[j]
#else
  ready[j] = false; wait[j] = 0
#endif
}

/* the new leader's own-term entry commits and applies; an entry its log held commits first */
inline own_term(i) {
  printf("T e%d applies its own-term entry\n", i);
  for (j : 0 .. NE - 1) {
    if
    :: fl[j] && inc[j] ->
#ifdef REACH_HELD_ENTRY
       assert(f_v[j] == 0);     /* witness: a deposed leader's lease commits through the winner */
#endif
       c_v = f_v[j]; c_by = f_by[j]; fl[j] = false; inc[j] = false
    :: else
    fi
  }
  j = 0;
  c_term = term;
#ifndef MUTANT_NO_OWN_TERM_APPLY
  m_v[i] = c_v; m_by[i] = c_by;
  ready[i] = true; wait[i] = WAIT
#else
  skip
#endif
}

active proctype world() {
  byte i, j;

  atomic {
    select(i : 0 .. SKEW); off[0] = i;
    select(i : 0 .. SKEW); off[1] = i;
    i = 0;
    /* a fresh cluster: node 0 leads term 1 and no lease exists */
    term = 1; c_term = 1;
    led[0] = true; eterm[0] = 1; ready[0] = true; ll[0] = LL
  };

  do
  ::
#ifndef ONLY_P1
     assert(!(SERVING(0) && SERVING(1)));     /* P2, in every state */
#endif

     atomic {
       if
       :: tick()
       :: HB_OK(0) -> ll[0] = LL; LATE_DONE(0)
       :: HB_OK(1) -> ll[1] = LL; LATE_DONE(1)
       :: POP_OK(0) -> pop(0)
       :: POP_OK(1) -> pop(1)
       :: CKPT_OK(0) -> checkpoint(0)
       :: CKPT_OK(1) -> checkpoint(1)
       :: COMMIT_OK(0) -> commit(0)
       :: COMMIT_OK(1) -> commit(1)
       :: DEPOSE_OK(0) -> led[0] = false
       :: DEPOSE_OK(1) -> led[1] = false
       :: term < MAXTERM -> elect(0)
       :: term < MAXTERM -> elect(1)
       :: OWN_OK(0) -> own_term(0)
       :: OWN_OK(1) -> own_term(1)
#ifdef MUTANT_NO_OWN_TERM_APPLY
       /* a node applies the committed row some time after commit */
       :: a_v[0] = c_v; a_by[0] = c_by
       :: a_v[1] = c_v; a_by[1] = c_by
#endif
       fi
     }
  od
}
