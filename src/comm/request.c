/* comm/request: one request's wait, bounded by a deadline, taking a
 * posted receive back, and a server's loop over its receives (comm.h). */
#include "comm.h"

#include "../util/sim.h"
#include "../util/util.h"

int comm_wait_bounded(comm_t *c, MPI_Request *req, double timeout_s, void (*tick)(void *), void *arg)
{
    if (sim_build()) return MPI_Wait(req, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : -1;
    comm_wait_t w = comm_wait_start(c, timeout_s);
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
        if (done) return 0;
        if (tick) tick(arg);
        if (comm_wait_over(&w)) return -1;
    }
}

int comm_withdraw(MPI_Request *req, double bound)
{
    if (*req == MPI_REQUEST_NULL) return 1;
    MPI_Cancel(req);
    const double t0 = now_s();
    do {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (done) return 1;
    } while (now_s() - t0 < bound);
    MPI_Request_free(req);
    return 0;
}

void comm_serve(comm_t *c, int n, MPI_Request *rq, const comm_serve_t *h, void *ctx)
{
    comm_idle_t idle = comm_idle_start(c);
    int *idx = xcalloc((size_t)n, sizeof(int));
    MPI_Status *sts = xcalloc((size_t)n, sizeof(MPI_Status));   /* MPICH's headers want an array here */
    while (!h->done(ctx)) {
        int nready = 0;
        if (sim_build()) {
            MPI_CHECK(c, MPI_Waitany(n, rq, &idx[0], &sts[0]));
            nready = idx[0] == MPI_UNDEFINED ? 0 : 1;
        } else {
            MPI_CHECK(c, MPI_Testsome(n, rq, &nready, idx, sts));
        }
        if (h->polled) h->polled(ctx);
        if (nready <= 0) {   /* none, or MPI_UNDEFINED: no receive posted */
            idle.spin = h->quiet(ctx) || c->wait_spin;
            comm_idle(&idle);
            continue;
        }
        comm_idle_reset(&idle);
        for (int i = 0; i < nready; i++) h->take(ctx, idx[i], &sts[i]);
    }
    free(idx);
    free(sts);
}
