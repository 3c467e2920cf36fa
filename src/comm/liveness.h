/* comm/liveness — how long dsgd waits before it calls a peer dead, and how
 * a process keeps its own freeze out of its peers' silence.
 *
 * Every deadline is derived from --timeout T here, by name, and nowhere
 * else: a fault's detection time is then read off this table, and a change
 * to one rule is made once. The awake clock is the time this process has
 * been running: a gap between two of its looks at the clock longer than
 * the clock's threshold was this process stopped (SIGSTOP, descheduled,
 * held inside MPI), not a peer being silent, and is left out. */
#ifndef DSGD_LIVENESS_H
#define DSGD_LIVENESS_H

typedef enum {
    LIVE_SILENT,      /* T: a peer silent this long is dead (a worker to its shard, a replica to
                       * the coordinator, a gossip peer whose copy does not move) */
    LIVE_KEEPALIVE,   /* T/4: how often peers waiting on this one are told it is alive */
    LIVE_AWAY,        /* T/4: a gap longer than this in a process's own looks at the clock was its freeze */
    LIVE_AWAY_POLL,   /* min(T/4, 0.25 s): the same for a loop that looks at the clock all the time (a shard) */
    LIVE_STALL,       /* T/2: a bounded wait whose own looks at the clock are this far apart starts anew */
    LIVE_READ,        /* T/2: a one-sided read of a peer's window that has not answered: the peer is dead */
    LIVE_LOOK,        /* T/10: how often a peer's progress is looked at while waiting on it */
    LIVE_SEND,        /* 2T: a send still pending: its receiver is dead (a live one may itself spend T on a
                       * dead peer first) */
    LIVE_NOTICE,      /* T + 5 s: a message a peer sends only after its own deadline (an eviction notice;
                       * the lead stopping the job; a non-lead waiting on the shards gives the lead this
                       * long to be the one that records the fault) */
    LIVE_FINISH,      /* T + 10 s: a gossip peer that has not said it finished */
    LIVE_SHARD,       /* 2T + 10 s: a shard's reply (a gated pull waits on slow peers, and a shard may spend
                       * T on a dead worker's half-sent message before evicting it) */
    LIVE_GOODBYE,     /* 3T + 10 s: the gossip lead's goodbye, sent after its own waits on the others */
    LIVE_READ_ABORT,  /* 2T + 5 s: a one-sided read still inside MPI: this MPI cannot read a dead rank's
                       * window, and the process stops (an alarm) */
    LIVE_ROLLCALL,    /* 2 s + T/4: how long the survivors of a fault listen for each other */
} live_deadline_t;

/* Deadline `which` in seconds for --timeout `timeout`. */
double live_deadline(double timeout, live_deadline_t which);

/* The awake clock (zero-initialised): seconds this process has been
 * running, gaps between its looks longer than `gap` left out. */
typedef struct live_clock {
    double tick;   /* when it was last looked at (0: never) */
    double away;   /* the gaps left out */
} live_clock_t;

double live_awake(live_clock_t *k, double gap);

#endif
