/* --sync gossip: gossiping SGD (Jin, Yuan, Iandola, Keutzer 2016;
 * docs/algorithms.md §8). No server and no barrier in the step loop. Each
 * step every rank takes its local optimizer step, θ_i' = θ_i − η g_i, then:
 *
 *   pull   pick a peer j uniformly among the live others (a per-rank seeded
 *          generator, fresh each step); read θ_j' with a one-sided MPI_Get
 *          from j's published copy, j does not stop; θ_i = (1−β) θ_i' + β θ_j'
 *   push   send θ_i' to a random peer; mix every message received since the
 *          last step: θ_i = (1−β) θ_i' + β mean(received)
 *   round  a random perfect matching per round from a seed shared by all
 *          ranks; partners exchange θ' and mix (deterministic; for tests)
 *
 * Every rank publishes its parameters (and step) after each step in an RMA
 * window. No window lock is ever taken: a lock held by a rank killed while
 * publishing would block its readers forever. Instead every rank opens one
 * shared passive epoch on all windows at start (MPI_Win_lock_all), the
 * writer brackets each update with a sequence number (odd while writing),
 * and a reader gets seq, the copy, then seq again, each an MPI_Rget polled
 * against --timeout, and keeps the copy only if both seqs are the same even
 * number (a seqlock). The lead evaluates the average of the live ranks'
 * published parameters (and logs the consensus distance mean_i ‖θ_i − θ̄‖)
 * by reading them one-sidedly, so evaluation needs no collective either.
 *
 * Pull mixes each published version of a peer at most once: a replica
 * that stops advancing is mixed in once, then skipped until it moves again
 * (it counts as a stale skip). One whose step has not moved for --timeout/10
 * seconds is also left out of the evaluated average. So a frozen replica
 * stops dragging the others long before it is declared dead. A peer whose
 * step has not moved for --timeout seconds, or whose window does not answer
 * a read within half the --timeout (pull), or that does not take a message
 * within --timeout (push), is marked dead and never chosen again. Those
 * seconds are this rank's own awake time (awake_now): a rank that was
 * frozen itself does not take its own absence for its peers' silence. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/util.h"
#include "sync.h"

enum { TAG_GOSSIP = TAG_GOSSIP_BASE, TAG_GOSSIP_DONE, TAG_GOSSIP_BYE, TAG_GOSSIP_FIN, NSEND = 4 };

typedef struct published {
    int64_t step;            /* steps completed; total_steps + 1 once finished */
    int64_t seq;             /* odd while the copy is being written */
    /* followed by n floats */
} published_t;

typedef enum gossip_mode { GOSSIP_PULL, GOSSIP_PUSH, GOSSIP_ROUND, GOSSIP_BAD = -1 } gossip_mode_t;

static gossip_mode_t gossip_mode_of(const char *m)
{
    return !strcmp(m, "pull") ? GOSSIP_PULL : !strcmp(m, "push") ? GOSSIP_PUSH : !strcmp(m, "round") ? GOSSIP_ROUND
                                                                                                    : GOSSIP_BAD;
}

typedef struct gossip {
    gossip_mode_t mode;      /* --gossip */
    float beta;
    rng_t rng;               /* peer choice, per rank */
    size_t n, np, bytes;    /* floats of a replica (parameters + state), of its parameters; window bytes */
    unsigned char *pub;      /* window memory: published_t + n floats */
    MPI_Win win;
    unsigned char *peer;     /* a peer's published copy */
    float *mix;              /* (n) push: Σ received; round: partner's θ' */
    int *alive;              /* (ranks) */
    int *done_from;          /* (ranks) push: that rank's DONE marker has arrived */
    int64_t *seen_step;      /* (ranks) last published step read */
    double *seen_time;       /* (ranks) when it last moved, on the awake_now clock */
    int64_t *mixed_step;     /* (ranks) pull: the version of that peer last mixed in */
    unsigned char *sbuf[NSEND];
    MPI_Request sreq[NSEND];
    int sdest[NSEND];
    double stime[NSEND];
    published_t *seq_a, *seq_b;   /* a read's two sequence gets */
    int *used;               /* (ranks) lead: replicas in the last average */
    int64_t seq;             /* own publication count x 2 */
    long mixes, dead, stale_skips;
    double consensus;        /* at the last evaluation */
    float *avg;              /* (n) lead: average of the published replicas */
    sync_rows_t rows;        /* round: every replica's state, gathered for a checkpoint */
    float *saved;            /* (ranks, n) lead, pull/push: the replicas read for a checkpoint */
    float *saved_avg;        /* (n) their mean */
    ckpt_tensor_t tensor;
    int64_t die_publishing;  /* test hook: exit while publishing this step (-1: never) */
    int64_t stop_judging;    /* test hook: stop (SIGSTOP) between reading a peer and judging it, at this step */
    int64_t fin_step;        /* "alive after all", to the lead (sent from here) */
    double last_step_t;      /* when the last step began: a gap past --timeout was a freeze */
    double revive_t;         /* the lead: when it last looked for a frozen peer's word */
    double tick_t, away_s;   /* awake_now: when this rank last looked at the clock; the gaps left out */
} gossip_t;

