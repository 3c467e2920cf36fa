#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#endif
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "mpi_defaults.h"
#include "../util/cpu.h"
#include "../util/sim.h"
#include "../util/util.h"

#define CHUNK COMM_MAX_SPAN  /* MPI counts are int: large vectors go in pieces */

/* The simulated build (sim_build(), util/sim.h) reduces and broadcasts
 * with the blocking calls in the functions below, for two reasons
 * (SimGrid 3.32; docs/simulation.md). Its in-place
 * MPI_Iallreduce is wrong: with several in flight (bsp's per-layer spans)
 * elements come back wrong from 17000 floats on, and a single one crashed.
 * And SMPI's nonblocking collectives are its naive linear algorithms, which
 * ignore smpi/coll-selector, so they would not cost what Open MPI's or
 * MPICH's would (8 ranks, 1M floats: 25 ms against 7.6 ms for the ring the
 * Open MPI selector picks). The price: bsp's overlap of the all-reduce with
 * backward is not simulated. A simulated peer never dies, so nothing is lost
 * by not polling with a timeout there. */

double comm_wake_latency(void)
{
    double late[9];
    for (int i = 0; i < 9; i++) {
        struct timespec ts = { 0, 10000 };
        double t0 = now_s();
        nanosleep(&ts, NULL);
        late[i] = now_s() - t0 - 10e-6;
    }
    for (int i = 1; i < 9; i++)   /* insertion sort: the median of 9 */
        for (int j = i; j > 0 && late[j] < late[j - 1]; j--) {
            double t = late[j];
            late[j] = late[j - 1];
            late[j - 1] = t;
        }
    return late[4] > 0 ? late[4] : 0;
}

/* The idle policy's parameters for this machine: the timer slack lowered
 * (a sleep's lateness is then the scheduler's wake-up, not a 50 us
 * rounding), the wake-up latency measured, and whether this host runs more
 * ranks than it has cores (MPI's shared-memory split counts the ranks; the
 * cores are those the host's ranks may run on together, the union of their
 * affinity masks: a taskset, a cgroup's cpuset or a launcher's binding
 * leaves fewer than the machine has). */
static void idle_calibrate(comm_t *c)
{
    c->poll_s = 50e-6;
    if (sim_build()) return;
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
    c->wake_s = comm_wake_latency();
    int local = 1;
    long cores = -1;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const int have_mask = sched_getaffinity(0, sizeof mask, &mask) == 0;
    if (have_mask) c->own_cores = CPU_COUNT(&mask);
    MPI_Comm node;
    if (c->size > 1 && MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        c->host_ranks = local;
        int all_have = have_mask;
        MPI_Allreduce(MPI_IN_PLACE, &all_have, 1, MPI_INT, MPI_LAND, node);
        if (all_have) {
            MPI_Allreduce(MPI_IN_PLACE, &mask, (int)sizeof mask, MPI_BYTE, MPI_BOR, node);
            cores = CPU_COUNT(&mask);
        }
        MPI_Comm_free(&node);
    } else if (have_mask) {
        cores = CPU_COUNT(&mask);
    }
    if (cores <= 0) cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->oversubscribed = cores > 0 && local > cores;
    double p = c->wake_s < 20e-6 ? 20e-6 : c->wake_s > 200e-6 ? 200e-6 : c->wake_s;
    c->poll_s = c->oversubscribed ? 0 : p;
}

int comm_threads(comm_t *c, long requested)
{
    if (sim_build()) {
        /* simulated ranks are threads of one process, each one simulated
         * core: the kernels run on one thread (the build has no OpenMP) */
        c->threads = 1;
        snprintf(c->threads_from, sizeof c->threads_from, "simulated build%s", requested > 1 ? ", --threads ignored" : "");
    } else if (requested > 0) {
        c->threads = (int)requested;
        snprintf(c->threads_from, sizeof c->threads_from, "--threads");
    } else if (cpu_env_threads(&c->threads)) {
        /* the count OpenMP programs take from the environment (PyTorch
         * too): a launcher that knows the host's share of the cores, or a
         * user who shares them with other jobs, says it there */
        snprintf(c->threads_from, sizeof c->threads_from, "auto: OMP_NUM_THREADS=%d", c->threads);
    } else {
        const int t = c->own_cores / (c->host_ranks > 0 ? c->host_ranks : 1);
        c->threads = t < 1 ? 1 : t;
        snprintf(c->threads_from, sizeof c->threads_from, "auto: %d core%s for %d rank%s on this host", c->own_cores,
                 c->own_cores == 1 ? "" : "s", c->host_ranks, c->host_ranks == 1 ? "" : "s");
    }
    return c->threads;
}

