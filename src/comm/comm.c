#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

void comm_init(comm_t *c, int *argc, char ***argv)
{
    memset(c, 0, sizeof *c);
    int up = 0;
    MPI_Initialized(&up);
    if (!up && MPI_Init(argc, argv) != MPI_SUCCESS) die("MPI_Init failed; check the MPI installation (mpirun --version)");
    c->world = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    int len = 0;
    MPI_Get_processor_name(c->host, &len);
    util_set_rank_label(c->rank, c->size);
}

void comm_finalize(comm_t *c)
{
    (void)c;
    int down = 0;
    MPI_Finalized(&down);
    if (!down) MPI_Finalize();
}

void comm_check(const comm_t *c, int rc, const char *call, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    die("%s failed at %s:%d: %s (rank %d on %s)", call, file, line, msg, c->rank, c->host);
}

void comm_setup_check(comm_t *c, int failed, const char *msg)
{
    int first = failed ? c->rank : c->size, nfail = failed ? 1 : 0;
    if (c->size > 1) {
        MPI_CHECK(c, MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, c->world));
        MPI_CHECK(c, MPI_Allreduce(MPI_IN_PLACE, &nfail, 1, MPI_INT, MPI_SUM, c->world));
    }
    if (first == c->size) return;
    if (c->rank == first) {
        if (nfail == c->size) fprintf(stderr, "dsgd: error: %s\n", msg);
        else fprintf(stderr, "dsgd: error: rank %d (%s): %s\n", c->rank, c->host, msg);
        fflush(stderr);
    }
    MPI_Finalize();
    exit(1);
}
