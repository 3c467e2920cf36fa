/* comm — the MPI context: world, rank, size, host name, message tags, checked
 * MPI calls, collectives that give up after a timeout instead of hanging on a
 * dead peer, and per-rank traffic counters. Everything above talks to MPI
 * through here or through MPI calls wrapped in MPI_CHECK. */
#ifndef DSGD_COMM_H
#define DSGD_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "liveness.h"

/* Every point-to-point tag dsgd uses, in one place. */
typedef enum comm_tag {
    TAG_ROLLCALL = 100,      /* "I am alive" after a collective timed out */
    TAG_PS_BASE = 200,       /* parameter-server traffic: 200..299 */
    TAG_GOSSIP_BASE = 300,   /* gossip traffic: 300..399 */
    TAG_SB_BASE = 400,       /* Sandblaster coordinator traffic: 400..499 */
    TAG_BOUNDS_STOP = 500,   /* lead → workers: the target accuracy is reached, stop */
    TAG_DIVERGED = 501,      /* worker → lead: my loss diverged; stop the job */
    TAG_PREEMPT = 502,       /* any rank → lead: a preemption signal reached me; stop the job */
    TAG_HALO = 600,          /* spatial model parallelism: halo rows and columns within a replica */
} comm_tag_t;

/* Why a rank is asked to stop from elsewhere (comm_t.stop_heard) */
enum { COMM_STOP_NONE = 0, COMM_STOP_TARGET = 1, COMM_STOP_PREEMPT = 2, COMM_STOP_DIVERGED = 3,
       COMM_STOP_SAVE_FAILED = 4 /* the servers could not write a checkpoint */ };

/* Called once on a rank about to stop because a peer failed (a dead rank, an
 * unreachable server), before it exits: the training loop uses it to put
 * the metrics so far in place. lost: world ranks known lost (nlost may be 0). */
typedef void (*comm_fault_fn)(void *ctx, const char *what, const int *lost, int nlost);

typedef struct comm {
    MPI_Comm world;
    int rank, size;
    char host[MPI_MAX_PROCESSOR_NAME];
    double timeout_s;        /* how long a collective may wait for a peer */
    int wait_spin;           /* --wait spin: poll loops yield but never sleep (dedicated cores) */
    double wake_s;           /* measured at start-up: how late a short sleep of this process wakes */
    int oversubscribed;      /* more ranks on this host than it has cores */
    int host_ranks;          /* ranks of the job on this host (MPI_COMM_TYPE_SHARED) */
    int own_cores;           /* cores this rank may run on (its affinity mask) */
    int threads;             /* compute threads of this rank (comm_threads) */
    char threads_from[96];   /* and where that number came from */
    char allreduce[128];     /* which all-reduce the gradients go through, and why */
    double poll_s;           /* --wait backoff: poll without yielding for this long (comm_idle) */
    long step;               /* the caller's step, named in timeout messages */
    int peer_lost;           /* a peer is known dead: MPI_Finalize would wait for it */
    int stop_heard;          /* COMM_STOP_*: the job asked this rank to stop (through a server's reply) */
    int preempt_told;        /* this rank has told the lead of its preemption signal */
    int evicted;             /* the servers evicted this rank after a silence (it was frozen): it stops training */
    long evicted_step;       /* its step count the servers had seen then */
    double evicted_silent_s; /* the silence that got it evicted */
    /* traffic counters, reported in the done event */
    uint64_t bytes_sent, msgs_sent, collectives;
    double comm_s;           /* seconds spent inside communication calls */
    int *world_ranks;        /* a sub-communicator's members as world ranks (for messages), or NULL */
    struct comm *parent;     /* a sub-communicator's parent (its fault hook serves both) */
    comm_fault_fn on_fault;  /* set by the training loop; NULL: none */
    void *fault_ctx;
    /* A shared-memory window that lives until comm_finalize (the parameter
     * server's, ps/shm.c), with the host's communicator it spans */
    MPI_Win kept_win;
    MPI_Comm kept_comm;
    int has_kept_win;
} comm_t;

/* Keep a window (locked with MPI_Win_lock_all) and its communicator until
 * comm_finalize frees them, before MPI_Finalize and only when no peer is
 * lost: freeing is collective, and those are the ranks that finalize. One
 * window at most. */
void comm_keep_window(comm_t *c, MPI_Win win, MPI_Comm comm);

