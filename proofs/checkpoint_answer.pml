/*
 * checkpoint_answer.pml: pops and acks answered only once their checkpoint commits, across
 * leader changes, lost replies and repeated acks.
 *
 * Abstracts
 *   One consumer group on one partition of M messages, batches of one message, a retry budget
 *   of BUDGET failed acks before the DLQ. The cursor row holds the cursor, the live or last
 *   lease, the retry counter and (rule A4) the leases whose failed acks charged it.
 *   Time is not modelled (lease_exclusivity.pml does that): a lease expires whenever the
 *   serving engine says so.
 *   Raft is reduced as in lease_exclusivity.pml: only the newest leader commits directly; at an
 *   election at most one in-flight checkpoint of a term not older than the last commit may be
 *   in the winner's log and commits with the winner's own-term entry; a new leader loads the
 *   committed row after that entry applies. A deposed leader may go on serving from memory
 *   until it hears of the new term, but not once the new leader serves (the leader lease and
 *   the new leader's wait, proved in lease_exclusivity.pml); nothing it logs after the
 *   election can commit.
 *   Clients pop (again after a 503), ack (completed or failed), may see 503 at any point while
 *   waiting (leader change, deadline, lost reply), and repeat an ack after a 503. A request
 *   whose client saw 503 before it arrived may still arrive later (an orphan), and its answer
 *   goes nowhere. Once the new leader serves, a deposed engine is retired: it can neither
 *   serve nor commit again, and whoever waits on it gets 503.
 *
 * Rules modelled (seed "Ack", "After a leader change"; reference 3.7)
 *   A1 pops and acks change the engine's row in memory; a checkpoint logs the row;
 *   A2 every answer, also one that changed nothing, waits until the state it was read from has
 *      committed in the engine's term;
 *   A3 an ack is checked against the live lease (same lease, not expired);
 *   A4 a repeated ack is recognised: below the cursor it is settled (by this lease if the row's
 *      last lease is this one, else by another holder: noop); a failed ack whose lease is in the
 *      row's list of leases that charged the retry counter was applied.
 *
 * Bounds: 2 engine nodes (a third voter implied), terms <= 3, K = 2 clients, M = 2 messages,
 *   NL = 3 leases in all, BUDGET = 1, one repeat per ack, one orphan per client, one
 *   checkpoint in flight per engine.
 *
 * Properties (assertions; cnt(l) = how often an ack of lease l is applied in the committed row)
 *   Q1 nothing answered is lost: [] (answered_applied(l) -> cnt(l) == 1)
 *        && (answered_lease(l) -> l in committed row) && (answered_noop(m) -> cursor > m)
 *      (with answers before commit, checked when a new leader loads the row)
 *   Q2 a repeated ack is answered as applied iff it applied: at every answer, applied ->
 *      cnt(l) == 1, rejected -> cnt(l) == 0 (and stays 0), noop -> the message is settled
 *   Q3 no ack applied twice: [] cnt(l) <= 1 (l = 0 counts acks sent without a leaseId)
 *
 * Mutants (each must be refuted)
 *   MUTANT_ANSWER_BEFORE_COMMIT    A2 dropped for changes (QUEEN_CONSUME_FAST=1)
 *   MUTANT_READ_FROM_MEMORY        A2 dropped for answers that changed nothing
 *   MUTANT_SKIP_LEASE_CHECK        A3 dropped (Mutants::skip_lease_check in core/node/config.h)
 *   MUTANT_LEASE_CHECK_FIRST       A4 dropped: a repeat is checked against the live lease first
 *   MUTANT_ONLY_LAST_LEASE         A4 as the seed words it: only the row's last released lease
 *                                  is remembered, so a failed ack is unknown once re-leased
 *   MUTANT_UNLEASED_FAILED_ACK     a failed ack may come without a leaseId, which the seed lets
 *                                  skip the lease check: nothing names it, so a repeat charges
 *                                  the retry budget again
 *   MUTANT_SERVE_OVERLAP           a deposed engine still serves once the new leader does
 *   MUTANT_NO_OWN_TERM_APPLY       a new leader serves at once from the rows it has applied
 *
 * Witness (must be reachable): REACH_FAILED_REPEAT, a failed ack recognised by A4 after a
 *   leader change and after its partition was leased again.
 */

