/* Parameter-server costs, with the mlp vector (235146 floats):
 *
 *   roundtrip  one worker, one shard: push + gated pull of the whole vector,
 *              against a bare MPI_Send/MPI_Recv ping-pong of the same bytes
 *   throughput W workers pushing and pulling as fast as they can (ASP):
 *              updates the shard applies per second, and the bytes per
 *              second it moves (each update: a vector in, a vector out)
 *              against this machine's memory bandwidth (memcpy, one core)
 *
 * Usage: mpirun -np 2 build/bench/ps_bench roundtrip [iters]
 *        mpirun -np 1+W build/bench/ps_bench throughput [iters]   */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "nn/model.h"
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

/* memcpy bandwidth of one core on buffers far larger than the caches:
 * bytes read plus bytes written per second (best of a few rounds) */
static double memcpy_bandwidth(void)
{
    const size_t n = (size_t)64 << 20;
    char *a = xmalloc(n), *b = xmalloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, n);
        double bw = 2.0 * (double)n / (now_s() - t0);
        if (bw > best) best = bw;
    }
    free(a);
    free(b);
    return best;
}

int main(int argc, char **argv)
{
    comm_t c;
    comm_init(&c, &argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "roundtrip";
    int iters = argc > 2 ? atoi(argv[2]) : 300;
    if (c.size < 2) die("ps_bench needs at least 2 ranks");
    model_t *m = model_create("mlp", 1, 28, 28, 10, 1);
    const size_t n = m->nparams;
    float *v = xalloc_floats(n);
    ps_config_t pc = { .servers = 1, .workers = c.size - 1, .gate = GATE_ASP, .timeout_s = 60,
                       .opt = { .kind = OPT_SGD } };
    int is_rt = !strcmp(mode, "roundtrip");
    if (is_rt) pc.gate = GATE_SSP;   /* staleness 0: the gated path */
    double bare = 1e30, membw = 0;
    if (!is_rt && c.rank == 0) membw = memcpy_bandwidth();
    if (is_rt && c.size == 2)
        for (int rep = 0; rep < 3; rep++) {
            double t = bare_pingpong(&c, v, n, iters);
            if (t < bare) bare = t;
        }
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
    if (c.rank == 0) {
        if (is_rt)
            printf("ps_roundtrip floats=%zu push_pull_us=%.1f bare_sendrecv_us=%.1f ratio=%.3f\n", n,
                   t / iters * 1e6, bare * 1e6, t / iters / bare);
        else
        {
            double ups = (double)iters * (c.size - 1) / t, bps = ups * 2.0 * (double)n * sizeof(float);
            printf("ps_throughput workers=%d floats=%zu updates_per_s=%.0f shard_bytes_per_s=%.3g"
                   " memcpy_bytes_per_s=%.3g fraction=%.3f\n", c.size - 1, n, ups, bps, membw, bps / membw);
        }
    }
    free(v);
    model_free(m);
    comm_finalize(&c);
    return 0;
}
