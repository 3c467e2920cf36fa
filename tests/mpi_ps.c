/* The parameter-server layer on its own over MPI (src/ps, no paradigm, no
 * model), in the spirit of ps-lite's key-value test: the first S ranks are
 * shards, the others workers; at its t-th push worker w pushes the constant
 * gradient (w + 1)·(t mod 5 + 1) with rate 1 onto the vector v_i = i, so
 * every value the workers pull, and the final one, is known exactly (small
 * integers in floats): after t rounds D(t) = F(t) Σ_w (w + 1), with
 * F(t) = Σ_{u ≤ t} (u mod 5 + 1).
 *
 *   kv    ASP: each pull holds, per shard, one integer D = Σ of the pushes
 *         applied there (the same for every key of the slice), at least the
 *         worker's own pushes; the final vector is i − D(T)
 *   bsp   SSP with staleness 0, on a vector of the mlp's size, 200 rounds,
 *         each worker spinning 0-2 ms before a push (computing): the pull
 *         after the c-th push holds exactly c rounds of every worker's
 *         pushes and is stamped c, also for a worker that is away for 3 ms
 *         between its push and its pull (every 10th step, the last worker);
 *         worker 0's evaluation pull every 7th step too
 *   dead  SSP 0 with --timeout 1.5 s: the last worker dies after 3 pushes
 *         (no goodbye); the others' next pull is held until the shards
 *         evict it, then answered; the final vector holds its 3 pushes and
 *         every push of the others, and every worker learns a peer was lost
 *
 * Each runs through the host's shared memory (auto or shm: every rank is on
 * one host, two workers or more) or by message only (messages).
 *
 * Usage: mpirun -np S+W mpi_ps kv|bsp|dead S [auto|shm|messages]
 * (tests/pslayer.sh runs it).
 * Prints one line per worker 0 check, "ok ..." or "FAIL ...", and exits 1
 * on a failure. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "ps/ps.h"
#include "util/util.h"

/* keys: not a multiple of 2 or 3, so the slices differ in size; several
 * of the shared-memory path's progress chunks (ps_shm_chunk) per slice, so
 * that a worker copying a reply as the shard computes it is checked for
 * torn and stale chunks */
static size_t N = 40001;
static int T = 20;        /* pushes per worker */

/* F(t): the sum of a worker's gradient factors over its first t pushes */
static long F(int t)
{
    long f = 0;
    for (int u = 1; u <= t; u++) f += u % 5 + 1;
    return f;
}

static int failures;

static void report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    failures += !ok;
}

/* Σ applied at each shard, from a pulled vector; -1 if a slice is not one
 * integer offset for all its keys. */