void comm_init(comm_t *c, int *argc, char ***argv, int posted_receives)
{
    memset(c, 0, sizeof *c);
    int up = 0;
    MPI_Initialized(&up);
    comm_mpi_defaults(c, posted_receives);
    /* funneled: the kernels' threads (--threads) never call MPI; only the
     * thread that called MPI_Init does */
    int provided = 0;
    /* the threads MPI starts (its runtime's progress threads) leave the
     * process's signals to this one (util/cpu.h, cpu_process_signals); a
     * signal that comes meanwhile is taken once they are unblocked */
    sigset_t sigs, was;
    cpu_process_signals(&sigs);
    pthread_sigmask(SIG_BLOCK, &sigs, &was);
    const int init_rc = up ? MPI_SUCCESS : MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (init_rc != MPI_SUCCESS) die("MPI_Init failed; check the MPI installation (mpirun --version)");
    c->world = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    int len = 0;
    MPI_Get_processor_name(c->host, &len);
    c->timeout_s = 60;
    c->host_ranks = 1;
    c->own_cores = 1;
    c->threads = 1;
    idle_calibrate(c);
}

void comm_finalize(comm_t *c)
{
    /* MPI_Finalize synchronizes with every process, the dead one included:
     * after an eviction the survivors leave without it */
    if (c->peer_lost) {
        fflush(NULL);
        return;
    }
    int down = 0;
    MPI_Finalized(&down);
    if (down) return;
    if (c->has_kept_win) {
        MPI_Win_unlock_all(c->kept_win);
        MPI_Win_free(&c->kept_win);
        MPI_Comm_free(&c->kept_comm);
        c->has_kept_win = 0;
    }
#ifdef MPICH_VERSION
    /* MPICH 4.0 over UCX's tcp transport: a rank's MPI_Finalize flushes each
     * endpoint and waits for the peer's acknowledgement, but a peer that has
     * finished its own flush stops sending them, and the rank waits forever
     * (1 run in 3 when the lead enters it long after the others; MPICH 4.2
     * adds a barrier inside). Entering together makes it rare, not
     * impossible (scripts/mpi-env.sh). */
    if (!sim_build() && c->size > 1) MPI_Barrier(c->world);
#endif
    MPI_Finalize();
}

void comm_keep_window(comm_t *c, MPI_Win win, MPI_Comm comm)
{
    while (c->parent) c = c->parent;   /* the communicator that finalizes */
    if (c->has_kept_win) die("comm_keep_window: a window is already kept (a bug)");
    c->kept_win = win;
    c->kept_comm = comm;
    c->has_kept_win = 1;
}

void comm_check(const comm_t *c, int rc, const char *call, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    die("%s failed at %s:%d: %s (rank %d on %s)", call, file, line, msg, c->rank, c->host);
}

int comm_setup_failed(comm_t *c, int failed, const char *msg)
{
    int first = failed ? c->rank : c->size, nfail = failed ? 1 : 0;
    if (c->size > 1) {
        MPI_CHECK(c, MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, c->world));
        MPI_CHECK(c, MPI_Allreduce(MPI_IN_PLACE, &nfail, 1, MPI_INT, MPI_SUM, c->world));
    }
    if (first == c->size) return 0;
    if (c->rank == first) {
        if (nfail == c->size) fprintf(stderr, "dsgd: error: %s\n", msg);
        else fprintf(stderr, "dsgd: error: rank %d (%s): %s\n", c->rank, c->host, msg);
        fflush(stderr);
    }
    return 1;
}

void comm_setup_check(comm_t *c, int failed, const char *msg)
{
    if (!comm_setup_failed(c, failed, msg)) return;
    MPI_Finalize();
    exit(1);
}

