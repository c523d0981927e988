/*
 * txn_reservation.pml: a transaction that acks two partitions and pushes one message, against
 * pops, plain acks, lease expiries, checkpoints, its reservation's TTL and a leader change.
 *
 * Abstracts
 *   One consumer group, partitions P0 and P1 with one message each. A worker W holds a live,
 *   committed lease on both and sends one transaction: ack P0, ack P1, push X. A second
 *   consumer pops whatever is claimable; W may also send a plain ack of P0 that races its own
 *   transaction. A cursor row is (consumed, lease id, live) plus a ghost bit: consumed by the
 *   transaction. The log is a FIFO of at most LOGCAP uncommitted entries, each a checkpoint
 *   (some rows) or the transaction's entry (its rows and the push, one entry in two logs: the
 *   queue log of X and the log holding the cursor rows). Commit takes the head; the engine on
 *   the leader applies it. A leader change (at most one) commits a prefix of the uncommitted
 *   entries and drops the rest; the first dropped entry may be torn, one of its two copies
 *   durable. The new leader rebuilds the engine from the committed rows: no reservation.
 *   Time only shows as the TTL firing, or not, at any moment.
 *
 * Rules modelled (seed "Transaction"; reference 3.7)
 *   X1 the engine checks the transaction's acks on shadow copies of the rows (lease live, same
 *      lease, not yet consumed); a failure rolls back (rejected_ack), nothing logged;
 *   X2 it reserves both partitions (a conflict answers reserved): no pop, ack, expiry or
 *      checkpoint touches a reserved row (its lease is held past its expiry); the shadow rows
 *      go to the planner;
 *   X3 the TTL (QUEEN_CONSUME_TXN_TTL_MS) can end a reservation only before the planner has
 *      taken the rows; the planner takes them only from a reservation still in force; after
 *      that the reservation ends when the entry lands or the leader is lost;
 *   X4 the planner may still roll back (duplicate, kv_precondition): release, nothing logged;
 *   X5 the entry lands whole or not at all: recovery replays it only if both copies are there;
 *      when it lands the engine takes its rows and releases the reservation.
 *
 * Bounds: 2 partitions, 1 transaction, 1 other consumer, lease ids <= 4, LOGCAP = 3 entries in
 *   flight, 1 leader change, 1 plain ack racing the transaction.
 *
 * Properties (assertions)
 *   T1 all or nothing, and acks not undone: [] (pushed <-> (c0.txacked && c1.txacked))
 *   T2 no partition is leased to a pop while a transaction that acks it may still land:
 *      at every grant, assert(txn not in {RESERVED, PLANNED})
 *   T3 an expired reservation never lets the transaction land: at landing, assert(!expired)
 *
 * Mutants (each must be refuted)
 *   MUTANT_NO_SHADOW             X1: acks applied to the live rows, kept after a rollback
 *   MUTANT_LEASE_NOT_HELD        X2 dropped for the lease: a reserved row's lease expires and
 *                                its partition is claimed
 *   MUTANT_CKPT_IGNORES_RESERVED X2 dropped for checkpoints
 *   MUTANT_TTL_AFTER_HANDOFF     X3: the TTL still runs once the entry is in the log
 *   MUTANT_NO_TTL_CHECK_AT_PLAN  X3: the planner takes the rows of an expired reservation
 *   MUTANT_REPLAY_PARTIAL_ENTRY  X5: recovery replays the copy it has of a torn entry
 *                                (Mutants::replay_partial_entry in core/node/config.h)
 *
 * Witness (must be reachable): REACH_LANDS_ELSEWHERE, the entry commits through the next
 *   leader after the one that logged it is lost.
 */

#define NP 2
#define LOGCAP 3
#define MAXLID 4

/* transaction states */
#define T_NONE 0
#define T_RESERVED 1     /* validated on shadows, partitions reserved, not yet planned */
#define T_PLANNED 2      /* its entry is in the log */
#define T_LANDED 3
#define T_ROLLEDBACK 4
#define T_EXPIRED 5
#define T_LOST 6         /* 503 after a leader change; a retry gets the recorded outcome */

#define E_CKPT 0
#define E_TXN 1

typedef Row { bool done; byte lid; bool live; bool tx };
typedef Entry { byte kind; byte mask; Row r[NP] };

/* what the log has committed */
Row c[NP];
bool pushed;

/* the leader's engine */
Row m[NP];
bool dirty[NP], rsv[NP];
byte wl[NP];                 /* W's lease on each partition */
byte nlid;

byte txn;
Row sh[NP];                  /* shadow rows handed to the planner */
bool expired;                /* ghost: the reservation's TTL fired */
bool plain_sent;
bool changed;                /* the one leader change happened */

