/* The parameter-server layer on its own over MPI (src/ps, no paradigm, no
 * model), in the spirit of ps-lite's key-value test: the first S ranks are
 * shards, the others workers; every worker w pushes the constant gradient
 * w + 1 with rate 1 onto the vector v_i = i, so every value the workers
 * pull, and the final one, is known exactly (small integers in floats).
 *
 *   kv    ASP: each pull holds, per shard, one integer D = Σ of the pushes
 *         applied there (the same for every key of the slice), at least the
 *         worker's own pushes; the final vector is i − T Σ_w (w + 1)
 *   bsp   SSP with staleness 0: the pull after the c-th push holds exactly
 *         c rounds of every worker's pushes and is stamped c
 *   dead  SSP 0 with --timeout 1.5 s: the last worker dies after 3 pushes
 *         (no goodbye); the others' next pull is held until the shards
 *         evict it, then answered; the final vector holds its 3 pushes and
 *         every push of the others, and every worker learns a peer was lost
 *
 * Usage: mpirun -np S+W mpi_ps kv|bsp|dead S   (tests/pslayer.sh runs it).
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

#define N 1000   /* keys: not a multiple of 2 or 3, so the slices differ in size */
#define T 20     /* pushes per worker */

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
    comm_init(&c, &argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "kv";
    const int S = argc > 2 ? atoi(argv[2]) : 1, W = c.size - S;
    if (S < 1 || W < 2 || (strcmp(mode, "kv") && strcmp(mode, "bsp") && strcmp(mode, "dead")))
        die("usage: mpirun -np S+W mpi_ps kv|bsp|dead S (S >= 1 shards, W >= 2 workers)");
    const int dead = !strcmp(mode, "dead");
    ps_config_t cfg = { .servers = S, .workers = W, .gate = strcmp(mode, "kv") ? GATE_SSP : GATE_ASP, .staleness = 0,
                        .replica_size = 1, .timeout_s = dead ? 1.5 : 60, .opt = { .kind = OPT_SGD } };
    c.timeout_s = cfg.timeout_s;
    float *v = xalloc_floats(N);
    for (size_t i = 0; i < N; i++) v[i] = (float)i;
    if (c.rank < S) {
        ps_server_run(&c, &cfg, c.rank, v, N);
        comm_finalize(&c);
        return 0;
    }
    const int w = c.rank - S;
    long sum_all = 0;
    for (int j = 0; j < W; j++) sum_all += j + 1;
    ps_client_t *pc = ps_client_create(&c, &cfg, w, N);
    float *g = xalloc_floats(N), *p = xalloc_floats(N);
    for (size_t i = 0; i < N; i++) g[i] = (float)(w + 1);
    long D[8];
    int bad_slice = 0, bad_own = 0, bad_round = 0, bad_stamp = 0;
    double held_s = 0;
    for (int t = 1; t <= T; t++) {
        ps_push_start(pc, g, 1.0f, t);
        double t0 = now_s();
        ps_pull_start(pc, 0, p);
        ps_pull_wait(pc, p);
        if (dead && t == 4) held_s = now_s() - t0;
        if (offsets(p, S, D) != 0) { bad_slice++; continue; }
        for (int k = 0; k < S; k++) {
            if (D[k] < (long)t * (w + 1)) bad_own++;   /* its own pushes went before its pull */
            if (!strcmp(mode, "bsp") && D[k] != (long)t * sum_all) bad_round++;
            if (!strcmp(mode, "bsp") && pc->stamp[k] != t) bad_stamp++;
        }
        if (dead && w == W - 1 && t == 3) _exit(0);   /* dies without a word to the shards */
    }
    ps_finish(pc, w == 0, p);
    if (w == 0) {
        long want = dead ? 3L * W + (long)T * (sum_all - W) : (long)T * sum_all;
        int fin = offsets(p, S, D) == 0;
        for (int k = 0; fin && k < S; k++) fin = D[k] == want;
        report(!bad_slice, "%s S=%d W=%d: every pull holds one whole update count per shard (%d pulls torn)", mode, S, W, bad_slice);
        report(!bad_own, "%s S=%d W=%d: every pull includes the worker's own pushes (%d short)", mode, S, W, bad_own);
        report(fin, "%s S=%d W=%d: the final vector is i - %ld at every key (shard 0: i - %ld)", mode, S, W, want, D[0]);
        if (!strcmp(mode, "bsp"))
            report(!bad_round && !bad_stamp, "bsp S=%d W=%d: pull c holds exactly c rounds and is stamped c (%d, %d wrong)",
                   S, W, bad_round, bad_stamp);
        if (dead) {
            report(held_s > 0.5 && held_s < cfg.timeout_s + 10, "dead S=%d W=%d: the pull after the death was held %.2f s "
                   "(until the eviction, --timeout %g s) and then answered", S, W, held_s, cfg.timeout_s);
            report(c.peer_lost == 1 && pc->stats.evicted == 1, "dead S=%d W=%d: the lead learns one worker was lost "
                   "(peer_lost %d, evicted %d)", S, W, c.peer_lost, (int)pc->stats.evicted);
        }
    }
    ps_client_free(pc);
    free(g); free(p); free(v);
    comm_finalize(&c);
    return failures ? 1 : 0;
}