#define NE 2
#define MAXTERM 3
#define K 2
#define M 2
#define NL 3
#define BUDGET 1
#define MAXREP 1

/* client states; each client runs one pop and its ack, repeats included */
#define IDLE 0
#define POP_WAIT 1
#define HOLD 2
#define ACK_SENT 3     /* in the network */
#define ACK_WAIT 4     /* read or applied by an engine, waiting for its checkpoint */
#define UNKNOWN 5      /* saw 503 */
#define DONE 6

/* answers */
#define A_APPLIED 1
#define A_NOOP 2
#define A_REJECT 3

#define COMPLETED 0
#define FAILED 1

typedef Row {
  byte next;     /* cursor */
  byte lid;      /* live or last lease */
  bool live;
  byte rc;       /* retry counter */
  byte rl;       /* A4: leases (bit l) whose failed ack charged rc since the cursor last moved */
  bool lf;       /* the last lease ended by a failed ack (all the seed's rule remembers) */
  byte gapp;     /* ghost: 2 bits per lease, acks of it applied */
  byte gl        /* ghost: leases (bit l) ever granted */
};

#define BIT(l) (1 << (l))
#define CNT(r, l) ((r.gapp >> (2 * (l))) & 3)

inline copy_row(d, s) {
  d.next = s.next; d.lid = s.lid; d.live = s.live; d.rc = s.rc; d.rl = s.rl; d.lf = s.lf;
  d.gapp = s.gapp; d.gl = s.gl
}

/* dead values are zeroed so that states differing only in them are one state */
inline zero_row(d) {
  d.next = 0; d.lid = 0; d.live = 0; d.rc = 0; d.rl = 0; d.lf = 0; d.gapp = 0; d.gl = 0
}

byte term;
Row c;                 /* committed row */
byte c_term;

bool led[NE], ready[NE], dirty[NE], fl[NE], inc[NE], dead[NE];
byte eterm[NE], f_term[NE];
Row m[NE], f[NE];
#ifdef MUTANT_NO_OWN_TERM_APPLY
Row a[NE];
#endif

byte nlid;
byte st[K], cm[K], cl[K], cs[K], we[K], ans[K], rep[K];
bool wst[K];           /* 0: its state is not yet in a checkpoint; 1: in the engine's flight */
bool orph[K];

/* ghosts of what clients were told */
byte t_app, t_rej, t_lease, t_noop;

#define SERVING(e) (led[e] && ready[e])
#define WAITING(k) (st[k] == POP_WAIT || st[k] == ACK_WAIT)

/*
 * What clients were told must be in the committed row. Checked in every state; with answers
 * before commit (the FAST mutant) only when a new leader loads the row, since that is when a
 * lost change bites.
 */
inline check_committed() {
  for (l : 1 .. NL) {
    assert(!(t_app & BIT(l)) || CNT(c, l) == 1);                  /* Q1, Q2 */
    assert(!(t_rej & BIT(l)) || CNT(c, l) == 0);                  /* Q2 */
    assert(!(t_lease & BIT(l)) || (c.gl & BIT(l)))                /* Q1 */
  }
  l = 0;
  assert(c.next >= t_noop)                                        /* Q1 */
}