/* FNV-1a, enough to tell configurations apart. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* First line of a that differs from the same-named line of b. */
static void first_difference(const char *mine, const char *root, char *out, size_t outlen)
{
    snprintf(out, outlen, "(unknown setting)");
    for (const char *p = mine; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        size_t klen = eq ? (size_t)(eq - p) + 1 : len;
        const char *q = root;
        int found = 0;
        while (*q) {
            const char *qe = strchr(q, '\n');
            size_t qlen = qe ? (size_t)(qe - q) : strlen(q);
            if (qlen >= klen && !strncmp(q, p, klen)) {
                found = 1;
                if (qlen != len || strncmp(q, p, len)) {
                    snprintf(out, outlen, "--%.*s here but --%.*s on rank 0", (int)len, p, (int)qlen, q);
                    return;
                }
                break;
            }
            q += qlen + (qe ? 1 : 0);
        }
        if (!found) { snprintf(out, outlen, "--%.*s here, unset on rank 0", (int)len, p); return; }
        p += len + (eol ? 1 : 0);
    }
}

void comm_check_same_config(comm_t *c, const char *desc)
{
    if (c->size == 1) return;
    uint64_t h = fnv1a(desc);
    uint64_t *all = c->rank == 0 ? xmalloc(sizeof(uint64_t) * (size_t)c->size) : NULL;
    MPI_CHECK(c, MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, c->world));
    int differ = 0;
    char ranks[256] = "";
    if (c->rank == 0) {
        size_t at = 0;
        for (int i = 1; i < c->size; i++)
            if (all[i] != h) {
                if (differ < 8) at += (size_t)snprintf(ranks + at, sizeof ranks - at, "%s%d", differ ? "," : "", i);
                differ++;
            }
        free(all);
    }
    MPI_CHECK(c, MPI_Bcast(&differ, 1, MPI_INT, 0, c->world));
    if (!differ) return;
    MPI_CHECK(c, MPI_Bcast(ranks, sizeof ranks, MPI_CHAR, 0, c->world));
    int len = (int)strlen(desc) + 1;
    MPI_CHECK(c, MPI_Bcast(&len, 1, MPI_INT, 0, c->world));
    char *root = xmalloc((size_t)len);
    if (c->rank == 0) memcpy(root, desc, (size_t)len);
    MPI_CHECK(c, MPI_Bcast(root, len, MPI_CHAR, 0, c->world));
    /* the lowest differing rank explains; comm_setup_check stops everyone */
    char msg[700] = "", diff[400];
    int mine = c->rank != 0 && fnv1a(desc) != fnv1a(root);
    if (mine) {
        first_difference(desc, root, diff, sizeof diff);
        snprintf(msg, sizeof msg, "configuration differs from rank 0's on rank(s) %s: %s; start every rank with the same flags",
                 ranks, diff);
    }
    free(root);
    comm_setup_check(c, mine, msg);
}

void comm_fault(comm_t *c, const char *what, const int *lost, int nlost)
{
    for (comm_t *p = c; p; p = p->parent)
        if (p->on_fault) {
            comm_fault_fn fn = p->on_fault;
            p->on_fault = NULL;   /* a fault inside the hook must not re-enter it */
            fn(p->fault_ctx, what, lost, nlost);
            return;
        }
}

/* After a timeout: every survivor tells every other rank it is alive, then
 * listens for a grace period. Ranks not heard from are reported missing. */
static void __attribute__((noreturn)) comm_rollcall_and_exit(comm_t *c, const char *what, int mpi_error)
{
    const double grace = live_deadline(c->timeout_s, LIVE_ROLLCALL);
    int me = c->rank, n = c->size;
    MPI_Request *sends = xmalloc(sizeof(MPI_Request) * (size_t)n);
    MPI_Request *recvs = xmalloc(sizeof(MPI_Request) * (size_t)n);
    int *inbox = xcalloc((size_t)n, sizeof(int)), *heard = xcalloc((size_t)n, sizeof(int));
    for (int p = 0; p < n; p++) {
        sends[p] = recvs[p] = MPI_REQUEST_NULL;
        if (p == me) continue;
        MPI_Isend(&me, 1, MPI_INT, p, TAG_ROLLCALL, c->world, &sends[p]);
        MPI_Irecv(&inbox[p], 1, MPI_INT, p, TAG_ROLLCALL, c->world, &recvs[p]);
    }
    heard[me] = 1;
    double t0 = now_s();
    int pending = n - 1;
    while (pending > 0 && now_s() - t0 < grace) {
        for (int p = 0; p < n; p++) {
            if (heard[p] || recvs[p] == MPI_REQUEST_NULL) continue;
            int done = 0;
            if (MPI_Test(&recvs[p], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) { recvs[p] = MPI_REQUEST_NULL; continue; }
            if (done) { heard[p] = 1; pending--; }
        }
        usleep(1000);
    }
    int lowest_alive = me, nlost = 0;
    int *lost = xcalloc((size_t)n, sizeof(int));
    for (int p = 0; p < me; p++) if (heard[p]) { lowest_alive = p; break; }
    for (int p = 0; p < n; p++)
        if (!heard[p]) lost[nlost++] = c->world_ranks ? c->world_ranks[p] : p;
    comm_fault(c, what, lost, nlost);
    if (lowest_alive == me) {
        char missing[256] = "";
        size_t at = 0;
        int nmiss = 0;
        for (int p = 0; p < n; p++)
            if (!heard[p] && at < sizeof missing)
                at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%d", nmiss++ ? ", " : "",
                                       c->world_ranks ? c->world_ranks[p] : p);
        if (nmiss)
            fprintf(stderr, "dsgd: error: rank%s %s did not arrive at %s (step %ld) within --timeout %g s (dead or hung); stopping all ranks\n",
                    nmiss > 1 ? "s" : "", missing, what, c->step, c->timeout_s);
        else
            fprintf(stderr, "dsgd: error: %s did not complete within --timeout %g s%s, though every rank answered a roll call; stopping\n",
                    what, c->timeout_s, mpi_error ? " (MPI reported an error)" : "");
        fflush(stderr);
    }
    /* no MPI_Finalize: it would wait for the missing rank */
    _exit(1);
}