/* This rank's clock for judging its peers' silence: wall time less the gaps
 * of more than a quarter of --timeout in which it did not look at the clock
 * (it was frozen itself, or busy). A rank frozen anywhere (in a read, or
 * between reading a peer's step and judging it) wakes to its peers' clocks
 * where it left them, instead of declaring them dead for its own absence. */
static double awake_now(const run_t *r, gossip_t *g)
{
    const double now = now_s();
    if (g->tick_t > 0 && now - g->tick_t > r->cfg->timeout / 4) g->away_s += now - g->tick_t;
    g->tick_t = now;
    return now - g->away_s;
}

static void publish(run_t *r, gossip_t *g, int64_t step)
{
    volatile int64_t *hdr = (volatile int64_t *)g->pub;
    hdr[1] = ++g->seq;                                   /* odd: writing */
    MPI_CHECK(r->comm, MPI_Win_sync(g->win));
    if (step == g->die_publishing) _exit(3);   /* a death mid-copy, as kill -9 can cause */
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
#ifndef DSGD_SIM
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
#endif

static void watchdog(const run_t *r, int on)
{
#ifndef DSGD_SIM
    alarm(on ? (unsigned)ceil(2 * r->cfg->timeout + 5) : 0);
#else
    (void)r; (void)on;
#endif
}

static void mark_dead(run_t *r, gossip_t *g, int j, const char *why, double secs);

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
    if (MPI_Rget(dst, (int)len, MPI_BYTE, j, 0, (int)len, MPI_BYTE, g->win, &q) == MPI_SUCCESS) {
#ifdef DSGD_SIM
        /* nobody dies in simulation, and each poll of a 1 MB read costs the
         * simulator an engine round (100+ per read at 10 GbE): wait once */
        if (MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS) rc = 0;
        watchdog(r, 0);
        r->comm->comm_s += now_s() - t_in;
        return rc;
#endif
        double t0 = now_s(), last = t0;
        comm_idle_t idle = comm_idle_start(r->comm);
        for (;;) {
            int done = 0;
            if (MPI_Test(&q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
            if (done) { rc = 0; break; }
            const double now = now_s();
            awake_now(r, g);
            if (now - last > r->cfg->timeout / 4) t0 = now;   /* this rank was frozen, not the peer: wait anew */
            last = now;
            if (now - t0 > r->cfg->timeout / 2) break;
            comm_idle(&idle);
        }
    }
    watchdog(r, 0);
    r->comm->comm_s += now_s() - t_in;
    return rc;
}

/* Read rank j's published copy into g->peer (the seqlock above). Returns 1
 * with *step set, 0 if the copy was being written each time (the caller
 * skips j this time), -1 if j's window did not answer (j is now dead). */
static int read_peer(run_t *r, gossip_t *g, int j, int64_t *step)
{
    for (int tries = 0; tries < 3; tries++) {
        if (get_bounded(r, g, j, g->seq_a, sizeof(published_t)) != 0 || get_bounded(r, g, j, g->peer, g->bytes) != 0 ||
            get_bounded(r, g, j, g->seq_b, sizeof(published_t)) != 0) {
            g->peer = xmalloc(g->bytes);   /* the old buffers stay with the abandoned requests */
            g->seq_a = xmalloc(sizeof(published_t));
            g->seq_b = xmalloc(sizeof(published_t));
            mark_dead(r, g, j, "its window did not answer a read", r->cfg->timeout / 2);
            return -1;
        }
        r->comm->bytes_sent += 3 * sizeof(published_t);   /* the requests; the data flows to us */
        if (g->seq_a->seq != g->seq_b->seq || (g->seq_a->seq & 1)) continue;
        *step = g->seq_a->step;
        if (*step != g->seen_step[j]) { g->seen_step[j] = *step; g->seen_time[j] = awake_now(r, g); }
        return 1;
    }
    return 0;
}

/* Not moved for a tenth of the timeout: left out of the evaluated average. */
static int is_stale(run_t *r, gossip_t *g, int j) { return awake_now(r, g) - g->seen_time[j] > r->cfg->timeout / 10; }

static void mark_dead(run_t *r, gossip_t *g, int j, const char *why, double secs)
{
    if (!g->alive[j]) return;
    g->alive[j] = 0;
    g->dead++;
    r->comm->peer_lost = 1;
    fprintf(stderr, "dsgd: rank %d: peer rank %d is dead (%s within %g s, --timeout %g); no longer chosen\n",
            r->comm->rank, j, why, secs, r->cfg->timeout);
}

static int pick_peer(run_t *r, gossip_t *g)
{
    int N = r->comm->size, live = 0;
    for (int j = 0; j < N; j++) live += g->alive[j] && j != r->comm->rank;
    if (!live) return -1;
    int k = (int)rng_below(&g->rng, (uint32_t)live);
    for (int j = 0; j < N; j++)
        if (g->alive[j] && j != r->comm->rank && k-- == 0) return j;
    return -1;
}

static int gossip_init(run_t *r)
{
    gossip_t *g = xcalloc(1, sizeof *g);
    r->sync_state = g;
    const char *m = r->cfg->gossip;
    g->mode = gossip_mode_of(m);
    if (g->mode == GOSSIP_BAD) {
        snprintf(r->err, sizeof r->err, "unknown --gossip '%s'; choose pull, push or round", m);
        return -1;
    }
    if (r->comm->size < 2) {
        snprintf(r->err, sizeof r->err, "--sync gossip needs at least 2 ranks");
        return -1;
    }
    int N = r->comm->size;
    g->beta = (float)r->cfg->beta;
    rng_seed(&g->rng, (uint64_t)r->cfg->seed, 0x6055000ULL + (uint64_t)r->comm->rank);
    /* a replica is its parameters and its batch-norm statistics (the state
     * vector, right after them): both are published and mixed */
    g->np = r->model->nparams;
    g->n = r->model->nparams + r->model->nstate;
    g->bytes = sizeof(published_t) + g->n * sizeof(float);
    g->peer = xmalloc(g->bytes);
    g->seq_a = xmalloc(sizeof(published_t));
    g->seq_b = xmalloc(sizeof(published_t));
    g->used = xcalloc((size_t)N, sizeof(int));
    g->mix = xalloc_floats(g->n);
    g->alive = xcalloc((size_t)N, sizeof(int));
    g->done_from = xcalloc((size_t)N, sizeof(int));
    g->seen_step = xcalloc((size_t)N, sizeof(int64_t));
    g->seen_time = xcalloc((size_t)N, sizeof(double));
    g->mixed_step = xcalloc((size_t)N, sizeof(int64_t));
    double now = awake_now(r, g);
    for (int j = 0; j < N; j++) { g->alive[j] = 1; g->seen_step[j] = g->mixed_step[j] = -1; g->seen_time[j] = now; }
    /* DSGD_TEST_DIE_PUBLISHING=R@S: rank R exits halfway through publishing
     * step S, leaving its copy marked as being written forever (the tests'
     * way to place a death where kill -9 lands only by chance) */
    g->die_publishing = -1;
    const char *die = getenv("DSGD_TEST_DIE_PUBLISHING");
    int die_rank;
    long die_step;
    if (die && sscanf(die, "%d@%ld", &die_rank, &die_step) == 2 && die_rank == r->comm->rank) g->die_publishing = die_step;
    /* DSGD_TEST_STOP_JUDGING=R@S: rank R stops itself (SIGSTOP, for the test
     * to continue) at step S between reading a peer's step and judging how
     * long it has been silent: a freeze at the one moment where a rank's
     * own absence could pass for its peer's */
    g->stop_judging = -1;
    const char *stop = getenv("DSGD_TEST_STOP_JUDGING");
    if (stop && sscanf(stop, "%d@%ld", &die_rank, &die_step) == 2 && die_rank == r->comm->rank) g->stop_judging = die_step;
    for (int k = 0; k < NSEND; k++) { g->sbuf[k] = xmalloc(g->n * sizeof(float)); g->sreq[k] = MPI_REQUEST_NULL; }
    if (r->lead) g->avg = xalloc_floats(g->n);
#ifndef DSGD_SIM
    signal(SIGALRM, rma_stuck);
#endif
    /* MPI_Win_allocate lets the MPI place the window (Open MPI's shared-memory
     * one-sided component only serves windows it allocates itself) */
    MPI_CHECK(r->comm, MPI_Win_allocate((MPI_Aint)comm_window_bytes(g->bytes), 1, MPI_INFO_NULL, r->comm->world, &g->pub, &g->win));
    /* one shared epoch on every window for the whole run: reads need no lock */
    MPI_CHECK(r->comm, MPI_Win_lock_all(MPI_MODE_NOCHECK, g->win));
    sync_bcast_params(r);
    publish(r, g, 0);
    MPI_CHECK(r->comm, MPI_Barrier(r->comm->world));   /* every window holds θ_0 before anyone reads */
    return 0;
}

static void mix_into(float *theta, const float *other, float beta, size_t n)
{
    for (size_t i = 0; i < n; i++) theta[i] = (1.0f - beta) * theta[i] + beta * other[i];
}

static void step_pull(run_t *r, gossip_t *g)
{
    for (int tries = 0; tries < r->comm->size; tries++) {
        int j = pick_peer(r, g);
        if (j < 0) return;
        int64_t step;
        int got = read_peer(r, g, j, &step);
#ifndef DSGD_SIM
        if (r->step == g->stop_judging) { g->stop_judging = -1; raise(SIGSTOP); }
#endif
        if (got < 0) continue;
        /* a peer that has finished (a rank that evaluates runs behind) is
         * not dead: nothing new to mix, and the lead still awaits it */
        if (got && step > r->total_steps) { g->stale_skips++; continue; }
        if (awake_now(r, g) - g->seen_time[j] > r->cfg->timeout) { mark_dead(r, g, j, "its parameters did not change", r->cfg->timeout); continue; }
        if (!got || step == g->mixed_step[j]) { g->stale_skips++; continue; }
        mix_into(r->model->params, (const float *)(g->peer + sizeof(published_t)), g->beta, g->n);
        g->mixed_step[j] = step;
        g->mixes++;
        return;
    }
}

/* Receive whatever arrived; sum into g->mix. Returns the count. A sender
 * that dies mid-message is given up after the timeout. */
static int drain_inbox(run_t *r, gossip_t *g, int first)
{
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
            continue;
        }
        MPI_CHECK(r->comm, MPI_Iprobe(MPI_ANY_SOURCE, TAG_GOSSIP, r->comm->world, &flag, &st));
        if (!flag) return count;
        float *buf = (float *)g->peer;   /* large enough for n floats */
        MPI_Request q;
        MPI_CHECK(r->comm, MPI_Irecv(buf, (int)g->n, MPI_FLOAT, st.MPI_SOURCE, TAG_GOSSIP, r->comm->world, &q));
        double t0 = now_s();
        int got = 0;
#ifdef DSGD_SIM
        got = MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS;   /* as get_bounded */
#endif
        comm_idle_t idle = comm_idle_start(r->comm);
        while (!got && now_s() - t0 < r->cfg->timeout) { MPI_Test(&q, &got, MPI_STATUS_IGNORE); if (!got) comm_idle(&idle); }
        r->comm->comm_s += now_s() - t0;
        if (!got) {
            g->peer = xmalloc(g->bytes);   /* the old buffer stays with the dead request */
            mark_dead(r, g, st.MPI_SOURCE, "it stopped in the middle of a message", r->cfg->timeout);
            continue;
        }
        if (first && count == 0) memcpy(g->mix, buf, g->n * sizeof(float));
        else for (size_t i = 0; i < g->n; i++) g->mix[i] += buf[i];
        count++;
        first = 1;
    }
}

