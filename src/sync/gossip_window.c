/* --sync gossip: the published copies and liveness (docs/algorithms.md §8).
 * Every rank publishes its parameters (and step) after each step in an RMA
 * window. No window lock is ever taken: a lock held by a rank killed while
 * publishing would block its readers forever. Instead every rank opens one
 * shared passive epoch on all windows at start (MPI_Win_lock_all), the
 * writer brackets each update with a sequence number (odd while writing),
 * and a reader gets seq, the copy, then seq again, each an MPI_Rget polled
 * against --timeout, and keeps the copy only if both seqs are the same even
 * number (a seqlock).
 *
 * Pull mixes each published version of a peer at most once: a replica
 * that stops advancing is mixed in once, then skipped until it moves again
 * (it counts as a stale skip). One whose step has not moved for --timeout/10
 * seconds is also left out of the evaluated average. So a frozen replica
 * stops dragging the others long before it is declared dead. A peer whose
 * step has not moved for --timeout seconds, or whose window does not answer
 * a read within half the --timeout (pull), or that does not take a message
 * within --timeout (push), is marked dead and never chosen again. Those
 * seconds are this rank's own awake time (gossip_awake_now): a rank that was
 * frozen itself does not take its own absence for its peers' silence. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "gossip.h"
#include "rules.h"

/* This rank's clock for judging its peers' silence: wall time less the gaps
 * of more than a quarter of --timeout in which it did not look at the clock
 * (it was frozen itself, or busy). A rank frozen anywhere (in a read, or
 * between reading a peer's step and judging it) wakes to its peers' clocks
 * where it left them, instead of declaring them dead for its own absence. */
double gossip_awake_now(const run_t *r, gossip_t *g)
{
    return live_awake(&g->awake, comm_deadline(r->comm, LIVE_AWAY));
}

void gossip_publish(run_t *r, gossip_t *g, int64_t step)
{
    volatile int64_t *hdr = (volatile int64_t *)g->pub;
    hdr[1] = ++g->seq;                                   /* odd: writing */
    MPI_CHECK(r->comm, MPI_Win_sync(g->win));
    if (faults_should_die_publishing(r->faults, step)) _exit(3);   /* a death mid-copy, as kill -9 can cause */
    memcpy(g->pub + sizeof(published_t), r->model->params, g->n * sizeof(float));
    hdr[0] = step;
    MPI_CHECK(r->comm, MPI_Win_sync(g->win));
    hdr[1] = ++g->seq;                                   /* even: whole */
    MPI_CHECK(r->comm, MPI_Win_sync(g->win));
}

/* Under MPICH 4.0 (ch4:ucx) a one-sided read of a dead rank's window may
 * never return, not even as a request that tests incomplete; an alarm
 * around each read (twice the --timeout and more, so it never fires before
 * the read's own deadline) turns that hang into a one-line error. (Not
 * under SimGrid, whose simulated ranks share one process.) */
static void rma_stuck(int sig)
{
    static const char msg[] = "dsgd: error: a one-sided read of a gossip peer's parameters did not complete within "
                              "2 x --timeout + 5 s: the peer died, and this MPI cannot read a dead rank's window "
                              "(gossip survives a dead peer under Open MPI); stopping\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    (void)sig;
    _exit(1);
}

static void watchdog(const run_t *r, int on)
{
    if (!sim_build()) alarm(on ? (unsigned)ceil(comm_deadline(r->comm, LIVE_READ_ABORT)) : 0);
}

void gossip_window_open(run_t *r, gossip_t *g)
{
    if (!sim_build()) signal(SIGALRM, rma_stuck);
    /* MPI_Win_allocate lets the MPI place the window (Open MPI's shared-memory
     * one-sided component only serves windows it allocates itself) */
    MPI_CHECK(r->comm, MPI_Win_allocate((MPI_Aint)comm_window_bytes(g->bytes), 1, MPI_INFO_NULL, r->comm->world, &g->pub, &g->win));
    /* one shared epoch on every window for the whole run: reads need no lock */
    MPI_CHECK(r->comm, MPI_Win_lock_all(MPI_MODE_NOCHECK, g->win));
}

/* MPI_Win_free is collective: only when no peer is lost */
void gossip_window_close(gossip_t *g)
{
    MPI_Win_unlock_all(g->win);
    MPI_Win_free(&g->win);   /* frees pub too */
}

typedef struct tick_arg { const run_t *r; gossip_t *g; } tick_arg_t;

/* each look at the clock during a read keeps this rank's awake clock going */
static void tick(void *arg)
{
    const tick_arg_t *t = arg;
    gossip_awake_now(t->r, t->g);
}

/* One get from rank j's window, polled for half the --timeout. -1: no
 * answer (the request and its buffer are abandoned to MPI). Half: a rank
 * stuck on a dead peer's window does not step meanwhile (under MPICH such a
 * read never completes), and it must not look dead itself to the others,
 * who declare a peer dead after --timeout without a step. */