/* an answer reaches client k */
inline deliver(k) {
  printf("T answer c%d state %d ans %d lease %d\n", k, st[k], ans[k], cl[k]);
  if
  :: st[k] == POP_WAIT -> t_lease = t_lease | BIT(cl[k]); st[k] = HOLD
  :: st[k] == ACK_WAIT ->
     if
     :: ans[k] == A_APPLIED -> t_app = t_app | BIT(cl[k])
     :: ans[k] == A_REJECT -> t_rej = t_rej | BIT(cl[k])
     :: ans[k] == A_NOOP -> if :: cm[k] + 1 > t_noop -> t_noop = cm[k] + 1 :: else fi
     fi;
     st[k] = DONE
  fi;
  we[k] = 0; wst[k] = 0; ans[k] = 0
}

/* 503: leader change, deadline or lost reply */
inline lose_reply(k) {
  printf("T 503 c%d\n", k);
  if
  :: st[k] == POP_WAIT -> st[k] = IDLE; cm[k] = 0; cl[k] = 0
  :: st[k] == ACK_WAIT -> st[k] = UNKNOWN
  fi;
  we[k] = 0; wst[k] = 0; ans[k] = 0
}

/* A2: client k waits for the state engine e holds now */
inline await(k, e, changed) {
  we[k] = e;
#if defined(MUTANT_ANSWER_BEFORE_COMMIT)
  deliver(k)
#elif defined(MUTANT_READ_FROM_MEMORY)
  if
  :: changed -> wst[k] = 0
  :: !changed -> deliver(k)
  fi
#else
  if
  :: dirty[e] -> wst[k] = 0
  :: !dirty[e] && fl[e] -> wst[k] = 1
  :: !dirty[e] && !fl[e] -> deliver(k)
  fi
#endif
}

inline pop(e, k) {
  nlid++;
  printf("T pop c%d e%d lease %d msg %d\n", k, e, nlid, m[e].next);
  m[e].lid = nlid; m[e].live = true; m[e].lf = false; m[e].gl = m[e].gl | BIT(nlid);
  dirty[e] = true;
  cm[k] = m[e].next; cl[k] = nlid; st[k] = POP_WAIT;
  await(k, e, true)
}

/* the engine's ack rules (guards exclusive, so the order is the rules' order) */
inline ack_rules(e, mm, ll, ss) {
  chg = false;
  if
#ifndef MUTANT_LEASE_CHECK_FIRST
  :: mm < m[e].next ->                                            /* A4: settled */
     res = (m[e].lid == ll -> A_APPLIED : A_NOOP)
#ifdef MUTANT_ONLY_LAST_LEASE
  :: mm == m[e].next && m[e].lid == ll && !m[e].live && m[e].lf -> res = A_APPLIED
#else
  :: mm == m[e].next && (m[e].rl & BIT(ll)) ->
#ifdef REACH_FAILED_REPEAT
     /* witness: a failed ack recognised after a leader change, its partition leased again */
     assert(!(term >= 2 && m[e].lid != ll));
#endif
     res = A_APPLIED
#endif
#endif
#if defined(MUTANT_SKIP_LEASE_CHECK)
  :: mm == m[e].next && !(m[e].rl & BIT(ll)) ->
#elif defined(MUTANT_UNLEASED_FAILED_ACK)
  :: mm == m[e].next && !(m[e].rl & BIT(ll)) && (ll == 0 || m[e].lid == ll && m[e].live) ->
#else
  :: mm == m[e].next && m[e].lid == ll && m[e].live ->            /* A3 */
#endif
     m[e].gapp = m[e].gapp + (1 << (2 * ll));
     m[e].live = false;
     if
     :: ss == COMPLETED -> m[e].next++; m[e].rc = 0; m[e].rl = 0; m[e].lf = false
     :: ss == FAILED && m[e].rc < BUDGET ->
        m[e].rc++; m[e].lf = true;
        if :: ll != 0 -> m[e].rl = m[e].rl | BIT(ll) :: else fi   /* no lease, nothing to name */
     :: ss == FAILED && m[e].rc >= BUDGET ->                      /* to the DLQ */
        m[e].next++; m[e].rc = 0; m[e].rl = 0; m[e].lf = false
     fi;
     chg = true; dirty[e] = true; res = A_APPLIED
  :: else -> res = A_REJECT
  fi
}