static void step_push(run_t *r, gossip_t *g)
{
    /* a free send slot; a send pending past the timeout means a dead receiver */
    int slot = -1;
    for (int k = 0; k < NSEND && slot < 0; k++) {
        int done = 1;
        if (g->sreq[k] != MPI_REQUEST_NULL) MPI_Test(&g->sreq[k], &done, MPI_STATUS_IGNORE);
        if (done) slot = k;
        else if (now_s() - g->stime[k] > r->cfg->timeout) {
            mark_dead(r, g, g->sdest[k], "it took no message", r->cfg->timeout);
            g->sbuf[k] = xmalloc(g->n * sizeof(float));   /* abandon the buffer to MPI */
            g->sreq[k] = MPI_REQUEST_NULL;
            slot = k;
        }
    }
    int j = pick_peer(r, g);
    if (slot >= 0 && j >= 0) {
        memcpy(g->sbuf[slot], r->model->params, g->n * sizeof(float));
        MPI_CHECK(r->comm, MPI_Isend(g->sbuf[slot], (int)g->n, MPI_FLOAT, j, TAG_GOSSIP, r->comm->world, &g->sreq[slot]));
        g->sdest[slot] = j;
        g->stime[slot] = now_s();
        r->comm->bytes_sent += g->n * sizeof(float);
        r->comm->msgs_sent++;
    }
    int got = drain_inbox(r, g, 1);
    if (got) {
        const float inv = 1.0f / (float)got;
        for (size_t i = 0; i < g->n; i++) g->mix[i] *= inv;
        mix_into(r->model->params, g->mix, g->beta, g->n);
        g->mixes++;
    }
}