static int offsets(const float *p, int S, long *D)
{
    for (int k = 0; k < S; k++) {
        size_t lo, n;
        ps_shard_range(N, S, k, &lo, &n);
        D[k] = lroundf((float)lo - p[lo]);
        for (size_t i = lo; i < lo + n; i++)
            if ((float)i - p[i] != (float)D[k]) return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* MPICH's Hydra, told to keep the survivors of a death running
     * (-disable-auto-cleanup), signals them with SIGUSR1: as dsgd does, ignore it */
    signal(SIGUSR1, SIG_IGN);
    comm_t c;
    comm_init(&c, &argc, &argv, 0);
    const char *mode = argc > 1 ? argv[1] : "kv";
    const int S = argc > 2 ? atoi(argv[2]) : 1, W = c.size - S;
    const char *tr = argc > 3 ? argv[3] : "auto";
    ps_transport_t mode_tr;
    if (S < 1 || W < 2 || (strcmp(mode, "kv") && strcmp(mode, "bsp") && strcmp(mode, "dead")) ||
        ps_transport_parse(tr, &mode_tr) != 0)
        die("usage: mpirun -np S+W mpi_ps kv|bsp|dead S [auto|shm|messages] (S >= 1 shards, W >= 2 workers)");
    const int shm = mode_tr != PS_MESSAGES;   /* W >= 2 on one host: auto uses it too */
    const int bsp = !strcmp(mode, "bsp");
    if (bsp) N = 235146, T = 200;
    const int dead = !strcmp(mode, "dead");
    ps_config_t cfg = { .servers = S, .workers = W, .gate = strcmp(mode, "kv") ? GATE_SSP : GATE_ASP, .staleness = 0,
                        .replica_size = 1, .timeout_s = dead ? 1.5 : 60, .opt = { .kind = OPT_SGD } };
    c.timeout_s = cfg.timeout_s;
    cfg.shm = ps_shm_open(&c, S, W, N, mode_tr);   /* every rank: collective */
    float *v = xalloc_floats(N);
    for (size_t i = 0; i < N; i++) v[i] = (float)i;
    if (c.rank < S) {
        ps_server_run(&c, &cfg, c.rank, v, N);
        ps_shm_close(cfg.shm);
        comm_finalize(&c);
        return 0;
    }
    const int w = c.rank - S;
    long sum_all = 0;
    for (int j = 0; j < W; j++) sum_all += j + 1;
    ps_client_t *pc = ps_client_create(&c, &cfg, w, N);
    float *g = xalloc_floats(N), *p = xalloc_floats(N);
    float *e = xalloc_floats(N);
    long D[8];
    int bad_slice = 0, bad_own = 0, bad_round = 0, bad_stamp = 0, bad_eval = 0;
    double held_s = 0;
    for (int t = 1; t <= T; t++) {
        /* every 10th step the last worker pushes last and is then away for
         * 3 ms before it pulls (descheduled): the others have their answers
         * and push the next round meanwhile */
        const int away = bsp && w == W - 1 && t % 10 == 0;
        if (bsp) {   /* computing: 0-2 ms, different for every worker and step */
            double z = now_s(), d = (double)((w * 7919 + t * 104729) % 1000) * 2e-6 + (away ? 3e-3 : 0);
            while (now_s() - z < d) {}
        }
        for (size_t i = 0; i < N; i++) g[i] = (float)((w + 1) * (t % 5 + 1));
        ps_push_start(pc, g, 1.0f, t);
        if (away) usleep(3000);
        double t0 = now_s();
        ps_pull_start(pc, 0, p);
        ps_pull_wait(pc, p);
        if (dead && t == 4) held_s = now_s() - t0;
        if (offsets(p, S, D) != 0) { bad_slice++; continue; }
        if (bsp && w == 0 && t % 7 == 0) {   /* answered at once: worker 0 goes first in a round */
            long E[8];
            ps_pull_start(pc, 1, e);
            ps_pull_wait(pc, e);
            if (offsets(e, S, E) != 0) bad_eval++;
            for (int k = 0; k < S; k++) bad_eval += E[k] != F(t) * sum_all;
        }
        for (int k = 0; k < S; k++) {
            if (D[k] < (w + 1) * F(t)) bad_own++;   /* its own pushes went before its pull */
            if (bsp && D[k] != F(t) * sum_all) bad_round++;
            if (bsp && pc->stamp[k] != t) bad_stamp++;
        }
        if (dead && w == W - 1 && t == 3) _exit(0);   /* dies without a word to the shards */
    }
    const uint64_t sent = c.bytes_sent;   /* the pushes and pulls (the done message is small) */
    ps_finish(pc, w == 0, p);
    /* every surviving worker's counts, summed at worker 0 */
    int bad[5] = { bad_slice, bad_own, bad_round, bad_stamp, bad_eval };
    const int alive = dead ? W - 1 : W;
    if (w > 0) MPI_Send(bad, 5, MPI_INT, S, 99, c.world);
    for (int q = 1; w == 0 && q < alive; q++) {
        int b[5];
        MPI_Recv(b, 5, MPI_INT, S + q, 99, c.world, MPI_STATUS_IGNORE);
        for (int i = 0; i < 5; i++) bad[i] += b[i];
    }
    bad_slice = bad[0], bad_own = bad[1], bad_round = bad[2], bad_stamp = bad[3], bad_eval = bad[4];
    if (w == 0) {
        long want = dead ? W * F(3) + F(T) * (sum_all - W) : F(T) * sum_all;
        int fin = offsets(p, S, D) == 0;
        for (int k = 0; fin && k < S; k++) fin = D[k] == want;
        report(!bad_slice, "%s S=%d W=%d %s: every pull of every worker holds one whole update count per shard (%d pulls torn)",
               mode, S, W, tr, bad_slice);
        report(!bad_own, "%s S=%d W=%d %s: every pull includes the worker's own pushes (%d short)", mode, S, W, tr, bad_own);
        /* one host: through shared memory a push or a pull sends only its header */
        const uint64_t payload = (uint64_t)T * N * sizeof(float);
        report(shm ? sent < payload / 2 : sent >= payload, "%s S=%d W=%d %s: worker 0's pushes went %s (%llu bytes sent, payload %llu)",
               mode, S, W, tr, shm ? "through shared memory" : "by message", (unsigned long long)sent, (unsigned long long)payload);
        report(fin, "%s S=%d W=%d: the final vector is i - %ld at every key (shard 0: i - %ld)", mode, S, W, want, D[0]);
        if (bsp) {
            report(!bad_round && !bad_stamp, "bsp S=%d W=%d %s: every worker's pull c holds exactly c rounds and is stamped c "
                   "(%d, %d wrong of %d)", S, W, tr, bad_round, bad_stamp, W * T * S);
            report(!bad_eval, "bsp S=%d W=%d %s: worker 0's evaluation pulls hold exactly the rounds of its last pull (%d wrong)",
                   S, W, tr, bad_eval);
        }
        if (dead) {
            report(held_s > 0.5 && held_s < cfg.timeout_s + 10, "dead S=%d W=%d: the pull after the death was held %.2f s "
                   "(until the eviction, --timeout %g s) and then answered", S, W, held_s, cfg.timeout_s);
            report(c.peer_lost == 1 && pc->stats.evicted == 1, "dead S=%d W=%d: the lead learns one worker was lost "
                   "(peer_lost %d, evicted %d)", S, W, c.peer_lost, (int)pc->stats.evicted);
        }
    }
    ps_client_free(pc);
    ps_shm_close(cfg.shm);
    free(g); free(p); free(e); free(v);
    comm_finalize(&c);
    return failures ? 1 : 0;
}
