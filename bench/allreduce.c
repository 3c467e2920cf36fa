/* Gradient all-reduce cost: dsgd's path against a bare MPI_Allreduce of the
 * same vector (the mlp gradient, 235146 floats), same ranks, same run.
 *
 *   bare      MPI_Allreduce(MPI_IN_PLACE, g, n, MPI_FLOAT, MPI_SUM)
 *   dsgd      comm_allreduce_sum: nonblocking all-reduce + timed test loop
 *   dsgd-bsp  what --sync bsp does: one all-reduce per layer span, queued
 *
 * Usage: mpirun -np 2 build/bench/allreduce [iterations] */
#include <stdio.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "nn/model.h"
#include "util/util.h"

int main(int argc, char **argv)
{
    comm_t c;
    comm_init(&c, &argc, &argv, 1);
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    model_t *m = model_create("mlp", 1, 28, 28, 10, 1);
    const size_t n = m->nparams;
    float *g = xalloc_floats(n);
    double best[3] = { 1e30, 1e30, 1e30 };
    for (int rep = 0; rep < 5; rep++) {
        for (int kind = 0; kind < 3; kind++) {
            MPI_Barrier(c.world);
            double t0 = now_s();
            for (int it = 0; it < iters; it++) {
                if (kind == 0) {
                    MPI_Allreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, c.world);
                } else if (kind == 1) {
                    comm_allreduce_sum(&c, g, n, "bench");
                } else {
                    for (int i = m->nlayers - 1; i >= 0; i--) {
                        const layer_t *l = &m->layers[i];
                        if (!l->w_len) continue;
                        MPI_Request req;
                        comm_iallreduce_sum(&c, g + l->w_off, l->w_len + l->b_len, &req);
                        comm_waitall(&c, 1, &req, "bench");
                    }
                }
            }
            double t = (now_s() - t0) / iters;
            MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, c.world);
            if (t < best[kind]) best[kind] = t;
        }
    }
    if (c.rank == 0) {
        printf("allreduce ranks=%d floats=%zu bare_us=%.1f dsgd_us=%.1f dsgd_bsp_us=%.1f dsgd_ratio=%.3f bsp_ratio=%.3f\n",
               c.size, n, best[0] * 1e6, best[1] * 1e6, best[2] * 1e6, best[1] / best[0], best[2] / best[0]);
    }
    free(g);
    model_free(m);
    comm_finalize(&c);
    return 0;
}