void comm_idle(comm_idle_t *w)
{
    const double now = now_s();
    if (w->since <= 0) { w->since = now; return; }
    const double waited = now - w->since;
    if (waited < w->poll_s) return;
    if (waited < w->yield_s || w->spin) {
        /* Under SimGrid every simulated rank is a context of one process:
         * yielding the core hands real time to unrelated processes (on a
         * busy machine, most of a simulation's wall time went there) and
         * moves no simulated clock. The MPI call that polled has already
         * advanced it (smpi/test, smpi/iprobe). */
        if (!sim_build()) sched_yield();
        return;
    }
    /* Short sleeps while the wait is young: a rank that sleeps also stops
     * moving its messages (Open MPI's shared-memory transport copies a large
     * non-contiguous message in 32 KB fragments, each needing both ranks in
     * an MPI call), so a server sleeping 1 ms stalls every reply in flight;
     * a 5-rank asp run on 2 cores took 1.4x as long with 1 ms sleeps as with
     * yields. Long waits (a gated worker, a finished rank) sleep longer. */
    double d = waited / 8;
    const double cap = waited < 50e-3 ? 100e-6 : 1e-3;
    if (d > cap) d = cap;
    struct timespec ts = { 0, (long)(d * 1e9) };
    nanosleep(&ts, NULL);
}

comm_wait_t comm_wait_start(const comm_t *c, double limit_s)
{
    comm_wait_t w = { .idle = comm_idle_start(c), .gap = comm_deadline(c, LIVE_STALL), .limit = limit_s };
    if (limit_s > 0 && w.gap > live_deadline(limit_s, LIVE_STALL)) w.gap = live_deadline(limit_s, LIVE_STALL);
    w.from = live_awake(&w.clock, w.gap);
    return w;
}

double comm_wait_s(comm_wait_t *w) { return live_awake(&w->clock, w->gap) - w->from; }

int comm_wait_late(comm_wait_t *w) { return w->limit > 0 && comm_wait_s(w) > w->limit; }

int comm_wait_over(comm_wait_t *w)
{
    if (comm_wait_late(w)) return 1;
    comm_idle(&w->idle);
    return 0;
}

void comm_wait_heard(comm_wait_t *w)
{
    w->from = live_awake(&w->clock, w->gap);
    comm_idle_reset(&w->idle);
}

size_t comm_window_bytes(size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t p = page > 0 ? (size_t)page : 4096;
    return (bytes + p - 1) / p * p;
}

int comm_testall(int n, MPI_Request *reqs, int *done)
{
    /* SimGrid's MPI_Testall lets the other simulated ranks run; a loop of
     * MPI_Test calls may never do so (util/sim.h) */
    return sim_testall(n, reqs, done);
}