inline ack(e, k) {
  ack_rules(e, cm[k], cl[k], cs[k]);
  printf("T ack c%d e%d msg %d lease %d status %d -> %d (rep %d)\n",
         k, e, cm[k], cl[k], cs[k], res, rep[k]);
  ans[k] = res; st[k] = ACK_WAIT;
  await(k, e, chg);
  res = 0; chg = false
}

/* an earlier copy of client k's ack arrives; nobody hears its answer */
inline orphan(e, k) {
  ack_rules(e, cm[k], cl[k], cs[k]);
  printf("T orphan ack c%d e%d msg %d lease %d -> %d\n", k, e, cm[k], cl[k], res);
  orph[k] = false; res = 0; chg = false
}

inline checkpoint(e) {
  printf("T checkpoint e%d term %d\n", e, eterm[e]);
  copy_row(f[e], m[e]); fl[e] = true; inc[e] = false; dead[e] = false; f_term[e] = eterm[e];
  dirty[e] = false;
  for (k : 0 .. K - 1) {
    if :: WAITING(k) && we[k] == e && wst[k] == 0 -> wst[k] = 1
       :: else fi
  }
  k = 0
}

/* the newest leader's checkpoint reaches a majority; the answers waiting on it go out */
inline commit(e) {
  printf("T commit e%d term %d\n", e, term);
  copy_row(c, f[e]); c_term = term;
  fl[e] = false; zero_row(f[e]); f_term[e] = 0;
  for (k : 0 .. K - 1) {
    if
    :: WAITING(k) && we[k] == e && wst[k] == 1 ->
       if :: deliver(k) :: lose_reply(k) fi
    :: else
    fi
  }
  k = 0
}

/* an engine that can never commit or serve again; whoever waits on it gets 503 */
inline retire(e) {
  for (k : 0 .. K - 1) { if :: WAITING(k) && we[k] == e -> lose_reply(k) :: else fi }
  k = 0;
  led[e] = false; ready[e] = false; dirty[e] = false; fl[e] = false; inc[e] = false;
  dead[e] = false; eterm[e] = 0; f_term[e] = 0; zero_row(m[e]); zero_row(f[e])
}

/* node j wins term+1 */
inline elect(j) {
  printf("T elect e%d term %d\n", j, term + 1);
  /* entries older than the last commit can never commit; at most one other may be in j's log */
  for (e : 0 .. NE - 1) {
    inc[e] = false;
    if :: fl[e] && f_term[e] < c_term -> dead[e] = true :: else fi
  }
  e = 0;
  if
  :: fl[0] && !dead[0] -> inc[0] = true
  :: fl[1] && !dead[1] -> inc[1] = true
  :: true
  fi;
  term++;
  /* j's engine starts afresh: whoever waited on its old self gets 503 */
  for (k : 0 .. K - 1) { if :: WAITING(k) && we[k] == j -> lose_reply(k) :: else fi }
  k = 0;
  if :: fl[j] && !inc[j] -> dead[j] = true :: else fi;
  led[j] = true; eterm[j] = term; dirty[j] = false; zero_row(m[j]);
#ifdef MUTANT_NO_OWN_TERM_APPLY
  ready[j] = true; copy_row(m[j], a[j])
#else
  ready[j] = false
#endif
}

