/* comm/mpi_defaults — the MPI settings dsgd makes before MPI starts. */
#ifndef DSGD_MPI_DEFAULTS_H
#define DSGD_MPI_DEFAULTS_H

#include "comm.h"

/* Before MPI_Init (comm_init): the all-reduce bsp's gradients go through,
 * said in c->allreduce, and the transports' settings, as environment
 * variables the MPI reads when it starts; a user's own setting of any of
 * them stands. posted_receives: as comm_init's. */
void comm_mpi_defaults(comm_t *c, int posted_receives);

#endif
