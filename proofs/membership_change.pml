/*
 * membership_change.pml: Raft cluster membership changes, one voter at a time.
 *
 * Abstracts
 *   N servers, each with a persistent term, a "voted in this term" bit and a log, and, while it
 *   leads, a commit index and what it knows each server holds of its log (match). A log entry
 *   is its term and its kind: the empty entry a new leader proposes, data, or a configuration
 *   (its set of voters). A server outside the configuration it uses is a learner there: it
 *   takes the log like anyone and is never counted. INIT, the first configuration, is
 *   committed before the first entry. Messages are atomic RPCs, not a network:
 *   - An election is one step: a server wins a term above its own with the votes of exactly a
 *     majority of the voters of the configuration it uses (its own among them if it is one);
 *     each must be below that term, or in it without a vote, and hold a log no more up to date
 *     than the candidate's; they all take the term and spend their vote. Any server may
 *     campaign, a learner or a removed server too, counting only the voters of its own latest
 *     configuration. Failed campaigns and terms learnt from late messages are left out: a
 *     raised term only makes a server refuse votes and appends, and a refusal is also a lost
 *     message; a winner may skip terms, which stands for the terms it had learnt.
 *   - An append is one step: the leader sends its whole log; a server of a higher term refuses
 *     it (the leader takes that term and steps down); otherwise the server takes the leader's
 *     term, keeps its log up to the first entry that differs and replaces the rest from there
 *     with the leader's (a matching longer log is left as it is), and the leader records the
 *     match at once. A late append of the same term carries a prefix of the leader's log: as if
 *     sent, and taken, before the leader appended the rest. A late or lost acknowledgement
 *     only moves a commit to a later moment, at which the model counts too.
 *   - After every step a leader counts: an entry commits when it has the leader's term and a
 *     majority of the voters of the leader's latest configuration hold it (the leader by its
 *     log, the others by match). A new leader's commit index starts at 0: what it learnt as a
 *     follower matters only without C2.
 *   Term, vote and log are durable at once; a leader that crashes stops acting, or campaigns
 *   again (a leader may win a later term directly). Data entries only with -DWITH_DATA;
 *   without them a leader's entries after its empty one are configuration changes.
 *   Traces print a set of servers as one character per server, s0 first: its number if it is
 *   in the set, '.' if not (the fifth is always '.' with N = 4).
 *
 * Rules modelled (Raft dissertation section 4 with the fix; core/raft/raft.cpp: membership(),
 * on_membership_entry, check_change, maybe_commit with counted() and self_voter(), after_commit)
 *   C1 a server uses the latest configuration in its log, committed or not; when a suffix of
 *      its log is dropped it uses the latest left (here: computed from the log each time);
 *   C2 a leader proposes a change only after an entry of its own term has committed (the
 *      empty entry every new leader proposes);
 *   C3 at most one change in flight: a leader proposes one only when every configuration entry
 *      in its log has committed;
 *   C4 a change adds or removes exactly one voter; learners never count, in votes or in
 *      commit;
 *   C5 a leader that is not a voter of the configuration it uses does not count itself, and
 *      steps down once that configuration commits.
 *   Votes and commit are counted against the configuration the counting server uses then.
 *
 * Bounds: N (5) servers; INIT (15) = voters {s0 s1 s2 s3}, s4 a learner; terms <= MAXTERM (3);
 *   logs of at most LOGLEN (2) entries (a leader whose log is full proposes nothing more).
 *   Also run: -DN=4 -DINIT=7 (voters {s0 s1 s2}, s3 a learner) with -DLOGLEN=4, and with
 *   -DLOGLEN=3 -DWITH_DATA.
 *
 * Properties (assertions)
 *   E1 election safety: at most one leader per term, over every leader there was:
 *      at each election, assert(!led[t])
 *   L1 leader completeness: an entry committed by the leader of term u is in the log of every
 *      leader of a term above u: asserted at each election for what has committed, and at
 *      each commit against the log every leader of a later term had when elected (elog)
 *   L2 an index never commits two different entries (state machine safety, what L1 protects)
 *   -DONLY_L1 compiles E1 out: L1 alone then refutes each mutant too (not run by check.sh).
 *
 * Mutants (each must be refuted)
 *   MUTANT_NO_OWN_TERM_COMMIT  C2 dropped: a new leader proposes a change at once (the 2015 bug)
 *   MUTANT_LEARNER_IN_QUORUM   C4: a learner's vote and match count towards a majority
 *   MUTANT_TWO_IN_FLIGHT       C3 dropped: a change proposed while another is uncommitted
 *   MUTANT_TWO_AT_ONCE         C4: one change may add or remove two voters
 *   The last two are run from 3 voters (-DN=4 -DINIT=7 -DLOGLEN=4): from 4 voters, every
 *   configuration two changes away still shares a voter with each majority of INIT, so they
 *   need a committed change first, which the bounds leave no room for.
 *
 * Witnesses (must be reachable, so the proof is not vacuous)
 *   REACH_NEW_CONFIG           a change commits and a leader of a later term, a voter of the
 *                              new configuration, is elected under it
 *   REACH_PROMOTED             a server that started as a learner is counted in an election
 */

