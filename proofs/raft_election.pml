/*
 * raft_election.pml: Raft leader election with pre-vote and check-quorum on 3 nodes.
 *
 * Abstracts
 *   Three nodes, each a follower, pre-candidate, candidate or leader, with a persistent term
 *   and vote and a volatile "heard from a leader within the election timeout" bit (the
 *   check-quorum lease). Time only shows as that bit lapsing and as timeouts firing at any
 *   moment. The network is the set of messages ever sent, and a node may take any message
 *   addressed to it at any time, any number of times: reorder, duplication and delay without
 *   bound; loss is a message never taken. It is stored compactly: a broadcast request is one
 *   bit per (sender, term); a granted (pre-)vote one bit per (granter, asker, term); a refusal,
 *   whose only effect is the refuser's higher term, one bit per (receiver, term); messages that
 *   can no longer change anything are forgotten.
 *   A restart keeps term and vote and clears the role and the lease bit; a restarted node acts
 *   as a pre-candidate that takes no grant, and a pre-candidate or candidate may time out
 *   again, so restarts add no behaviour and appear only in MUTANT_FORGET_VOTE.
 *   Logs are left out: at most one leader per term follows from vote counting alone, and the
 *   up-to-date check only withholds votes. Log matching, leader completeness and state
 *   machine safety are the simulator's to check on the real code (see README).
 *
 * Rules modelled (core/raft/raft.cpp: step, handle_vote_request, handle_vote_response, tick)
 *   V1 a node whose election timeout fires asks for pre-votes for term+1 without changing its
 *      term; a pre-vote is granted only for a term above the granter's and only when the
 *      granter has not heard from a leader within the election timeout (a leader has);
 *   V2 a pre-candidate granted a majority becomes a candidate: term+1, votes for itself;
 *   V3 a vote request is refused in the lease, and one of a higher term ignored there
 *      (check-quorum); otherwise a higher term makes the node a follower of it with no vote;
 *   V4 one vote per term, kept across a restart; a vote counts only in the term it was given;
 *   V5 a candidate granted a majority leads its term; a leader steps down when check-quorum
 *      fails; any message of a higher term (but a pre-vote request) makes a node a follower.
 *   Where the code is looser, the model is looser or the relaxed run covers it: a node that
 *   knows a leader whose lease has lapsed still votes here; the code also grants a pre-vote
 *   for the granter's own term and counts grants of an earlier pre-vote round, which only
 *   allow more campaigns, and the relaxed run lets any node campaign at any time.
 *
 * Bounds: 3 nodes, all starting as followers of term 0, terms <= MAXTERM (2); messages,
 *   losses, duplicates, delays unbounded. Terms <= 3 are covered by -DRELAXED -DMAXTERM=3:
 *   pre-votes and the lease opened up (a timeout may campaign at once, a vote request is
 *   never ignored, a node may learn any term some node has reached without voting, a
 *   candidate or leader may become a follower). Every step of the full protocol is a step of
 *   the relaxed one (pre-vote and the lease only withhold campaigns and votes; a heartbeat or
 *   refusal only teaches a term), so E1 there covers the full protocol up to term 3.
 *
 * Properties
 *   E1 (assertion) at most one leader per term, over all leaders that ever were:
 *      at each election, assert(leader_of[t] == none || leader_of[t] == me)
 *   E2 (LTL, searched with -a) no two current leaders share a term:
 *      ltl election_safety { [] !two_leaders }
 *      -DLTL_ONLY compiles E1 out, so that in that run the claim alone must catch a mutant.
 *
 * Mutants (each must be refuted)
 *   MUTANT_VOTE_TWICE          V4: a node grants a second vote in the same term
 *   MUTANT_FORGET_VOTE         V4: the vote is not persisted, a restart forgets it
 *   MUTANT_STALE_VOTES         V4: a candidate counts a vote given in an earlier term
 *   MUTANT_PREVOTE_AS_VOTE     V2: a pre-candidate granted a majority leads term+1 at once
 *
 * Witness (must be reachable): REACH_SECOND_TERM, a leader of term MAXTERM after one of the
 *   term before.
 */

#define N 3
#ifndef MAXTERM
#define MAXTERM 2
#endif
#define NONE 3

#define FOLLOWER 0
#define PRECAND 1
#define CAND 2
#define LEADER 3

