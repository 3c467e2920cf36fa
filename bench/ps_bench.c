/* Parameter-server costs, with the mlp vector (235146 floats):
 *
 *   roundtrip  one worker, one shard: push + gated pull of the whole vector,
 *              against a bare MPI_Send/MPI_Recv ping-pong of the same bytes
 *              plus the shard's update of the whole vector alone (SGD, in
 *              place, as the shard applies a push before it answers a pull)
 *   throughput W workers pushing and pulling as fast as they can (ASP):
 *              updates the shard applies per second, and the bytes per
 *              second it moves (each update: a vector in, a vector out)
 *              against this machine's memory bandwidth (memcpy, one core,
 *              median of 11 copies before and after the run)
 *
 *   wakeup     what the idle policy costs a waiting rank: rank 1 sends a
 *              ping after a delay d, rank 0 waits for it under a policy and
 *              answers at once; the policy's wake-up latency is the median
 *              round trip under it minus the median under pure polling, at
 *              each d (the phases of comm_idle: poll, yield, sleep)
 *
 * Usage: mpirun -np 2 build/bench/ps_bench roundtrip [iters] [auto|shm|messages]
 *        mpirun -np 1+W build/bench/ps_bench throughput [iters] [auto|shm|messages]
 * (the transport, as --ps-transport) 
 *        mpirun -np 2 build/bench/ps_bench wakeup [reps]
 *        mpirun -np 2 build/bench/ps_bench latency [reps] [bytes]
 *   latency    the median round trip of a ping of `bytes` (default 1)
 *              between ranks 0 and 1 and back, and half of it: for 1 byte
 *              the one-way latency that experiments/net_calibration.sh gives
 *              the simulated links (also built for the simulator: make sim) */
#include <stdio.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "nn/model.h"
#include "optim/optim.h"
#include "ps/ps.h"
#include "util/util.h"

static double bare_pingpong(comm_t *c, float *v, size_t n, int iters)
{
    MPI_Barrier(c->world);
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        if (c->rank == 1) {
            MPI_Send(v, (int)n, MPI_FLOAT, 0, 1, c->world);
            MPI_Recv(v, (int)n, MPI_FLOAT, 0, 2, c->world, MPI_STATUS_IGNORE);
        } else if (c->rank == 0) {
            MPI_Recv(v, (int)n, MPI_FLOAT, 1, 1, c->world, MPI_STATUS_IGNORE);
            MPI_Send(v, (int)n, MPI_FLOAT, 1, 2, c->world);
        }
    }
    return (now_s() - t0) / iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* memcpy bandwidth of one core on buffers far larger than the caches:
 * bytes read plus bytes written per second, the median of 11 copies. On a
 * shared virtual machine one 64 MB copy ran at 10-14 GB/s bound to a core
 * and, now and then, far faster: the best of a few rounds, as this took
 * before, followed those outliers (the same shard rate came out as 0.53
 * and 0.81 of it in one session); the median is the bandwidth a copy gets
 * most of the time. */
static double memcpy_bandwidth(void)
{
    enum { ROUNDS = 11 };
    const size_t n = (size_t)64 << 20;
    char *a = xmalloc(n), *b = xmalloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double bw[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_s();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, n);
        bw[r] = 2.0 * (double)n / (now_s() - t0);
    }
    free(a);
    free(b);
    return median(bw, ROUNDS);
}

/* The shard's update of the whole vector alone: median of iters */
static double update_alone(size_t n, float *w, int iters)
{
    float *g = xalloc_floats(n);
    memset(g, 0, n * sizeof(float));
    optim_cfg_t oc = { .kind = OPT_SGD };
    optim_t *o = optim_create(&oc, n);
    double *t = xmalloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < iters; i++) {
        double t0 = now_s();
        optim_step_into(o, w, w, g, 1.0f, 0, n, 0.0f);
        t[i] = now_s() - t0;
    }
    double m = median(t, iters);
    free(t);
    optim_free(o);
    free(g);
    return m;
}

/* The idle policies compared: none (pure polling, the reference), --wait
 * spin, the back-off before calibration (poll 50 us, the kernel's default
 * 50 us timer slack) and --wait backoff as comm_init calibrates it. */
enum { POL_POLL, POL_SPIN, POL_OLD, POL_NEW, NPOL };
static const char *pol_name[NPOL] = { "poll", "spin", "backoff-uncalibrated", "backoff" };