static void step_round(run_t *r, gossip_t *g)
{
    int N = r->comm->size, me = r->comm->rank;
    int32_t *perm = (int32_t *)g->mix;   /* scratch: N ints fit in n floats for any real model */
    if ((size_t)N > g->n) die("gossip round: more ranks than parameters");
    for (int j = 0; j < N; j++) perm[j] = j;
    rng_t shared;
    rng_seed(&shared, (uint64_t)r->cfg->seed, 0x60550000ULL + (uint64_t)r->step);
    rng_shuffle(&shared, perm, (size_t)N);
    int partner = -1;
    for (int k = 0; k + 1 < N; k += 2) {
        if (perm[k] == me) partner = perm[k + 1];
        if (perm[k + 1] == me) partner = perm[k];
    }
    if (partner < 0) return;   /* odd N: this rank sits the round out */
    float *other = (float *)g->peer;
    MPI_Request q[2];
    MPI_CHECK(r->comm, MPI_Irecv(other, (int)g->n, MPI_FLOAT, partner, TAG_GOSSIP, r->comm->world, &q[0]));
    MPI_CHECK(r->comm, MPI_Isend(r->model->params, (int)g->n, MPI_FLOAT, partner, TAG_GOSSIP, r->comm->world, &q[1]));
    r->comm->bytes_sent += g->n * sizeof(float);
    r->comm->msgs_sent++;
    comm_waitall(r->comm, 2, q, "the gossip exchange with this round's partner");
    mix_into(r->model->params, other, g->beta, g->n);
    g->mixes++;
}