/* Run the fault hook of c or its nearest ancestor that has one (once). */
void comm_fault(comm_t *c, const char *what, const int *lost, int nlost);

/* The compute threads this rank uses (--threads N; 0: its cores divided
 * among the job's ranks on its host, at least 1; the simulated build 1),
 * kept in c->threads with where the number came from in c->threads_from. */
int comm_threads(comm_t *c, long requested);
/* MPI_Init (if needed), rank/size/host, errors returned instead of
 * aborting. posted_receives: every large message of the job meets a receive
 * already posted, or posted as it comes (the paradigm's posted_receives), so
 * over TCP such messages may go eagerly where that helps (mpi_defaults.c). */
void comm_init(comm_t *c, int *argc, char ***argv, int posted_receives);
void comm_finalize(comm_t *c);

/* Dies with rank, host, the call and MPI's error string when rc != MPI_SUCCESS. */
void comm_check(const comm_t *c, int rc, const char *call, const char *file, int line);
#define MPI_CHECK(c, call) comm_check((c), (call), #call, __FILE__, __LINE__)

/* Setup errors that every rank meets at the same point: all ranks call this
 * with their own verdict; if any failed, the first failing rank prints its
 * one-line message (naming the rank unless all failed alike) and every rank
 * finalizes and exits 1 — no abort banner, no hang. */
void comm_setup_check(comm_t *c, int failed, const char *msg);
/* The same verdict and message, without the exit: returns 1 if any rank
 * failed, so the caller can release what MPI must see released before
 * MPI_Finalize (an RMA window: MPICH over UCX asserts at exit otherwise). */
int  comm_setup_failed(comm_t *c, int failed, const char *msg);

/* Every rank passes the same "name=value\n..." description of its
 * configuration; if any rank's differs from rank 0's, every rank stops with a
 * message naming the ranks and the first differing setting. */
void comm_check_same_config(comm_t *c, const char *desc);

/* Polling that costs no CPU when there is nothing to do. MPI's own waits
 * spin, and with more ranks than cores (any laptop, every experiment on a
 * small machine) a spinning server or idle worker takes cycles from the
 * ranks that compute. A poll loop calls comm_idle after each poll that found
 * nothing. Under --wait backoff a wait has three phases:
 *   poll    return at once, for c->poll_s: the wake-up cost of one sleep of
 *           this process, measured at start-up (c->wake_s, bounded to
 *           [20 us, 200 us]), so a wait that ends sooner costs no more than
 *           spinning would and a longer one at most twice what an oracle
 *           would pay; 0 when the host has more ranks than cores, where
 *           every poll takes the core from a rank that computes;
 *   yield   give the core to any runnable rank, until the wait is yield_s
 *           old (2 ms; longer for a worker waiting on a reply);
 *   sleep   for 1/8 of the time waited so far (capped at 100 us until 50 ms,
 *           at 1 ms after), so a wait ends at most ~12% (plus one wake-up)
 *           later than its event.
 * --wait spin polls for 50 us, then only yields. Sleeps are
 * MPI_Wtime-consistent under SimGrid (SMPI turns nanosleep into simulated
 * time). */
typedef struct comm_idle {
    double since;            /* start of the current wait (0: not waiting) */
    int spin;                /* --wait spin: only yield, never sleep */
    double poll_s;           /* return at once until the wait is this old */
    double yield_s;          /* yield (no sleep) until the wait is this old */
} comm_idle_t;
/* A wait's state, with the run's --wait policy (comm_t.wait_spin). */
static inline comm_idle_t comm_idle_start(const comm_t *c)
{
    return (comm_idle_t){ 0, c->wait_spin, c->wait_spin ? 50e-6 : c->poll_s, 2e-3 };
}
/* Start a new wait (call when something happened). */
static inline void comm_idle_reset(comm_idle_t *w) { w->since = 0; }
void comm_idle(comm_idle_t *w);
/* One wait on peers: comm_idle's backoff between the polls, and a deadline
 * counted on this process's awake clock (comm/liveness.h): a gap between
 * two polls of more than LIVE_STALL of --timeout (of the wait's own limit,
 * if that is shorter) was this process frozen, not the peers silent, and
 * is left out. Every loop that waits for
 * something from a peer that may be dead is written
 *     comm_wait_t w = comm_wait_start(c, limit_s);
 *     while (!arrived) { poll; if (comm_wait_over(&w)) { the peer is late } }
 * comm_wait_over idles (by the --wait policy) and returns 0 while the
 * deadline is ahead, and returns 1 once it has passed; comm_wait_late only
 * looks. comm_wait_heard: the peer was heard, the deadline counts from now
 * and the backoff starts again. A limit <= 0 never passes. */