/* the network (bits only ever set) */
byte pv_req[N];     /* bit t: this node asked for pre-votes for term t */
byte v_req[N];      /* bit t: this node asked for votes in term t (as a candidate of t) */
byte hb[N];         /* bit t: this node sent heartbeats as the leader of term t */
short pv_ok[N];     /* of the asker: bit (granter * 4 + t): pre-vote for term t granted */
short v_ok[N];      /* of the asker: bit (granter * 4 + t): vote in term t granted */
byte refusal[N];    /* of the asker: bit t: a refusal carrying term t was sent to it */

byte role[N], cterm[N], voted[N];
bool heard[N];
byte leader_of[MAXTERM + 1];     /* ghost: who led each term, NONE if nobody yet */

#define GB(j, t) (1 << ((j) * 4 + (t)))
#define TWO(i, j) (role[i] == LEADER && role[j] == LEADER && cterm[i] == cterm[j])
#define two_leaders (TWO(0, 1) || TWO(0, 2) || TWO(1, 2))
#ifdef RELAXED
#define IN_LEASE(i) false
#else
#define IN_LEASE(i) (heard[i] || role[i] == LEADER)
#endif

#define DELIVERABLE(i, f, t) \
  (f != i && ((pv_req[f] | v_req[f] | hb[f]) & (1 << t)) || ((pv_ok[i] | v_ok[i]) & GB(f, t)) || \
   f == 0 && (refusal[i] & (1 << t)) && t > cterm[i])
#define NEXT_FT if :: t < MAXTERM -> t++ :: else -> t = 0; f++ fi

ltl election_safety { [] !two_leaders }

inline to_follower(fi_, ftm) {
  if :: ftm > cterm[fi_] -> cterm[fi_] = ftm; voted[fi_] = NONE :: else fi;
  role[fi_] = FOLLOWER
}

inline become_leader(li) {
#ifndef LTL_ONLY
  assert(leader_of[cterm[li]] == NONE || leader_of[cterm[li]] == li);   /* E1 */
#endif
#ifdef REACH_SECOND_TERM
  assert(!(cterm[li] == MAXTERM && leader_of[MAXTERM - 1] != NONE));  /* witness */
#endif
  leader_of[cterm[li]] = li;
  printf("T n%d leads term %d\n", li, cterm[li]);
  role[li] = LEADER; heard[li] = true
}

inline campaign(ci) {                                               /* V2 */
  cterm[ci]++; voted[ci] = ci; role[ci] = CAND;
  printf("T n%d campaigns in term %d\n", ci, cterm[ci]);
  v_req[ci] = v_req[ci] | (1 << cterm[ci])
}

/* i takes f's pre-vote request for term t */
inline on_prevote() {
  if
  :: t > cterm[i] && !IN_LEASE(i) -> pv_ok[f] = pv_ok[f] | GB(i, t)               /* V1 */
  :: else -> refusal[f] = refusal[f] | (1 << cterm[i])
  fi
}

/* i takes f's grant of its pre-vote for term t: with its own, a majority of three */
inline on_prevote_ok() {
  if
  :: role[i] == PRECAND && t == cterm[i] + 1 ->
#ifdef MUTANT_PREVOTE_AS_VOTE
     cterm[i]++; voted[i] = i; become_leader(i)
#else
     campaign(i)
#endif
  :: else
  fi
}

/* i takes f's vote request for term t */
inline on_vote() {
  if
  :: t > cterm[i] && IN_LEASE(i) -> skip                            /* V3: ignored in lease */
  :: else ->
     if :: t > cterm[i] -> to_follower(i, t) :: else fi;
     if
#ifdef MUTANT_VOTE_TWICE
     :: t == cterm[i] && !IN_LEASE(i) ->
#else
     :: t == cterm[i] && !IN_LEASE(i) && (voted[i] == NONE || voted[i] == f) ->   /* V4 */
#endif
        voted[i] = f; v_ok[f] = v_ok[f] | GB(i, t);
        printf("T n%d votes for n%d in term %d\n", i, f, t)
     :: else -> refusal[f] = refusal[f] | (1 << cterm[i])
     fi
  fi
}

/* i takes f's grant of its vote in term t: with its own, a majority of three */
inline on_vote_ok() {
  if
  :: t > cterm[i] -> to_follower(i, t)
#ifdef MUTANT_STALE_VOTES
  :: t <= cterm[i] && role[i] == CAND ->
#else
  :: t == cterm[i] && role[i] == CAND ->
#endif
     become_leader(i)
  :: else
  fi
}