/* A peer declared dead that was only frozen (a stopped process, a swapped-out
 * host) finds, when it wakes, that a step took longer than --timeout: it
 * tells the lead it knows (TAG_GOSSIP_FIN, its step). The lead, which looks
 * every 50 ms while it counts a dead peer, takes it back: the peer is read
 * and averaged again, and once no declared death remains, the job ends as
 * any other (MPI_Finalize, exit 0; every rank takes the lead's verdict in
 * the goodbye). Nobody freezes in simulation. */
static void tell_alive(run_t *r, gossip_t *g)
{
#ifndef DSGD_SIM
    const int me = r->comm->rank;
    int lead = 0;
    while (lead < me && !g->alive[lead]) lead++;
    if (lead >= me || g->mode == GOSSIP_ROUND) return;
    MPI_Request f;
    g->fin_step = r->step;
    if (MPI_Isend(&g->fin_step, 1, MPI_INT64_T, lead, TAG_GOSSIP_FIN, r->comm->world, &f) == MPI_SUCCESS) MPI_Request_free(&f);
#else
    (void)r; (void)g;
#endif
}

static void revive_frozen(run_t *r, gossip_t *g)
{
#ifndef DSGD_SIM
    const int N = r->comm->size, me = r->comm->rank;
    for (int j = 0; j < N && g->dead > 0; j++) {
        int flag = 0;
        if (j == me || g->alive[j]) continue;
        if (MPI_Iprobe(j, TAG_GOSSIP_FIN, r->comm->world, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) continue;
        int64_t step;
        MPI_Recv(&step, 1, MPI_INT64_T, j, TAG_GOSSIP_FIN, r->comm->world, MPI_STATUS_IGNORE);
        g->alive[j] = 1;
        g->dead--;
        g->seen_time[j] = awake_now(r, g);
        fprintf(stderr, "dsgd: rank %d: peer rank %d was frozen, not dead (it woke at its step %lld); it is chosen again\n",
                me, j, (long long)step);
    }
    r->comm->peer_lost = g->dead > 0;
#else
    (void)r; (void)g;
#endif
}

static int gossip_step(run_t *r)
{
    gossip_t *g = r->sync_state;
    const double now = now_s();
    awake_now(r, g);   /* a freeze since the last step is left out of the peers' silence */
    if (g->last_step_t > 0 && now - g->last_step_t > r->cfg->timeout) tell_alive(r, g);   /* woken from a freeze */
    g->last_step_t = now;
    if (r->lead && g->dead > 0 && g->mode != GOSSIP_ROUND && now - g->revive_t > 0.05) { g->revive_t = now; revive_frozen(r, g); }
    optim_step(r->opt, r->model->params, r->model->grads, 0, g->np, r->lr);   /* θ' */
    if (g->mode == GOSSIP_PULL) step_pull(r, g);
    else if (g->mode == GOSSIP_PUSH) step_push(r, g);
    else step_round(r, g);
    publish(r, g, r->step + 1);
    return 0;
}

/* Lead: θ̄ over the live ranks' published copies (its own and the ones not
 * stale), and the consensus distance. */
static float *gossip_average(run_t *r)
{
    gossip_t *g = r->sync_state;
    int N = r->comm->size, me = r->comm->rank, live = 0;
    int64_t step;
    if (!g->avg) g->avg = xalloc_floats(g->n);   /* a rank that took over from a dead lead */
    memset(g->avg, 0, g->n * sizeof(float));
    for (int j = 0; j < N; j++) {
        g->used[j] = 0;
        if (j == me) {
            for (size_t i = 0; i < g->n; i++) g->avg[i] += r->model->params[i];
            g->used[j] = 1;
            live++;
            continue;
        }
        if (!g->alive[j] || read_peer(r, g, j, &step) != 1 || is_stale(r, g, j)) continue;
        const float *t = (const float *)(g->peer + sizeof(published_t));
        for (size_t i = 0; i < g->n; i++) g->avg[i] += t[i];
        g->used[j] = 1;
        live++;
    }
    for (size_t i = 0; i < g->n; i++) g->avg[i] /= (float)live;
    live = 0;
    double dist = 0;
    int counted = 0;
    for (int j = 0; j < N; j++) {
        if (!g->used[j]) continue;
        const float *t = r->model->params;
        if (j != me) {
            if (read_peer(r, g, j, &step) != 1) continue;
            t = (const float *)(g->peer + sizeof(published_t));
        }
        double ss = 0;
        for (size_t i = 0; i < g->np; i++) { double d = (double)t[i] - g->avg[i]; ss += d * d; }
        dist += sqrt(ss);
        counted++;
    }
    g->consensus = counted ? dist / counted : 0;
    return g->avg;
}

static int gossip_lead_lost(const run_t *r);


/* The lead's part of the finish: wait until every live rank has published
 * its final parameters, take their average, say goodbye. */
static void lead_final(run_t *r, gossip_t *g)
{
    const int N = r->comm->size, me = r->comm->rank;
    comm_idle_t idle = comm_idle_start(r->comm);
    if (g->dead > 0 && g->mode != GOSSIP_ROUND) revive_frozen(r, g);
    for (int j = 0; j < N; j++) {
        int64_t step = -1;
        while (j != me && g->alive[j] && (read_peer(r, g, j, &step) != 1 || step <= r->total_steps)) {
            if (awake_now(r, g) - g->seen_time[j] > r->cfg->timeout) { mark_dead(r, g, j, "it never finished", r->cfg->timeout); break; }
            comm_idle(&idle);
        }
    }
    /* the final average takes every live replica, stale or not: all have finished */
    double now = awake_now(r, g);
    for (int j = 0; j < N; j++) g->seen_time[j] = now;
    memcpy(r->model->params, gossip_average(r), g->n * sizeof(float));
    int lost = r->comm->peer_lost;
    for (int j = 0; j < N; j++)
        if (j != me && g->alive[j]) MPI_Send(&lost, 1, MPI_INT, j, TAG_GOSSIP_BYE, r->comm->world);
}

/* Read each live rank below this one: a copy short of "finished" that has
 * not moved for --timeout is a dead rank's. */
static void watch_lower(run_t *r, gossip_t *g)
{
    for (int j = 0; j < r->comm->rank; j++) {
        if (!g->alive[j]) continue;
        int64_t step = -1;
        int rc = read_peer(r, g, j, &step);
        if (rc < 0 || (rc == 1 && step > r->total_steps)) continue;   /* dead already, or finished */
        if (awake_now(r, g) - g->seen_time[j] > r->cfg->timeout) mark_dead(r, g, j, "it stopped before finishing", r->cfg->timeout);
    }
}

static void gossip_finish(run_t *r)
{
    gossip_t *g = r->sync_state;
    int N = r->comm->size, me = r->comm->rank;
    publish(r, g, r->total_steps + 1);   /* "finished" */
    if (g->mode == GOSSIP_PUSH) {
        /* deliver the pushes in flight: DONE to every live peer, then drain until
         * every live peer's DONE is in (messages from one sender arrive in order) */
        int one = 1;
        for (int j = 0; j < N; j++)
            if (j != me && g->alive[j]) MPI_Send(&one, 1, MPI_INT, j, TAG_GOSSIP_DONE, r->comm->world);
        double t0 = now_s();
        comm_idle_t idle = comm_idle_start(r->comm);
        for (;;) {
            drain_inbox(r, g, 0);
            int missing = -1;
            for (int j = 0; j < N; j++) if (j != me && g->alive[j] && !g->done_from[j]) missing = j;
            if (missing < 0) break;
            if (now_s() - t0 > r->cfg->timeout + 10) { mark_dead(r, g, missing, "it never finished", r->cfg->timeout + 10); t0 = now_s(); }
            comm_idle(&idle);
        }
    }
#ifdef DSGD_SIM
    /* nobody dies in simulation, and polling a peer's window until it has
     * finished costs the simulator a 1 MB read per poll: wait for all once */
    MPI_Barrier(r->comm->world);
#endif
    if (r->lead) {
        lead_final(r, g);
    } else {
        /* keep the window up until the lead has read it */
        int lost = 0;
        MPI_Request q;
        /* from the lead, or from the rank that took over from a dead one */
        MPI_CHECK(r->comm, MPI_Irecv(&lost, 1, MPI_INT, MPI_ANY_SOURCE, TAG_GOSSIP_BYE, r->comm->world, &q));
        double t0 = now_s(), checked = t0;
        int got = 0;
        comm_idle_t idle = comm_idle_start(r->comm);
        while (!got) {
            MPI_Test(&q, &got, MPI_STATUS_IGNORE);
            if (got) break;
            /* a lead that died before finishing says no goodbye: the next
             * live rank in line does the lead's part */
            if (g->mode != GOSSIP_ROUND && now_s() - checked > r->cfg->timeout / 10) {
                checked = now_s();
                watch_lower(r, g);
                if (gossip_lead_lost(r)) {
                    MPI_Cancel(&q);
                    MPI_Wait(&q, MPI_STATUS_IGNORE);
                    r->lead = r->evaluates = 1;
                    fprintf(stderr, "dsgd: rank %d: the lead died before finishing; this rank gathers the final average\n", me);
                    lead_final(r, g);
                    return;
                }
            }
            if (now_s() - t0 > 3 * r->cfg->timeout + 10) { mark_dead(r, g, 0, "the lead never said goodbye", 3 * r->cfg->timeout + 10); break; }
            comm_idle(&idle);
        }
        if (got) r->comm->peer_lost = lost;   /* the lead's verdict: every rank finalizes, or none */
    }
}

/* A checkpoint holds every replica as sync.worker_params ([ranks, n]) and
 * their mean as the model (mid-run; the final checkpoint's model is the
 * final average, as before). Round mode, which pairs every rank every step,
 * gathers each rank's parameters and optimizer state collectively, so a
 * resume continues bit for bit. Pull and push have no barrier and survive
 * dead peers, so no collective: the lead reads each live replica's
 * published copy one-sidedly, as it is (a peer may be a few steps behind or
 * ahead; the lead does not wait for it: a rank waiting here, not in MPI,
 * stalled its own pushes in flight and with them the peer it waited for),
 * and a dead one's row is the others' mean. Their optimizer state stays local (a momentum
 * buffer restarts at zero on resume). */
static int gossip_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    gossip_t *g = r->sync_state;
    const int N = r->comm->size, me = r->comm->rank;
    const size_t n = g->n;
    if (g->mode == GOSSIP_ROUND) {
        float *v[3];
        const char *names[3];
        int nv = sync_worker_vectors(r, v, names);   /* the replica (with its statistics), then the optimizer's */
        for (int i = 0; i < nv; i++) sync_rows_add(r, &g->rows, names[i], v[i], i ? g->np : n);
        sync_rows_meta(r, &g->rows, meta);
        if (r->lead && r->step < r->total_steps) {
            if (!g->saved_avg) g->saved_avg = xalloc_floats(n);
            const float *rows = meta->extra[0].data;
            memset(g->saved_avg, 0, n * sizeof(float));
            for (int j = 0; j < N; j++)
                for (size_t i = 0; i < n; i++) g->saved_avg[i] += rows[(size_t)j * n + i];
            for (size_t i = 0; i < n; i++) g->saved_avg[i] /= (float)N;
            meta->params = g->saved_avg;
            meta->state = g->saved_avg + g->np;
        }
        snprintf(meta->sync_state, sizeof meta->sync_state, "workers=%d", N);
        return 0;
    }
    if (!r->lead) return 0;
    if (!g->saved) { g->saved = xalloc_floats((size_t)N * n); g->saved_avg = xalloc_floats(n); }
    int *have = g->used, got = 0;
    memset(g->saved_avg, 0, n * sizeof(float));
    comm_idle_t idle = comm_idle_start(r->comm);
    for (int j = 0; j < N; j++) {
        float *row = g->saved + (size_t)j * n;
        have[j] = 0;
        if (j == me) {
            memcpy(row, r->model->params, n * sizeof(float));
            have[j] = 1;
        }
        while (j != me && g->alive[j]) {   /* 0: the copy was being written; read again */
            int64_t step = -1;
            int rc = read_peer(r, g, j, &step);
            if (rc < 0) break;   /* dead */
            /* a rank killed while publishing leaves its copy half-written
             * for good: without this the lead would read it forever */
            if (rc == 0 && awake_now(r, g) - g->seen_time[j] > r->cfg->timeout) {
                mark_dead(r, g, j, "its copy stayed half-written", r->cfg->timeout);
                break;
            }
            if (rc == 1) {
                memcpy(row, g->peer + sizeof(published_t), n * sizeof(float));
                have[j] = 1;
                break;
            }
            comm_idle(&idle);
        }
        if (!have[j]) continue;
        for (size_t i = 0; i < n; i++) g->saved_avg[i] += row[i];
        got++;
    }
    for (size_t i = 0; i < n; i++) g->saved_avg[i] /= (float)got;
    for (int j = 0; j < N; j++)
        if (!have[j]) memcpy(g->saved + (size_t)j * n, g->saved_avg, n * sizeof(float));
    g->tensor = (ckpt_tensor_t){ .name = "sync.worker_params", .data = g->saved, .rows = N, .cols = (long)n };
    meta->extra = &g->tensor;
    meta->nextra = 1;
    if (r->step < r->total_steps) { meta->params = g->saved_avg; meta->state = g->saved_avg + g->np; }
    snprintf(meta->sync_state, sizeof meta->sync_state, "workers=%d", N);
    return 0;
}