typedef struct comm_wait {
    comm_idle_t idle;
    live_clock_t clock;
    double gap;     /* a longer gap between polls was this process's freeze */
    double from;    /* awake time the deadline counts from */
    double limit;   /* seconds (<= 0: none) */
} comm_wait_t;
comm_wait_t comm_wait_start(const comm_t *c, double limit_s);
/* Awake seconds since the start or the last comm_wait_heard. */
double comm_wait_s(comm_wait_t *w);
int comm_wait_late(comm_wait_t *w);
int comm_wait_over(comm_wait_t *w);
void comm_wait_heard(comm_wait_t *w);

/* How late this process wakes from a short sleep (the median over a few
 * sleeps of 10 us, beyond the 10 us asked), in seconds. comm_init measures
 * it once after lowering the process's timer slack to 1 us (Linux rounds
 * sleeps up by 50 us otherwise). */
double comm_wake_latency(void);

/* The size to give MPI_Win_allocate for a window of `bytes`: whole pages.
 * MPICH 4.0's shared-memory windows of a size that is not a multiple of
 * the page size (beyond a few hundred KB) serve a peer's MPI_Get from the
 * caller's own memory; rounding up avoids it and costs under a page. */
size_t comm_window_bytes(size_t bytes);

/* MPI_Testall without statuses, as one MPI_Test per request: MPICH declares
 * MPI_Testall's status argument as an array, and GCC then rejects
 * MPI_STATUSES_IGNORE (a sentinel pointer) as a zero-size region. Completed
 * requests become MPI_REQUEST_NULL as they finish; *done = all of them.
 * (Under SimGrid it is MPI_Testall itself: there only that call lets the
 * other simulated ranks progress.) */
int comm_testall(int n, MPI_Request *reqs, int *done);

/* Wait for requests, polling, for at most c->timeout_s. Returns 0 when all
 * completed; on timeout or a failed peer it finds out which ranks are still
 * alive (a roll call among the survivors), prints one line naming the
 * missing rank(s) from the lowest surviving rank, and exits 1 — it never
 * returns a hang. `what` names the operation in that message. */
int comm_waitall(comm_t *c, int n, MPI_Request *reqs, const char *what);

/* Wait for one request from a peer that may be dead, for at most
 * timeout_s seconds, idling by the --wait policy. Returns 0 when it
 * completed, -1 when it did not (or failed): the caller gives the peer up
 * and abandons the request and its buffer to MPI. The wait is counted on
 * the awake clock (comm/liveness.h): a gap of more than timeout_s/2
 * between two looks at the clock was this process frozen, not the peer
 * silent, and is left out. `tick`, when not
 * NULL, is called at each look (a caller that keeps its own awake clock).
 * The simulated build waits once: nobody dies there, and each poll would
 * cost the simulator an event. */
int comm_wait_bounded(comm_t *c, MPI_Request *req, double timeout_s, void (*tick)(void *), void *arg);
/* Take back a posted receive nobody may answer (a dead or evicted peer's,
 * or one left at the end of a run): cancel it and test it for up to
 * `bound` seconds. Returns 1 when it finished (cancelled or received: its
 * buffer is the caller's again), 0 when it was freed unfinished, matched by
 * a message that never ends (its buffer is MPI's until MPI_Finalize: the
 * caller must forget it, not free it). Never blocks longer than `bound`. */
int comm_withdraw(MPI_Request *req, double bound);
/* The bound a run's end gives its posted receives: a cancel is local, so
 * only a receive that a message has matched takes any time at all. */
#define COMM_WITHDRAW_S 0.5

/* A server's event loop over its posted receives (the parameter server's
 * shard, Sandblaster's shard: each a set of handlers). Until done(ctx):
 * poll every receive; call polled(ctx), if set, after each poll; hand
 * each completed receive to take(ctx, index, status), which reposts what
 * it wants; when none had completed, call quiet(ctx) (deadlines,
 * keep-alives) and idle by the --wait policy, only yielding if quiet
 * returns 1 (replies still in flight). The simulated build blocks in
 * MPI_Waitany instead of polling: nobody dies there, and SimGrid charges
 * each failed test as an event (MPI_Waitsome tests every request). */