/*
 * Forget messages that can no longer change anything, so that networks differing only in
 * them are one state. Terms only grow, so: a refusal carrying a term not above its receiver's,
 * a pre-vote grant for a term not above the asker's, a vote grant for an earlier term (or for
 * the current one once the asker is no longer its candidate), a heartbeat of a term every
 * other node has passed.
 */
#define UPTO(t) ((2 << (t)) - 1)              /* bits 0..t */
#define BELOW(t) ((1 << (t)) - 1)             /* bits 0..t-1 */
#define EACH_GRANTER(x) ((x) | ((x) << 4) | ((x) << 8))
#define MIN2(a, b) ((a) < (b) -> (a) : (b))

inline forget() {
  for (i : 0 .. N - 1) {
    refusal[i] = refusal[i] & ~UPTO(cterm[i]);
    pv_ok[i] = pv_ok[i] & ~EACH_GRANTER(UPTO(cterm[i]));
#ifndef MUTANT_STALE_VOTES
    v_ok[i] = v_ok[i] & ~EACH_GRANTER(role[i] == CAND -> BELOW(cterm[i]) : UPTO(cterm[i]));
#endif
  }
  hb[0] = hb[0] & ~BELOW(MIN2(cterm[1], cterm[2]));
  hb[1] = hb[1] & ~BELOW(MIN2(cterm[0], cterm[2]));
  hb[2] = hb[2] & ~BELOW(MIN2(cterm[0], cterm[1]));
  i = 0
}

active proctype world() {
  byte i, f, t;

  atomic {
    for (i : 0 .. MAXTERM) { leader_of[i] = NONE };
    for (i : 0 .. N - 1) { voted[i] = NONE };
    i = 0
  };

  do
  :: atomic {
       select(i : 0 .. N - 1);
       if
#ifndef RELAXED
       /* election timeout: ask for pre-votes */
       :: role[i] != LEADER && !heard[i] && cterm[i] < MAXTERM ->
          role[i] = PRECAND; pv_req[i] = pv_req[i] | (1 << (cterm[i] + 1))
       /* the election timeout passes without word from a leader */
       :: heard[i] && role[i] != LEADER -> heard[i] = false
       /* a leader's heartbeat round */
       :: role[i] == LEADER -> hb[i] = hb[i] | (1 << cterm[i])
       /* check-quorum fails: the leader steps down */
       :: role[i] == LEADER -> role[i] = FOLLOWER; heard[i] = false
#else
       /* campaign at any time, without pre-votes */
       :: role[i] != LEADER && cterm[i] < MAXTERM -> campaign(i)
       /* give up candidacy or leadership (restart, check-quorum) */
       :: role[i] != FOLLOWER -> role[i] = FOLLOWER
       /* learn any term some node has reached (heartbeat, refusal) without voting */
       :: select(t : 1 .. MAXTERM);
          if
          :: t > cterm[i] && (cterm[0] >= t || cterm[1] >= t || cterm[2] >= t) -> to_follower(i, t)
          :: else
          fi;
          t = 0
#endif
#ifdef MUTANT_FORGET_VOTE
       /* a restart that loses the vote */
       :: voted[i] != NONE -> role[i] = FOLLOWER; heard[i] = false; voted[i] = NONE
#endif
       /* the network: i takes one message addressed to it (the walk branches only where a
          message is waiting, so that no choice of an absent message costs a state lookup) */
       :: f = 0; t = 0;
          do
          :: f == N -> break                                          /* took none */
          :: f < N && !DELIVERABLE(i, f, t) -> NEXT_FT
          :: f < N && DELIVERABLE(i, f, t) -> NEXT_FT
          :: f < N && DELIVERABLE(i, f, t) ->
             if
             :: f != i && (pv_req[f] & (1 << t)) -> d_step { on_prevote() }
             :: f != i && (v_req[f] & (1 << t)) -> d_step { on_vote() }
             :: f != i && (hb[f] & (1 << t)) ->
                d_step { if :: t >= cterm[i] -> to_follower(i, t); heard[i] = true :: else fi }
             :: pv_ok[i] & GB(f, t) -> d_step { on_prevote_ok() }
             :: v_ok[i] & GB(f, t) -> d_step { on_vote_ok() }
             :: f == 0 && (refusal[i] & (1 << t)) && t > cterm[i] -> to_follower(i, t)
             fi;
             break
          od;
          f = 0; t = 0
       fi;
       i = 0;
       d_step { forget() }
     }
  od
}