static int get_bounded(run_t *r, gossip_t *g, int j, void *dst, size_t len)
{
    MPI_Request q;
    watchdog(r, 1);
    int rc = -1;
    const double t_in = now_s();   /* a read is communication: the done event's comm_s counts it */
    if (MPI_Rget(dst, (int)len, MPI_BYTE, j, 0, (int)len, MPI_BYTE, g->win, &q) == MPI_SUCCESS)
        rc = comm_wait_bounded(r->comm, &q, comm_deadline(r->comm, LIVE_READ), tick, &(tick_arg_t){ r, g });
    watchdog(r, 0);
    r->comm->comm_s += now_s() - t_in;
    return rc;
}

/* Read rank j's published copy into g->peer (the seqlock above). Returns 1
 * with *step set, 0 if the copy was being written each time (the caller
 * skips j this time), -1 if j's window did not answer (j is now dead). */
int gossip_read_peer(run_t *r, gossip_t *g, int j, int64_t *step)
{
    for (int tries = 0; tries < 3; tries++) {
        if (get_bounded(r, g, j, g->seq_a, sizeof(published_t)) != 0 || get_bounded(r, g, j, g->peer, g->bytes) != 0 ||
            get_bounded(r, g, j, g->seq_b, sizeof(published_t)) != 0) {
            g->peer = xmalloc(g->bytes);   /* the old buffers stay with the abandoned requests */
            g->seq_a = xmalloc(sizeof(published_t));
            g->seq_b = xmalloc(sizeof(published_t));
            gossip_mark_dead(r, g, j, "its window did not answer a read", comm_deadline(r->comm, LIVE_READ));
            return -1;
        }
        r->comm->bytes_sent += 3 * sizeof(published_t);   /* the requests; the data flows to us */
        if (g->seq_a->seq != g->seq_b->seq || (g->seq_a->seq & 1)) continue;
        *step = g->seq_a->step;
        if (*step != g->seen_step[j]) { g->seen_step[j] = *step; g->seen_time[j] = gossip_awake_now(r, g); }
        return 1;
    }
    return 0;
}

/* Not moved for a tenth of the timeout: left out of the evaluated average. */
int gossip_is_stale(run_t *r, gossip_t *g, int j) { return gossip_awake_now(r, g) - g->seen_time[j] > comm_deadline(r->comm, LIVE_LOOK); }

void gossip_mark_dead(run_t *r, gossip_t *g, int j, const char *why, double secs)
{
    if (!g->alive[j]) return;
    g->alive[j] = 0;
    g->dead++;
    r->comm->peer_lost = 1;
    fprintf(stderr, "dsgd: rank %d: peer rank %d is dead (%s within %g s, --timeout %g); no longer chosen\n",
            r->comm->rank, j, why, secs, r->cfg->timeout);
    const int N = r->comm->size;
    if (gossip_minority(N, N - (int)g->dead, g->alive[0] || r->comm->rank == 0)) {
        /* A rank cut off from the others by the network finds them all
         * silent, exactly as if they had died; were it to go on, it would
         * take the lead's part over and write the job's metrics and
         * checkpoint beside the real lead. Only the side that holds a
         * majority (or half, with rank 0) goes on. */
        fprintf(stderr, "dsgd: rank %d: cut off from the job: %d of %d ranks do not answer, and a minority cannot tell a "
                "network partition from their deaths; it stops and leaves the metrics and checkpoint to the others\n",
                r->comm->rank, (int)g->dead, N);
        fflush(NULL);
        _exit(1);
    }
}

int gossip_minority(int n, int live, int has_rank0)
{
    return 2 * live < n || (2 * live == n && !has_rank0);
}

/* Push: a whole message from a peer declared dead proves it was frozen,
 * not dead (a stopped process, a swapped-out host): it is chosen again, and
 * its DONE is awaited at the finish. */
static void revive(run_t *r, gossip_t *g, int j)
{
    if (g->alive[j]) return;
    g->alive[j] = 1;
    g->dead--;
    r->comm->peer_lost = g->dead > 0;
    g->seen_time[j] = gossip_awake_now(r, g);
    fprintf(stderr, "dsgd: rank %d: peer rank %d was frozen, not dead (a message from it arrived); it is chosen again\n",
            r->comm->rank, j);
}

/* (gossip.h) Never waiting here keeps a rank that a frozen or dead sender's
 * half-sent message would hold for --timeout from looking dead to its own
 * senders, who would then drop it in turn. */