typedef struct comm_serve {
    int (*done)(void *ctx);
    void (*polled)(void *ctx);
    void (*take)(void *ctx, int i, MPI_Status *st);
    int (*quiet)(void *ctx);
} comm_serve_t;
void comm_serve(comm_t *c, int n, MPI_Request *rq, const comm_serve_t *h, void *ctx);
/* Deadline `which` of this process's --timeout (liveness.h). */
static inline double comm_deadline(const comm_t *c, live_deadline_t which) { return live_deadline(c->timeout_s, which); }

/* Sum-all-reduce of floats / ints with the timeout above; counted. */
void comm_allreduce_sum(comm_t *c, float *buf, size_t n, const char *what);
void comm_allreduce_int(comm_t *c, int *buf, int n, MPI_Op op, const char *what);
/* The same, with its time in comm_s but not in the traffic counters
 * (bytes, messages, collectives): for a decision taken by the clock, whose
 * number differs from run to run (the preemption decision), so that two
 * runs of one configuration count the same traffic. */
void comm_allreduce_int_uncounted(comm_t *c, int *buf, int n, MPI_Op op, const char *what);
/* Start a nonblocking in-place sum-all-reduce (completed by comm_waitall). */
/* The most floats one nonblocking all-reduce takes (an MPI count is an int). */
#define COMM_MAX_SPAN ((size_t)1 << 30)
void comm_iallreduce_sum(comm_t *c, float *buf, size_t n, MPI_Request *req);
/* Every rank's n doubles into all (size × n), rank by rank, with the
 * timeout; counted. */
void comm_allgather_double(comm_t *c, const double *mine, double *all, int n, const char *what);
/* Broadcast from root with the timeout; counted. */
void comm_bcast(comm_t *c, void *buf, size_t bytes, int root, const char *what);

/* ---- groups (group.c) ---- */
/* The ranks of parent with the same color, ordered by key, as a comm_t of
 * their own (same timeout; own traffic counters). Collective over parent. */
void comm_split(comm_t *parent, int color, int key, comm_t *out);
void comm_split_free(comm_t *c);

/* Model parallelism's two collectives over the ranks of one replica, in the
 * shape nn's model_part_t hooks take (ctx is a comm_mp_t). */
typedef struct comm_mp {
    comm_t *c;               /* the replica's ranks, partition p = rank in c */
    float *stage;            /* (cap) gathered blocks before they are interleaved */
    size_t cap;
    int *counts, *displs;    /* (M) */
    MPI_Request *hreq;       /* (2M) the halo exchange in flight */
    int nh;
    uint64_t halo_bytes;     /* halo sent, forward and backward */
    double halo_wait_s;      /* time spent waiting for halos */
} comm_mp_t;
/* cap: the most floats one gather moves (max batch × widest split output). */
comm_mp_t *comm_mp_create(comm_t *c, size_t cap);
void comm_mp_free(comm_mp_t *g);
void comm_mp_gather(void *ctx, float *full, const float *local, int B, int R, const int *pb);
void comm_mp_sum(void *ctx, float *buf, long n);
/* The halo exchange of an lc model's spatial blocks (model_part_t's hooks). */
void comm_mp_halo_start(void *ctx, int n, const int *peer, float *const *send, const long *nsend,
                        float *const *recv, const long *nrecv);
void comm_mp_halo_wait(void *ctx);

/* ---- preemption: SIGTERM (a scheduler's notice before SIGKILL) or SIGINT ----
 * The handler only records the signal; the rank that received it starts the
 * job's preemption whatever its role: a worker stops its loop at the next
 * agreed step, a parameter-server shard tells every worker in its replies,
 * any other serving rank tells the lead (comm_preempt_tell). The flag is the
 * one mutable global of the training path: a handler can reach nothing
 * else. A second signal ends the process at once. Simulated runs (SimGrid)
 * take no signals. */
void comm_preempt_arm(void);
/* The signal received (SIGTERM or SIGINT), or 0. */
int  comm_preempt_signal(void);
/* "SIGTERM" or "SIGINT" for the signal received. */
const char *comm_preempt_name(void);
/* A serving rank: if a signal has arrived and the lead has not been told,
 * tell it (one small message, not waited for). */
void comm_preempt_tell(comm_t *c, int lead);
/* The lead: 1 if another rank has told it of a preemption signal. */
int  comm_preempt_heard(comm_t *c);

#endif