Entry log[LOGCAP];
byte nlog;

inline copy_row(d, s) { d.done = s.done; d.lid = s.lid; d.live = s.live; d.tx = s.tx }
inline zero_row(d) { d.done = 0; d.lid = 0; d.live = 0; d.tx = 0 }

inline append_ckpt(mask_) {
  log[nlog].kind = E_CKPT; log[nlog].mask = mask_;
  for (p : 0 .. NP - 1) {
    if :: mask_ & (1 << p) -> copy_row(log[nlog].r[p], m[p]) :: else fi
  }
  p = 0;
  nlog++
}

inline append_txn() {
  log[nlog].kind = E_TXN; log[nlog].mask = 3;
  for (p : 0 .. NP - 1) { copy_row(log[nlog].r[p], sh[p]) }
  p = 0;
  nlog++
}

/* apply entry i to the committed state; part: 1 rows, 2 push, 3 both */
inline apply(i, part) {
  if
  :: part & 1 ->
     for (p : 0 .. NP - 1) {
       if :: log[i].mask & (1 << p) -> copy_row(c[p], log[i].r[p]) :: else fi
     }
     p = 0
  :: else
  fi;
  if :: log[i].kind == E_TXN && (part & 2) -> pushed = true :: else fi
}

inline shift_log() {
  for (q : 1 .. LOGCAP - 1) {
    log[q - 1].kind = log[q].kind; log[q - 1].mask = log[q].mask;
    for (p : 0 .. NP - 1) { copy_row(log[q - 1].r[p], log[q].r[p]) }
  }
  log[LOGCAP - 1].kind = 0; log[LOGCAP - 1].mask = 0;
  for (p : 0 .. NP - 1) { zero_row(log[LOGCAP - 1].r[p]) }
  p = 0; q = 0;
  nlog--
}

/* the head entry commits; on the leader the engine applies it */
inline commit() {
  apply(0, 3);
  if
  :: log[0].kind == E_TXN ->
     assert(!expired);                                              /* T3 */
     printf("T txn lands\n");
     for (p : 0 .. NP - 1) { copy_row(m[p], sh[p]); dirty[p] = false; rsv[p] = false }
     p = 0;
     txn = T_LANDED
  :: else -> printf("T checkpoint commits\n")
  fi;
  shift_log()
}

/* the leader is lost: a prefix of the log commits, the rest is dropped, the first maybe torn */
inline lose_leader() {
  printf("T leader change\n");
  do
  :: nlog > 0 -> commit_elsewhere()
  :: nlog > 0 -> torn(); break
  :: true -> break
  od;
  do :: nlog > 0 -> shift_log() :: else -> break od;
  /* the new leader's engine: the committed rows, no reservation, no pending change */
  for (p : 0 .. NP - 1) { copy_row(m[p], c[p]); dirty[p] = false; rsv[p] = false; zero_row(sh[p]) }
  p = 0;
  if :: txn == T_RESERVED || txn == T_PLANNED -> txn = T_LOST :: else fi;
  changed = true
}

/* the head entry commits under the next leader; this engine is gone, so only the log moves */
inline commit_elsewhere() {
  if
  :: log[0].kind == E_TXN ->
     assert(!expired);                                              /* T3 */
#ifdef REACH_LANDS_ELSEWHERE
     assert(false);             /* witness: the entry lands through the next leader */
#endif
     txn = T_LANDED
  :: else
  fi;
  apply(0, 3);
  shift_log()
}

/* the head entry was cut by the crash: one of its two copies may be durable */
inline torn() {
#ifdef MUTANT_REPLAY_PARTIAL_ENTRY
  if
  :: log[0].kind == E_TXN ->
     select(q : 1 .. 2);                /* the copy that survived: rows or push */
     printf("T torn txn entry replayed, part %d\n", q);
     apply(0, q); q = 0
  :: else
  fi
#else
  skip                                  /* replayed only when every copy is present */
#endif
}

/*
 * X2 for the lease: a reserved row's lease neither expires nor is claimed. Either half alone
 * is enough (no expiry leaves nothing to claim; no claim makes an expiry harmless), so the
 * mutant drops both.
 */
#ifdef MUTANT_LEASE_NOT_HELD
#define POP_OK(p) (!m[p].live && !m[p].done && nlid < MAXLID)
#define EXPIRE_OK(p) (m[p].live)
#else
#define POP_OK(p) (!m[p].live && !m[p].done && !rsv[p] && nlid < MAXLID)
#define EXPIRE_OK(p) (m[p].live && !rsv[p])
#endif