int comm_waitall(comm_t *c, int n, MPI_Request *reqs, const char *what)
{
    double t0 = now_s();
    if (sim_build()) {
        /* every failed test is a simulated event: polling ranks cost the
         * simulator more than everything else (and nobody dies there) */
        if (sim_waitall(n, reqs) != MPI_SUCCESS) comm_rollcall_and_exit(c, what, 1);
        c->comm_s += now_s() - t0;
        return 0;
    }
    /* never sleep here: a nonblocking collective (and a large message's
     * fragments) advances only inside MPI calls, so each sleep between two
     * tests stalls every rank of the collective (a 2-rank all-reduce of the
     * mlp gradient took 8-12 ms with sleeps, 0.2-0.6 ms bare); yielding
     * still leaves the core to a rank that computes */
    comm_wait_t w = comm_wait_start(c, comm_deadline(c, LIVE_SILENT));
    w.idle.spin = 1;
    for (;;) {
        int done = 0;
        int rc = comm_testall(n, reqs, &done);
        if (rc != MPI_SUCCESS) comm_rollcall_and_exit(c, what, 1);
        if (done) break;
        if (comm_wait_over(&w)) comm_rollcall_and_exit(c, what, 0);
    }
    c->comm_s += now_s() - t0;
    return 0;
}

void comm_iallreduce_sum(comm_t *c, float *buf, size_t n, MPI_Request *req)
{
    if (n > CHUNK) die("comm_iallreduce_sum: span of %zu floats exceeds one MPI call; split it", n);
    double t0 = now_s();
    if (sim_build()) {
        MPI_CHECK(c, MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->world));
        *req = MPI_REQUEST_NULL;
    } else {
        MPI_CHECK(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->world, req));
    }
    c->comm_s += now_s() - t0;
    c->bytes_sent += n * sizeof(float);
    c->msgs_sent++;
    c->collectives++;
}

void comm_allreduce_sum(comm_t *c, float *buf, size_t n, const char *what)
{
    MPI_Request req[16];
    int k = 0;
    for (size_t off = 0; off < n; off += CHUNK) {
        if (k == 16) { comm_waitall(c, k, req, what); k = 0; }
        comm_iallreduce_sum(c, buf + off, n - off < CHUNK ? n - off : CHUNK, &req[k++]);
    }
    comm_waitall(c, k, req, what);
}

void comm_allreduce_int(comm_t *c, int *buf, int n, MPI_Op op, const char *what)
{
    c->bytes_sent += (uint64_t)n * sizeof(int);
    c->msgs_sent++;
    c->collectives++;
    comm_allreduce_int_uncounted(c, buf, n, op, what);
}

void comm_allreduce_int_uncounted(comm_t *c, int *buf, int n, MPI_Op op, const char *what)
{
    /* the blocking call of the simulated build is the whole wait: it is
     * communication too (uncounted, a bounded localsgd run's stop decisions
     * went missing from its accounting) */
    const double t0 = now_s();
    if (sim_build()) {
        MPI_CHECK(c, MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT, op, c->world));
        c->comm_s += now_s() - t0;
        return;
    }
    MPI_Request req;
    MPI_CHECK(c, MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_INT, op, c->world, &req));
    c->comm_s += now_s() - t0;
    comm_waitall(c, 1, &req, what);
}

void comm_allgather_double(comm_t *c, const double *mine, double *all, int n, const char *what)
{
    MPI_Request req = MPI_REQUEST_NULL;
    const double t0 = now_s();
    if (sim_build()) MPI_CHECK(c, MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, c->world));
    else MPI_CHECK(c, MPI_Iallgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, c->world, &req));
    c->comm_s += now_s() - t0;
    c->bytes_sent += (uint64_t)n * sizeof(double);
    c->msgs_sent++;
    c->collectives++;
    comm_waitall(c, 1, &req, what);
}

void comm_bcast(comm_t *c, void *buf, size_t bytes, int root, const char *what)
{
    MPI_Request req[16];
    int k = 0;
    double t0 = now_s();
    for (size_t off = 0; off < bytes; off += CHUNK) {
        if (k == 16) { c->comm_s += now_s() - t0; comm_waitall(c, k, req, what); k = 0; t0 = now_s(); }
        size_t len = bytes - off < CHUNK ? bytes - off : CHUNK;
        req[k] = MPI_REQUEST_NULL;
        if (sim_build()) MPI_CHECK(c, MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, root, c->world));
        else MPI_CHECK(c, MPI_Ibcast((char *)buf + off, (int)len, MPI_BYTE, root, c->world, &req[k]));
        k++;
        if (c->rank == root) { c->bytes_sent += len; c->msgs_sent++; }
    }
    c->collectives++;
    c->comm_s += now_s() - t0;   /* the calls themselves (the simulated build's blocking ones: all of it) */
    if (!sim_build()) comm_waitall(c, k, req, what);
}