int gossip_drain_inbox(run_t *r, gossip_t *g, int first)
{
    const double t_in = now_s();
    int count = 0;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        /* DONE markers first; the lead's goodbye is left for gossip_finish */
        MPI_CHECK(r->comm, MPI_Iprobe(MPI_ANY_SOURCE, TAG_GOSSIP_DONE, r->comm->world, &flag, &st));
        if (flag) {
            int v;
            MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, TAG_GOSSIP_DONE, r->comm->world, MPI_STATUS_IGNORE);
            g->done_from[st.MPI_SOURCE] = 1;   /* may come while this rank still trains */
            revive(r, g, st.MPI_SOURCE);
            continue;
        }
        if (g->ninbox == g->max_inbox) break;   /* enough in flight: the rest next step */
        MPI_CHECK(r->comm, MPI_Iprobe(MPI_ANY_SOURCE, TAG_GOSSIP, r->comm->world, &flag, &st));
        if (!flag) break;
        /* the receive matches the probed message (the earliest of its sender's) */
        gossip_inbox_t *in = &g->inbox[g->ninbox++];
        if (!in->buf) in->buf = xalloc_floats(g->n);
        in->src = st.MPI_SOURCE;
        in->since = gossip_awake_now(r, g);
        MPI_CHECK(r->comm, MPI_Irecv(in->buf, (int)g->n, MPI_FLOAT, in->src, TAG_GOSSIP, r->comm->world, &in->req));
        if (sim_build()) MPI_Wait(&in->req, MPI_STATUS_IGNORE);   /* nobody dies in simulation: one event, not a poll per step */
    }
    /* mix what has come in whole; a message still incomplete after --timeout
     * (of this rank's awake time) is a dead sender's */
    for (int k = 0; k < g->ninbox;) {
        gossip_inbox_t *in = &g->inbox[k];
        /* a request already completed (the simulated build waits at once) is
         * MPI_REQUEST_NULL: done, without asking MPI (SimGrid's MPI_Test
         * does not say so for a null request) */
        int done = in->req == MPI_REQUEST_NULL;
        if (!done && MPI_Test(&in->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 0;
        if (!done && gossip_awake_now(r, g) - in->since <= comm_deadline(r->comm, LIVE_SILENT)) { k++; continue; }
        if (done) {
            revive(r, g, in->src);
            if (first && count == 0) memcpy(g->mix, in->buf, g->n * sizeof(float));
            else for (size_t i = 0; i < g->n; i++) g->mix[i] += in->buf[i];
            count++;
            first = 1;
        } else {
            in->buf = NULL;   /* the buffer stays with the dead request */
            gossip_mark_dead(r, g, in->src, "it stopped in the middle of a message", comm_deadline(r->comm, LIVE_SILENT));
        }
        gossip_inbox_t t = *in;   /* out of the list; its buffer is kept for the next message */
        *in = g->inbox[--g->ninbox];
        g->inbox[g->ninbox] = t;
    }
    r->comm->comm_s += now_s() - t_in;
    return count;
}

/* A peer declared dead that was only frozen (a stopped process, a swapped-out
 * host) finds, when it wakes, that a step took longer than --timeout: it
 * tells the lead it knows (TAG_GOSSIP_FIN, its step). The lead, which looks
 * every 50 ms while it counts a dead peer, takes it back: the peer is read
 * and averaged again, and once no declared death remains, the job ends as
 * any other (MPI_Finalize, exit 0; every rank takes the lead's verdict in
 * the goodbye). Nobody freezes in simulation. */
void gossip_tell_alive(run_t *r, gossip_t *g)
{
    if (sim_build()) return;
    const int me = r->comm->rank;
    int lead = 0;
    while (lead < me && !g->alive[lead]) lead++;
    if (lead >= me || g->mode == GOSSIP_ROUND) return;
    MPI_Request f;
    g->fin_step = r->step;
    if (MPI_Isend(&g->fin_step, 1, MPI_INT64_T, lead, TAG_GOSSIP_FIN, r->comm->world, &f) == MPI_SUCCESS) MPI_Request_free(&f);
}

void gossip_revive_frozen(run_t *r, gossip_t *g)
{
    if (sim_build()) return;
    const int N = r->comm->size, me = r->comm->rank;
    for (int j = 0; j < N && g->dead > 0; j++) {
        int flag = 0;
        if (j == me || g->alive[j]) continue;
        if (MPI_Iprobe(j, TAG_GOSSIP_FIN, r->comm->world, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) continue;
        int64_t step;
        MPI_Recv(&step, 1, MPI_INT64_T, j, TAG_GOSSIP_FIN, r->comm->world, MPI_STATUS_IGNORE);
        g->alive[j] = 1;
        g->dead--;
        g->seen_time[j] = gossip_awake_now(r, g);
        fprintf(stderr, "dsgd: rank %d: peer rank %d was frozen, not dead (it woke at its step %lld); it is chosen again\n",
                me, j, (long long)step);
    }
    r->comm->peer_lost = g->dead > 0;
}