/* One policy, one delay: the median round trip of reps pings. Rank 1 waits
 * `delay` by polling the clock (so it is on time), pings, and polls for the
 * answer; rank 0 waits for the ping under the policy. */
static double ping_rtt(comm_t *c, int pol, double delay, int reps)
{
    double *rtt = xmalloc(sizeof(double) * (size_t)reps);
    char b = 0;
    MPI_Barrier(c->world);
    for (int i = 0; i < reps; i++) {
        if (c->rank == 1) {
            double t0 = now_s();
            while (now_s() - t0 < delay) {}
            double s0 = now_s();
            MPI_Send(&b, 1, MPI_CHAR, 0, 7, c->world);
            MPI_Recv(&b, 1, MPI_CHAR, 0, 8, c->world, MPI_STATUS_IGNORE);
            rtt[i] = now_s() - s0;
        } else if (c->rank == 0) {
            MPI_Request r;
            MPI_Irecv(&b, 1, MPI_CHAR, 1, 7, c->world, &r);
            comm_idle_t idle = comm_idle_start(c);
            if (pol == POL_SPIN) idle.spin = 1, idle.poll_s = 50e-6;
            if (pol == POL_OLD) idle.poll_s = 50e-6;
            for (;;) {
                int done = 0;
                MPI_Test(&r, &done, MPI_STATUS_IGNORE);
                if (done) break;
                if (pol != POL_POLL) comm_idle(&idle);
            }
            MPI_Send(&b, 1, MPI_CHAR, 1, 8, c->world);
        }
    }
    double m = c->rank == 1 ? median(rtt, reps) : 0;
    free(rtt);
    MPI_Bcast(&m, 1, MPI_DOUBLE, 1, c->world);
    return m;
}

/* The median round trip of reps ping-pongs of `bytes` between ranks 0 and 1
 * (blocking: each side polls in its receive), after 10 unmeasured ones. */
static double sized_rtt(comm_t *c, int bytes, int reps)
{
    double *rtt = xmalloc(sizeof(double) * (size_t)reps);
    char *b = xmalloc((size_t)bytes);
    memset(b, 0, (size_t)bytes);
    MPI_Barrier(c->world);
    for (int i = -10; i < reps; i++) {
        double t0 = now_s();
        if (c->rank == 0) {
            MPI_Send(b, bytes, MPI_CHAR, 1, 7, c->world);
            MPI_Recv(b, bytes, MPI_CHAR, 1, 8, c->world, MPI_STATUS_IGNORE);
        } else if (c->rank == 1) {
            MPI_Recv(b, bytes, MPI_CHAR, 0, 7, c->world, MPI_STATUS_IGNORE);
            MPI_Send(b, bytes, MPI_CHAR, 0, 8, c->world);
        }
        if (i >= 0) rtt[i] = now_s() - t0;
    }
    double m = median(rtt, reps);
    free(rtt);
    free(b);
    return m;
}

static void wakeup(comm_t *c, int reps)
{
    static const double delay[] = { 20e-6, 200e-6, 1e-3, 5e-3, 30e-3 };
    const int nd = (int)(sizeof delay / sizeof *delay);
    if (c->rank == 0)
        printf("ps_wakeup calibration: wake_s_us=%.1f poll_s_us=%.1f oversubscribed=%d (a short sleep's lateness with"
               " the 1 us timer slack comm_init sets; the poll phase it gives)\n", c->wake_s * 1e6, c->poll_s * 1e6,
               c->oversubscribed);
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 50000UL, 0UL, 0UL, 0UL);
    double old_wake = comm_wake_latency();
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    if (c->rank == 0) printf("ps_wakeup uncalibrated: wake_s_us=%.1f (the kernel's default 50 us timer slack)\n", old_wake * 1e6);
#endif
    for (int k = 0; k < nd; k++) {
        double base = ping_rtt(c, POL_POLL, delay[k], reps);
        for (int pol = POL_SPIN; pol < NPOL; pol++) {
#ifdef PR_SET_TIMERSLACK
            prctl(PR_SET_TIMERSLACK, pol == POL_OLD ? 50000UL : 1000UL, 0UL, 0UL, 0UL);
#endif
            double t = ping_rtt(c, pol, delay[k], reps);
            if (c->rank == 0)
                printf("ps_wakeup policy=%s delay_us=%.0f rtt_us=%.1f poll_rtt_us=%.1f wake_us=%.1f\n", pol_name[pol],
                       delay[k] * 1e6, t * 1e6, base * 1e6, (t - base) * 1e6);
        }
    }
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
}