#ifndef N
#define N 5
#endif
#ifndef INIT
#define INIT 15                  /* voters {s0 s1 s2 s3}; s4 a learner */
#endif
#ifndef MAXTERM
#define MAXTERM 3
#endif
#ifndef LOGLEN
#define LOGLEN 2
#endif
#define ALL ((1 << N) - 1)

#define FOLLOWER 0
#define LEADER 1
#define NONE 0
#define VOTED 1                  /* whom the vote went to never matters again: a candidate
                                    does not campaign twice in a term */

/* an entry is one byte: its term in bits 6-7, its kind in bits 0-5: NOOP (the empty entry a new
   leader proposes), DATA, or 1..31, a configuration as its set of voters (bit s: server s);
   0 is no entry, since no entry has term 0 */
#define NOOP 0
#define DATA 32
#define ENTRY(t, k) (((t) << 6) | (k))
#define E_TERM(e) ((e) >> 6)
#define E_KIND(e) ((e) & 63)
#define IS_CFG(e) (E_KIND(e) >= 1 && E_KIND(e) <= 31)

#define LG(s, k) lg[(s) * LOGLEN + (k)]            /* entry k + 1 of server s */
#define ELOG(t, k) elog[(t) * LOGLEN + (k)]
#define MATCH(l, s) match[(l) * N + (s)]
#define LAST_TERM(s) (nlog[s] == 0 -> 0 : E_TERM(LG(s, nlog[s] - 1)))
#define UP_TO_DATE(a, b) \
  (LAST_TERM(a) > LAST_TERM(b) || LAST_TERM(a) == LAST_TERM(b) && nlog[a] >= nlog[b])
#define B(m, s) (((m) >> (s)) & 1)
#define POP(m) (B(m, 0) + B(m, 1) + B(m, 2) + B(m, 3) + B(m, 4))
#define MAJ(m) (POP(m) / 2 + 1)

/* whose vote and match count under configuration c (C4) */
#ifdef MUTANT_LEARNER_IN_QUORUM
#define COUNTED(c) ALL
#else
#define COUNTED(c) (c)
#endif
/* C2: an entry of the leader's own term has committed */
#ifdef MUTANT_NO_OWN_TERM_COMMIT
#define C2(l) true
#else
#define C2(l) (commit[l] > 0 && E_TERM(LG(l, commit[l] - 1)) == term[l])
#endif
/* C3: every configuration entry in the leader's log has committed (ci: the latest one) */
#ifdef MUTANT_TWO_IN_FLIGHT
#define C3(l) true
#else
#define C3(l) (ci <= commit[l])
#endif

byte lg[N * LOGLEN], nlog[N];
byte term[N], vote[N], role[N];
byte match[N * N];               /* of a leader l: MATCH(l, s) = s holds l's log up to here */
byte commit[N];                  /* of a leader: its commit index */

/* ghosts */
bool led[MAXTERM + 1];           /* term t has had a leader */
byte elog[(MAXTERM + 1) * LOGLEN];   /* the log term t's leader had when elected */
byte comm[LOGLEN];               /* the entry committed at index k + 1 (0: none yet) */
byte cterm[LOGLEN];              /* the lowest term of a leader that committed it */

