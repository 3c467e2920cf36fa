/* comm/request: one request's wait, bounded by a deadline, and taking a
 * posted receive back (comm.h). */
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