int main(int argc, char **argv)
{
    comm_t c;
    comm_init(&c, &argc, &argv, 0);
    const char *mode = argc > 1 ? argv[1] : "roundtrip";
    int iters = argc > 2 ? atoi(argv[2]) : 300;
    if (c.size < 2) die("ps_bench needs at least 2 ranks");
    if (!strcmp(mode, "latency")) {
        long bytes = argc > 3 ? atol(argv[3]) : 1;
        if (iters < 1 || bytes < 1 || bytes > (1L << 30)) die("ps_bench latency: reps >= 1 and 1 <= bytes <= 2^30");
        double rtt = sized_rtt(&c, (int)bytes, argc > 2 ? iters : 300);
        /* "done:" as dsgd's lead prints it: scripts/dsgd-cluster then stops
         * a rank that MPICH over UCX's tcp leaves in MPI_Finalize */
        if (c.rank == 0) {
            printf("ps_latency bytes=%ld rtt_us=%.2f one_way_us=%.2f\ndone: ps_bench latency\n", bytes, rtt * 1e6, rtt / 2 * 1e6);
            fflush(stdout);
        }
        comm_finalize(&c);
        return 0;
    }
    if (!strcmp(mode, "wakeup")) {
        wakeup(&c, argc > 2 ? iters : 30);
        comm_finalize(&c);
        return 0;
    }
    model_t *m = model_create("mlp", 1, 28, 28, 10, 1);
    const size_t n = m->nparams;
    float *v = xalloc_floats(n);
    ps_config_t pc = { .servers = 1, .workers = c.size - 1, .gate = GATE_ASP, .timeout_s = 60,
                       .opt = { .kind = OPT_SGD } };
    int is_rt = !strcmp(mode, "roundtrip");
    if (is_rt) pc.gate = GATE_SSP;   /* staleness 0: the gated path */
    double bare = 1e30, membw = 0, upd = 0;
    if (!is_rt && c.rank == 0) membw = memcpy_bandwidth();
    if (is_rt && c.size == 2)
        for (int rep = 0; rep < 3; rep++) {
            double t = bare_pingpong(&c, v, n, iters);
            if (t < bare) bare = t;
        }
    if (is_rt && c.rank == 0) upd = update_alone(n, v, iters);
    const char *tr = argc > 3 ? argv[3] : "auto";
    ps_transport_t mode_tr;
    if (ps_transport_parse(tr, &mode_tr) != 0) die("ps_bench: transport '%s': choose auto, shm or messages", tr);
    pc.shm = ps_shm_open(&c, 1, c.size - 1, n, mode_tr);
    MPI_Barrier(c.world);
    double t0 = now_s();
    if (c.rank == 0) {
        ps_server_run(&c, &pc, 0, v, n);
    } else {
        ps_client_t *cl = ps_client_create(&c, &pc, c.rank - 1, n);
        for (int i = 0; i < iters; i++) {
            ps_push_start(cl, v, 0.0f, i + 1);
            ps_pull_start(cl, 0, v);
            ps_pull_wait(cl, v);
        }
        ps_finish(cl, c.rank == 1, v);
        ps_client_free(cl);
    }
    double t = now_s() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, c.world);
    /* the bandwidth before and after the run, averaged: it drifts with the machine's other load */
    if (!is_rt && c.rank == 0) membw = (membw + memcpy_bandwidth()) / 2;
    if (c.rank == 0) {
        if (is_rt)
            printf("ps_roundtrip transport=%s floats=%zu push_pull_us=%.1f bare_sendrecv_us=%.1f update_us=%.1f"
                   " ratio_bare=%.3f ratio=%.3f\n", tr, n, t / iters * 1e6, bare * 1e6, upd * 1e6, t / iters / bare,
                   t / iters / (bare + upd));
        else
        {
            double ups = (double)iters * (c.size - 1) / t, bps = ups * 2.0 * (double)n * sizeof(float);
            printf("ps_throughput transport=%s workers=%d floats=%zu updates_per_s=%.0f shard_bytes_per_s=%.3g"
                   " memcpy_bytes_per_s=%.3g fraction=%.3f\n", tr, c.size - 1, n, ups, bps, membw, bps / membw);
        }
    }
    ps_shm_close(pc.shm);
    free(v);
    model_free(m);
    comm_finalize(&c);
    return 0;
}