/* the new leader's own-term entry commits and applies; an entry its log held commits first */
inline own_term(i) {
  printf("T own-term e%d term %d\n", i, term);
  for (e : 0 .. NE - 1) {
    if :: fl[e] && inc[e] -> copy_row(c, f[e]); inc[e] = false; dead[e] = true :: else fi
  }
  e = 0;
  c_term = term;
  check_committed();
  fl[i] = false; dead[i] = false; inc[i] = false; f_term[i] = 0; zero_row(f[i]);
  /*
   * A deposed leader has stopped serving before the new one starts, and cannot start again
   * without a quorum (lease_exclusivity.pml, P2: the leader lease and the new leader's wait).
   * Without it a deposed engine answers from a row that committed but is no longer the newest.
   */
#ifndef MUTANT_SERVE_OVERLAP
  for (e : 0 .. NE - 1) { if :: e != i && eterm[e] < term -> retire(e) :: else fi }
  e = 0;
#endif
#ifndef MUTANT_NO_OWN_TERM_APPLY
  copy_row(m[i], c); ready[i] = true
#else
  skip
#endif
}

#define CKPT_OK(e)   (led[e] && dirty[e] && !fl[e])
#define COMMIT_OK(e) (led[e] && fl[e] && !dead[e] && eterm[e] == term && f_term[e] == term)
#define OWN_OK(e)    (led[e] && eterm[e] == term && c_term < term)
#define POP_OK(e)    (SERVING(e) && !m[e].live && m[e].next < M && nlid < NL)

active proctype world() {
  byte e, k, l, res;
  bool chg;

  atomic { term = 1; c_term = 1; led[0] = true; eterm[0] = 1; ready[0] = true };

  do
  :: atomic {
       for (l : 0 .. NL) { assert(CNT(c, l) <= 1) }               /* Q3 */
       l = 0;
#ifndef MUTANT_ANSWER_BEFORE_COMMIT
       check_committed();
#endif
       if
       /* clients */
       :: select(k : 0 .. K - 1); select(e : 0 .. NE - 1);
          if
          :: st[k] == IDLE && POP_OK(e) -> pop(e, k)
          :: st[k] == HOLD -> select(l : COMPLETED .. FAILED); cs[k] = l; l = 0; st[k] = ACK_SENT
#ifdef MUTANT_UNLEASED_FAILED_ACK
          :: st[k] == HOLD -> cs[k] = FAILED; cl[k] = 0; st[k] = ACK_SENT  /* no leaseId */
#endif
          :: st[k] == ACK_SENT && SERVING(e) -> ack(e, k)
          :: st[k] == ACK_SENT && e == 0 -> st[k] = UNKNOWN       /* 503 before it arrived ... */
          :: st[k] == ACK_SENT && e == 0 && !orph[k] ->            /* ... still on its way */
             orph[k] = true; st[k] = UNKNOWN
          :: WAITING(k) && e == 0 -> lose_reply(k)                 /* deadline */
          :: st[k] == UNKNOWN && rep[k] < MAXREP && e == 0 -> rep[k]++; st[k] = ACK_SENT
          :: st[k] == UNKNOWN && rep[k] == MAXREP && e == 0 -> st[k] = DONE
          :: orph[k] && SERVING(e) -> orphan(e, k)
          :: orph[k] && e == 0 -> orph[k] = false                  /* lost */
          :: else
          fi;
          k = 0; e = 0
       /* engines */
       :: SERVING(0) && m[0].live -> printf("T expire e0\n"); m[0].live = false; m[0].lf = false; dirty[0] = true
       :: SERVING(1) && m[1].live -> printf("T expire e1\n"); m[1].live = false; m[1].lf = false; dirty[1] = true
       :: CKPT_OK(0) -> checkpoint(0)
       :: CKPT_OK(1) -> checkpoint(1)
       :: COMMIT_OK(0) -> commit(0)
       :: COMMIT_OK(1) -> commit(1)
       :: term < MAXTERM -> elect(0)
       :: term < MAXTERM -> elect(1)
       :: OWN_OK(0) -> own_term(0)
       :: OWN_OK(1) -> own_term(1)
#ifdef MUTANT_NO_OWN_TERM_APPLY
       :: copy_row(a[0], c)
       :: copy_row(a[1], c)
#endif
       fi
     }
  od
}