/* Each rank takes back its replica (and, from a round-mode checkpoint, its
 * optimizer state) and publishes it; a checkpoint of another paradigm
 * starts every replica from its one model. Needs the same number of ranks. */
static int gossip_resume(run_t *r, const ckpt_t *ck)
{
    gossip_t *g = r->sync_state;
    const ckpt_meta_t *m = &ck->meta;
    if (strcmp(m->sync, "gossip")) return 0;
    /* the final checkpoint of a rank that took over from a lead dead before
     * the end holds the final average only: every replica starts from it */
    if (!*m->sync_state && ckpt_rows(ck, "sync.worker_params") == 0) return 0;
    int workers, end = 0;
    if (sscanf(m->sync_state, "workers=%d%n", &workers, &end) != 1 || m->sync_state[end] || workers < 2) {
        snprintf(r->err, sizeof r->err, "checkpoint's gossip state '%.64s' is malformed", m->sync_state);
        return -1;
    }
    if (workers != r->comm->size) {
        snprintf(r->err, sizeof r->err, "checkpoint holds the replicas of %d gossip ranks, not %d; resume with %d ranks",
                 workers, r->comm->size, workers);
        return -1;
    }
    float *v[3];
    const char *names[3];
    int nv = sync_worker_vectors(r, v, names);
    for (int i = 0; i < nv; i++) {
        if (i > 0 && ckpt_rows(ck, names[i]) == 0) { memset(v[i], 0, g->np * sizeof(float)); continue; }   /* pull/push: local */
        if (sync_rows_read(r, ck, names[i], v[i], i ? g->np : g->n) != 0) return -1;
    }
    publish(r, g, r->step);
    return 0;
}

