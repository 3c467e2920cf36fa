/* Sub-communicators, and the two collectives of model parallelism within a
 * replica: gathering every partition's slice of a layer's output, and
 * summing the partitions' input-gradient contributions. */
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "comm.h"

void comm_split(comm_t *parent, int color, int key, comm_t *out)
{
    memset(out, 0, sizeof *out);
    MPI_CHECK(parent, MPI_Comm_split(parent->world, color, key, &out->world));
    MPI_Comm_set_errhandler(out->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(out->world, &out->rank);
    MPI_Comm_size(out->world, &out->size);
    memcpy(out->host, parent->host, sizeof out->host);
    out->timeout_s = parent->timeout_s;
    out->wait_spin = parent->wait_spin;
    out->wake_s = parent->wake_s;
    out->oversubscribed = parent->oversubscribed;
    out->poll_s = parent->poll_s;
    out->parent = parent;
    /* timeout messages name world ranks, which the user started */
    out->world_ranks = xmalloc(sizeof(int) * (size_t)out->size);
    int me = parent->world_ranks ? parent->world_ranks[parent->rank] : parent->rank;
    MPI_CHECK(out, MPI_Allgather(&me, 1, MPI_INT, out->world_ranks, 1, MPI_INT, out->world));
}

void comm_split_free(comm_t *c)
{
    if (!c->world_ranks) return;
    if (!c->peer_lost) MPI_Comm_free(&c->world);
    free(c->world_ranks);
    c->world_ranks = NULL;
}

comm_mp_t *comm_mp_create(comm_t *c, size_t cap)
{
    comm_mp_t *g = xcalloc(1, sizeof *g);
    g->c = c;
    g->cap = cap;
    g->stage = xalloc_floats(cap ? cap : 1);
    g->counts = xcalloc((size_t)c->size, sizeof(int));
    g->displs = xcalloc((size_t)c->size, sizeof(int));
    g->hreq = xcalloc(2 * (size_t)c->size, sizeof(MPI_Request));
    return g;
}

void comm_mp_free(comm_mp_t *g)
{
    if (!g) return;
    free(g->stage); free(g->counts); free(g->displs); free(g->hreq);
    free(g);
}

/* The partitions' (B, n_q) blocks arrive one after another in stage; each
 * row of each block goes to its columns [pb[q], pb[q+1]) of full (B, R). */
void comm_mp_gather(void *ctx, float *full, const float *local, int B, int R, const int *pb)
{
    comm_mp_t *g = ctx;
    comm_t *c = g->c;
    const int M = c->size;
    if ((size_t)B * (size_t)R > g->cap) die("model-parallel gather of %d x %d floats exceeds its buffer", B, R);
    for (int q = 0, at = 0; q < M; q++) {
        g->counts[q] = B * (pb[q + 1] - pb[q]);
        g->displs[q] = at;
        at += g->counts[q];
    }
    double t0 = now_s();
    MPI_Request req = MPI_REQUEST_NULL;
    if (sim_build())
        MPI_CHECK(c, MPI_Allgatherv(local, g->counts[c->rank], MPI_FLOAT, g->stage, g->counts, g->displs, MPI_FLOAT, c->world));
    else
        MPI_CHECK(c, MPI_Iallgatherv(local, g->counts[c->rank], MPI_FLOAT, g->stage, g->counts, g->displs, MPI_FLOAT,
                                     c->world, &req));
    c->comm_s += now_s() - t0;
    comm_waitall(c, 1, &req, "the model-parallel activation gather");
    c->bytes_sent += (uint64_t)g->counts[c->rank] * sizeof(float) * (uint64_t)(M - 1);
    c->msgs_sent += (uint64_t)(M - 1);
    c->collectives++;
    for (int q = 0; q < M; q++) {
        const int n = pb[q + 1] - pb[q];
        const float *src = g->stage + g->displs[q];
        for (int b = 0; b < B; b++) memcpy(full + (long)b * R + pb[q], src + (long)b * n, sizeof(float) * (size_t)n);
    }
}

void comm_mp_sum(void *ctx, float *buf, long n)
{
    comm_mp_t *g = ctx;
    comm_allreduce_sum(g->c, buf, (size_t)n, "the model-parallel input-gradient sum");
}

void comm_mp_halo_start(void *ctx, int n, const int *peer, float *const *send, const long *nsend,
                        float *const *recv, const long *nrecv)
{
    comm_mp_t *g = ctx;
    comm_t *c = g->c;
    double t0 = now_s();
    g->nh = 0;
    for (int j = 0; j < n; j++)
        if (nrecv[j] > 0)
            MPI_CHECK(c, MPI_Irecv(recv[j], (int)nrecv[j], MPI_FLOAT, peer[j], TAG_HALO, c->world, &g->hreq[g->nh++]));
    for (int j = 0; j < n; j++) {
        if (nsend[j] <= 0) continue;
        MPI_CHECK(c, MPI_Isend(send[j], (int)nsend[j], MPI_FLOAT, peer[j], TAG_HALO, c->world, &g->hreq[g->nh++]));
        c->bytes_sent += (uint64_t)nsend[j] * sizeof(float);
        c->msgs_sent++;
        g->halo_bytes += (uint64_t)nsend[j] * sizeof(float);
    }
    c->comm_s += now_s() - t0;
}

void comm_mp_halo_wait(void *ctx)
{
    comm_mp_t *g = ctx;
    double t0 = now_s();
    comm_waitall(g->c, g->nh, g->hreq, "the model-parallel halo exchange");
    g->halo_wait_s += now_s() - t0;
    g->nh = 0;
}
