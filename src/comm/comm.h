/* comm — the MPI context: world, rank, size, host name, checked MPI calls and
 * per-rank traffic counters. Everything above talks to MPI through here or
 * through MPI calls wrapped in MPI_CHECK. */
#ifndef DSGD_COMM_H
#define DSGD_COMM_H

#include <mpi.h>
#include <stdint.h>

typedef struct comm {
    MPI_Comm world;
    int rank, size;
    char host[MPI_MAX_PROCESSOR_NAME];
    /* traffic counters, reported in the done event */
    uint64_t bytes_sent, msgs_sent;
    double comm_s;
} comm_t;

/* MPI_Init (if needed), rank/size/host, errors returned instead of aborting. */
void comm_init(comm_t *c, int *argc, char ***argv);
void comm_finalize(comm_t *c);

/* Setup errors that every rank meets at the same point: all ranks call this
 * with their own verdict; if any failed, the first failing rank prints its
 * one-line message (naming the rank unless all failed alike) and every rank
 * finalizes and exits 1 — no abort banner, no hang. */
void comm_setup_check(comm_t *c, int failed, const char *msg);

/* Dies with rank, host, the call and MPI's error string when rc != MPI_SUCCESS. */
void comm_check(const comm_t *c, int rc, const char *call, const char *file, int line);
#define MPI_CHECK(c, call) comm_check((c), (call), #call, __FILE__, __LINE__)

#endif