#ifdef MUTANT_CKPT_IGNORES_RESERVED
#define CKPT_ROW(p) (dirty[p] || rsv[p])
#else
#define CKPT_ROW(p) (dirty[p] && !rsv[p])
#endif

#ifdef MUTANT_TTL_AFTER_HANDOFF
#define TTL_OK (txn == T_RESERVED || txn == T_PLANNED)
#else
#define TTL_OK (txn == T_RESERVED)
#endif

#ifdef MUTANT_NO_TTL_CHECK_AT_PLAN
#define PLAN_OK (txn == T_RESERVED || txn == T_EXPIRED && !planned_once)
bool planned_once;
#else
#define PLAN_OK (txn == T_RESERVED)
#endif

active proctype world() {
  byte p, q, mask;
  bool ok;

  atomic {
    /* W holds committed, live leases 1 and 2 */
    for (p : 0 .. NP - 1) {
      nlid++; wl[p] = nlid;
      c[p].lid = nlid; c[p].live = true; copy_row(m[p], c[p])
    }
    p = 0
  };

  do
  :: atomic {
       assert(pushed == (c[0].tx && c[1].tx));                      /* T1 */
       if
       /* a second consumer pops a claimable partition */
       :: select(p : 0 .. NP - 1);
          if
          :: POP_OK(p) ->
             assert(!(txn == T_RESERVED || txn == T_PLANNED));      /* T2 */
             nlid++; printf("T pop P%d lease %d\n", p, nlid);
             m[p].lid = nlid; m[p].live = true; dirty[p] = true
          :: else
          fi;
          p = 0

       /* a lease expires on the leader's clock: not while its row is reserved */
       :: select(p : 0 .. NP - 1);
          if
          :: EXPIRE_OK(p) ->
             printf("T lease on P%d expires\n", p); m[p].live = false; dirty[p] = true
          :: else
          fi;
          p = 0

       /* W's plain ack of P0, racing its transaction */
       :: !plain_sent ->
          plain_sent = true;
          if
          :: rsv[0] -> printf("T plain ack: reserved\n")
          :: !rsv[0] && m[0].lid == wl[0] && m[0].live && !m[0].done ->
             printf("T plain ack applied\n");
             m[0].done = true; m[0].live = false; dirty[0] = true
          :: else -> printf("T plain ack rejected\n")
          fi

       /* a checkpoint logs the changed rows that are not reserved */
       :: nlog < LOGCAP ->
          mask = 0;
          for (p : 0 .. NP - 1) { if :: CKPT_ROW(p) -> mask = mask | (1 << p) :: else fi }
          p = 0;
          if
          :: mask != 0 ->
             printf("T checkpoint rows %d\n", mask);
             append_ckpt(mask);
             for (p : 0 .. NP - 1) { if :: mask & (1 << p) -> dirty[p] = false :: else fi }
             p = 0
          :: else
          fi;
          mask = 0

       /* the transaction reaches the engine: shadow validation, then reservation */
       :: txn == T_NONE ->
          ok = true;
          for (p : 0 .. NP - 1) {
            if
            :: rsv[p] || !(m[p].lid == wl[p] && m[p].live && !m[p].done) -> ok = false
            :: else
            fi
          }
          if
          :: ok ->
             printf("T txn validated, P0 P1 reserved\n");
             for (p : 0 .. NP - 1) {
               copy_row(sh[p], m[p]); sh[p].done = true; sh[p].live = false; sh[p].tx = true;
               rsv[p] = true;
#ifdef MUTANT_NO_SHADOW
               copy_row(m[p], sh[p]); dirty[p] = true;
#endif
             }
             txn = T_RESERVED
          :: else -> printf("T txn rejected_ack\n"); txn = T_ROLLEDBACK
          fi;
          p = 0; ok = false

       /* the reservation's TTL fires */
       :: TTL_OK ->
          printf("T reservation expires\n");
          for (p : 0 .. NP - 1) { rsv[p] = false }
          p = 0;
          expired = true;
          if :: txn == T_RESERVED -> txn = T_EXPIRED :: else fi

       /* the planner takes the transaction: rolls it back, or logs one entry */
       :: PLAN_OK && nlog < LOGCAP ->
#ifdef MUTANT_NO_TTL_CHECK_AT_PLAN
          planned_once = true;
#endif
          if
          :: printf("T planner logs the txn entry\n");
             append_txn(); txn = T_PLANNED
          :: txn == T_RESERVED ->
             printf("T planner rolls back (duplicate)\n");
             for (p : 0 .. NP - 1) { rsv[p] = false; zero_row(sh[p]) }
             p = 0;
             txn = T_ROLLEDBACK
          fi

       :: nlog > 0 -> commit()
       :: !changed -> lose_leader()
       fi
     }
  od
}