/* a set of servers prints as one character per server, s0 first: its number if in, '.' if not */
#define CH(m, s) (B(m, s) -> '0' + (s) : '.')
#define SET(m) CH(m, 0), CH(m, 1), CH(m, 2), CH(m, 3), CH(m, 4)

/* c = the configuration s uses, ci = the index of its entry (0: INIT)   (C1) */
inline cfg_of(s) {
  c = INIT; ci = 0; x = 0;
  do
  :: x < nlog[s] -> if :: IS_CFG(LG(s, x)) -> c = E_KIND(LG(s, x)); ci = x + 1 :: else fi; x++
  :: else -> break
  od;
  x = 0
}

inline step_down(s) {
  role[s] = FOLLOWER; commit[s] = 0;
  for (x : 0 .. N - 1) { MATCH(s, x) = 0 };
  x = 0
}

inline adopt(s, t) {
  printf("T s%d takes term %d\n", s, t);
  term[s] = t; vote[s] = NONE; step_down(s)
}

/* the leader s appends an entry of its term and counts again, under its new latest config */
inline append(s, kind) {
  LG(s, nlog[s]) = ENTRY(term[s], kind); nlog[s]++;
  if
  :: kind == NOOP -> printf("T s%d appends %d:noop at %d\n", s, term[s], nlog[s])
  :: kind == DATA -> printf("T s%d appends %d:data at %d\n", s, term[s], nlog[s])
  :: else ->
     printf("T s%d appends %d:config %c%c%c%c%c at %d\n", s, term[s], SET(kind), nlog[s])
  fi;
  maybe_commit(s)
}

/* the leader s commits up to the highest entry of its term that a majority of the voters of
   its latest configuration hold (C1, C4, C5: it counts itself only as one of them) */
inline maybe_commit(s) {
  cfg_of(s);
  n = nlog[s];
  do
  :: n > commit[s] && E_TERM(LG(s, n - 1)) == term[s] ->
     k = 0;
     for (x : 0 .. N - 1) {
       if
       :: B(COUNTED(c), x) && (x == s && nlog[s] >= n || x != s && MATCH(s, x) >= n) -> k++
       :: else
       fi
     };
     x = 0;
     if
     :: k >= MAJ(c) -> break
     :: else -> n--
     fi
  :: else -> n = commit[s]; break
  od;
  k = 0;
  if
  :: n > commit[s] ->
     printf("T s%d commits up to %d in term %d, voters %c%c%c%c%c\n", s, n, term[s], SET(c));
     do
     :: commit[s] < n ->
        x = LG(s, commit[s]);
        if
        :: comm[commit[s]] == 0 -> comm[commit[s]] = x; cterm[commit[s]] = term[s]
        :: else ->
           assert(comm[commit[s]] == x);                                        /* L2 */
           if :: term[s] < cterm[commit[s]] -> cterm[commit[s]] = term[s] :: else fi
        fi;
        for (y : term[s] + 1 .. MAXTERM) {
          if :: led[y] -> assert(ELOG(y, commit[s]) == x) :: else fi            /* L1 */
        };
        y = 0; x = 0;
        commit[s]++
     :: else -> break
     od
  :: else
  fi;
  n = 0;
  if                                                                            /* C5 */
  :: !B(c, s) && ci <= commit[s] ->
     printf("T s%d steps down: not a voter of %c%c%c%c%c\n", s, SET(c));
     step_down(s)
  :: else
  fi
}

/* s has won its term under configuration c (entry ci) */
inline become_leader(s) {
#ifndef ONLY_L1
  assert(!led[term[s]]);                                                        /* E1 */
#endif
  for (x : 0 .. LOGLEN - 1) {
    if
    :: comm[x] != 0 && cterm[x] < term[s] -> assert(LG(s, x) == comm[x])        /* L1 */
    :: else
    fi;
    ELOG(term[s], x) = LG(s, x)
  };
  x = 0;
#ifdef REACH_NEW_CONFIG
  assert(!(ci > 0 && B(c, s) && comm[ci - 1] == LG(s, ci - 1) && cterm[ci - 1] < term[s]));
#endif
  led[term[s]] = true;
  role[s] = LEADER; commit[s] = 0;
  if
  :: nlog[s] < LOGLEN -> append(s, NOOP)
  :: else -> maybe_commit(s)
  fi
}