static void gossip_destroy(run_t *r)
{
    gossip_t *g = r->sync_state;
    if (!g) return;
    sync_rows_free(&g->rows);
    free(g->saved);
    free(g->saved_avg);
    /* MPI_Win_free is collective: with a dead peer it would wait forever */
    if (!r->comm->peer_lost) {
        for (int k = 0; k < NSEND; k++) MPI_Wait(&g->sreq[k], MPI_STATUS_IGNORE);
        MPI_Win_unlock_all(g->win);
        MPI_Win_free(&g->win);   /* frees pub too */
        for (int k = 0; k < NSEND; k++) free(g->sbuf[k]);
    }
    free(g->seq_a); free(g->seq_b); free(g->used);
    free(g->peer); free(g->mix); free(g->alive); free(g->done_from); free(g->seen_step); free(g->seen_time); free(g->mixed_step); free(g->avg);
    free(g);
    r->sync_state = NULL;
}

/* Pull and push: every rank below this one is dead, so this one takes over
 * the evaluations, the metrics and the checkpoints (round mode, collective,
 * does not survive a death at all). */
static int gossip_lead_lost(const run_t *r)
{
    const gossip_t *g = r->sync_state;
    if (!g || g->mode == GOSSIP_ROUND || r->lead || r->comm->rank == 0) return 0;
    for (int j = 0; j < r->comm->rank; j++)
        if (g->alive[j]) return 0;
    return 1;
}

