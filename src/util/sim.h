/* util/sim — the simulated build, decided once.
 *
 * `make SIM=1` builds the same sources with SimGrid's smpicc (docs/simulation.md).
 * Four things differ there, and every place that cares asks sim_build():
 *
 *   - nobody dies: a simulated peer never crashes, freezes or is preempted,
 *     so a wait blocks where a real one polls against --timeout (and every
 *     failed poll would be a simulated event that costs the simulator more
 *     than the computation);
 *   - one process: the simulated ranks are threads of one process, which
 *     share signals, alarms and one load of the data (sim_shared_call);
 *   - one clock: time is simulated, and the ranks' clocks can be compared.
 *   - SimGrid's own limits (3.32): its nonblocking collectives, and the cost
 *     of a message completed by MPI_Test (comm.c, the shard's loop).
 *
 * This is the one file that tests the build's macro; code that would not
 * compile under the other MPI stays here too. */
#ifndef DSGD_SIM_H
#define DSGD_SIM_H

#include <mpi.h>
#include <stdlib.h>

#ifdef DSGD_SIM
#include <smpi/smpi.h>
#endif

/* 1 in the simulated build, 0 under a real MPI: a constant, so the branch
 * the build never takes costs nothing. */
static inline int sim_build(void)
{
#ifdef DSGD_SIM
    return 1;
#else
    return 0;
#endif
}

/* MPI_Waitall and MPI_Testall without statuses, for the simulated build's
 * blocking waits: there only these calls let the other simulated ranks
 * progress as one event. Neither compiles under MPICH (which declares the
 * statuses an array, and GCC then rejects MPI_STATUSES_IGNORE as a
 * zero-size region; comm_testall), so under a real MPI they are the same
 * one request at a time. */
static inline int sim_waitall(int n, MPI_Request *reqs)
{
#ifdef DSGD_SIM
    return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
#else
    for (int i = 0; i < n; i++) {
        int rc = MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
#endif
}

static inline int sim_testall(int n, MPI_Request *reqs, int *done)
{
#ifdef DSGD_SIM
    return MPI_Testall(n, reqs, done, MPI_STATUSES_IGNORE);
#else
    int all = 1;
    for (int i = 0; i < n; i++) {
        int f = 0, rc = MPI_Test(&reqs[i], &f, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return rc;
        all &= f;
    }
    *done = all;
    return MPI_SUCCESS;
#endif
}

/* The simulated cluster as scripts/dsgd-sim describes it, a JSON object
 * (hosts, link, topology, compute scale, slow hosts, eager limit), for the
 * config event; NULL under a real MPI. */
static inline const char *sim_platform(void)
{
    return sim_build() ? getenv("DSGD_SIM_PLATFORM") : NULL;
}

/* In the simulated build, fn(arg) runs once for the whole simulation per
 * (name, key), for the first rank that asks, and every rank gets that same
 * result (read only: no rank may free it); under a real MPI it is just
 * fn(arg). */
static inline void *sim_shared_call(const char *name, const char *key, void *(*fn)(void *), void *arg)
{
#ifdef DSGD_SIM
    return smpi_shared_known_call(name, key) ? smpi_shared_get_call(name, key) : smpi_shared_set_call(name, key, fn(arg));
#else
    (void)name; (void)key;
    return fn(arg);
#endif
}

#endif