active proctype world() {
  byte i, j, k, n, c, ci, x, y, p;

  do
  :: atomic {
       select(i : 0 .. N - 1);
       if
       /* i wins an election of term j with the votes of a majority p of its voters */
       :: term[i] < MAXTERM ->
          select(j : term[i] + 1 .. MAXTERM);
          atomic {
            cfg_of(i);
            k = MAJ(c); n = 0; p = 0;
            for (x : 0 .. N - 1) {                       /* n: who may vote for i in term j */
              if
              :: B(COUNTED(c), x) && x != i &&
                 (term[x] < j || term[x] == j && vote[x] == NONE) && UP_TO_DATE(i, x) ->
                 n = n | (1 << x)
              :: else
              fi
            };
            if :: B(COUNTED(c), i) -> p = 1 << i :: else fi;   /* its own vote, if it counts */
            x = 0
          };
          /* take k voters in all from n (a larger set would only raise more terms) */
          do
          :: POP(p) == k -> break
          :: POP(p) + POP(n) < k -> p = 0; break
          :: else ->
             if
             :: B(n, x) ->
                n = n & ~(1 << x);
                if :: p = p | (1 << x) :: skip fi
             :: else
             fi;
             x++
          od;
          if
          :: p != 0 ->
             d_step {
#ifdef REACH_PROMOTED
               assert((p & ~INIT) == 0);
#endif
               printf("T s%d (log of %d, last term %d) is elected in term %d by %c%c%c%c%c of %c%c%c%c%c\n",
                      i, nlog[i], LAST_TERM(i), j, SET(p), SET(c));
               for (y : 0 .. N - 1) {
                 if
                 :: B(p, y) || y == i -> term[y] = j; vote[y] = VOTED; step_down(y)
                 :: else
                 fi
               };
               y = 0;
               become_leader(i)
             }
          :: else
          fi
       /* the leader i sends j its log */
       :: role[i] == LEADER ->
          select(j : 0 .. N - 1);
          if
          :: j != i ->
             d_step {
               if
               :: term[j] > term[i] -> adopt(i, term[j])
               :: else ->
                  if :: term[j] < term[i] -> adopt(j, term[i]) :: else -> step_down(j) fi;
                  k = nlog[i]; n = 0;
                  do                                     /* n: the first entry that differs */
                  :: n < k && n < nlog[j] && LG(j, n) == LG(i, n) -> n++
                  :: else -> break
                  od;
                  if
                  :: n < k ->
                     for (x : n .. LOGLEN - 1) { LG(j, x) = 0 };
                     for (x : n .. k - 1) { LG(j, x) = LG(i, x) };
                     x = 0;
                     nlog[j] = k;
                     printf("T s%d takes s%d's entries %d..%d\n", j, i, n + 1, k)
                  :: else
                  fi;
                  n = 0;
                  if :: MATCH(i, j) < k -> MATCH(i, j) = k :: else fi;
                  maybe_commit(i)
               fi
             }
          :: else
          fi
#ifdef WITH_DATA
       /* the leader i proposes data */
       :: role[i] == LEADER && nlog[i] < LOGLEN -> d_step { append(i, DATA) }
#endif
       /* the leader i proposes a change: the voters become c with j added or removed (C4) */
       :: role[i] == LEADER && nlog[i] < LOGLEN ->
          select(j : 0 .. N - 1);
          p = 1 << j;
#ifdef MUTANT_TWO_AT_ONCE
          select(y : 0 .. N - 1);
          p = p | (1 << y);
#endif
          d_step {
            cfg_of(i);
            p = c ^ p;
            if
            :: p != 0 && C2(i) && C3(i) -> append(i, p)
            :: else
            fi
          }
       :: else                                          /* i has nothing to do */
       fi;
       i = 0; j = 0; k = 0; n = 0; c = 0; ci = 0; x = 0; y = 0; p = 0
     }
  od
}