/* round mode pairs every rank each step: its ranks stop together */
static sync_stop_mode_t gossip_stop_mode(const run_t *r)
{
    return gossip_mode_of(r->cfg->gossip) == GOSSIP_ROUND ? STOP_AGREE : STOP_OWN_CLOCK;
}

static int gossip_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    gossip_t *g = r->sync_state;
    if (!g || max < 4) return 0;
    out[0] = (sync_stat_t){ "consensus_distance", g->consensus, NULL };
    out[1] = (sync_stat_t){ "mixes", (double)g->mixes, NULL };
    out[2] = (sync_stat_t){ "dead_peers", (double)g->dead, NULL };
    out[3] = (sync_stat_t){ "stale_skips", (double)g->stale_skips, NULL };
    return 4;
}

const sync_ops_t sync_gossip = {
    .name = "gossip",
    .help = "gossiping SGD: pull, push or round-based pairwise averaging, no barrier",
    .layout = sync_layout_all_workers,
    .init = gossip_init,
    .step = gossip_step,
    .finish = gossip_finish,
    .destroy = gossip_destroy,
    .stats = gossip_stats,
    .eval_params = gossip_average,
    .eval_has_state = 1,
    .ckpt_state = gossip_ckpt_state,
    .resume = gossip_resume,
    .stop_mode = gossip_stop_mode,
    .lead_lost = gossip_lead_lost,
};
