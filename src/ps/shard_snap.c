/* A parameter-server shard's checkpoint pieces: each shard takes a copy
 * of its slice (parameters and optimizer state) at a snapshot's index and
 * sends it to shard 0, which assembles the whole vector with every
 * worker's clock and hands it to the run's on_snapshot. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "shard.h"

/* The slice's vectors in piece order: parameters, then optimizer state. */
static int slice_vectors(const shard_t *s, float **v)
{
    int n = 0;
    v[n++] = s->w;
    if (s->opt->velocity) v[n++] = s->opt->velocity;
    if (s->opt->accum) v[n++] = s->opt->accum;
    return n;
}

void snap_setup(shard_t *s)
{
    const ps_config_t *cfg = s->cfg;
    float *v[3];
    s->nopt = slice_vectors(s, v) - 1;
    s->target = -1;
    if (cfg->snap_every <= 0 && !cfg->snap_final) return;
    if (cfg->snap_every > 0) s->snap_index = s->sum_step / ((int64_t)cfg->snap_every * cfg->workers);
    s->snap_req = MPI_REQUEST_NULL;
    if (s->k != 0) {
        s->snap_out = xalloc_floats((size_t)(1 + s->nopt) * (s->n ? s->n : 1));
        return;
    }
    size_t most = 0;
    for (int k = 0; k < cfg->servers; k++) {
        size_t lo, n;
        ps_shard_range(s->nparams, cfg->servers, k, &lo, &n);
        if (n > most) most = n;
    }
    for (int i = 0; i < 1 + s->nopt; i++) s->asm_v[i] = xalloc_floats(s->nparams);
    s->have = xmalloc(sizeof(int64_t) * (size_t)cfg->servers);
    for (int k = 0; k < cfg->servers; k++) s->have[k] = -1;
    s->clk_t = xcalloc((size_t)cfg->workers, sizeof(int64_t));
    s->clk_step = xcalloc((size_t)cfg->workers, sizeof(int64_t));
    s->snap_in_bytes = sizeof(ps_hdr_t) + (size_t)(1 + s->nopt) * most * sizeof(float);
    s->snap_in = xmalloc(s->snap_in_bytes);
}

void snap_free(shard_t *s)
{
    free(s->snap_out);
    for (int i = 0; i < 3; i++) free(s->asm_v[i]);
    free(s->have); free(s->clk_t); free(s->clk_step); free(s->snap_in);
}

/* shard 0: piece c of shard k, its vectors back to back in data (NULL:
 * already in place); completes the snapshot when every shard's is in. */
static void snap_piece(shard_t *s, int k, int64_t c, const float *data)
{
    if (c < s->target) return;   /* an older snapshot some shard skipped: dropped */
    s->target = c;
    size_t lo, n;
    ps_shard_range(s->nparams, s->cfg->servers, k, &lo, &n);
    if (data)
        for (int i = 0; i < 1 + s->nopt; i++) memcpy(s->asm_v[i] + lo, data + (size_t)i * n, n * sizeof(float));
    s->have[k] = c;
    for (int j = 0; j < s->cfg->servers; j++)
        if (s->have[j] != c) return;
    ps_snapshot_t snap = { .params = s->asm_v[0], .clock = s->clk_t, .step = s->clk_step, .updates = s->clk_updates,
                           .final = c == SNAP_FINAL };
    int i = 1;
    if (s->opt->velocity) snap.velocity = s->asm_v[i++];
    if (s->opt->accum) snap.accum = s->asm_v[i++];
    if (s->cfg->on_snapshot && !s->no_snap && s->cfg->on_snapshot(s->cfg->snap_ctx, &snap) != 0) {
        s->no_snap = 1;
        s->stop_all = COMM_STOP_SAVE_FAILED;
    }
    for (int j = 0; j < s->cfg->servers; j++) s->have[j] = -1;
    s->final_done = snap.final;
}

/* Take snapshot c of this shard's slice: shard 0 keeps it (with its
 * clocks), the others send it to shard 0. */
void snap_take(shard_t *s, int64_t c)
{
    float *v[3];
    int nv = slice_vectors(s, v);
    if (s->k == 0) {
        if (c < s->target) return;
        for (int p = 0; p < s->cfg->workers; p++) { s->clk_t[p] = s->ws[p].applied; s->clk_step[p] = s->ws[p].step; }
        s->clk_updates = s->st.updates;
        for (int i = 0; i < nv; i++) memcpy(s->asm_v[i] + s->lo, v[i], s->n * sizeof(float));
        snap_piece(s, 0, c, NULL);
        return;
    }
    MPI_CHECK(s->c, MPI_Wait(&s->snap_req, MPI_STATUS_IGNORE));   /* shard 0 has the previous piece */
    for (int i = 0; i < nv; i++) memcpy(s->snap_out + (size_t)i * s->n, v[i], s->n * sizeof(float));
    memset(&s->snap_hdr, 0, sizeof s->snap_hdr);
    s->snap_hdr.clock = c;   /* the snapshot's index */
    MPI_Datatype t = ps_msg_type(&s->snap_hdr, s->snap_out, (size_t)nv * s->n);
    if (c == SNAP_FINAL) MPI_CHECK(s->c, MPI_Send(MPI_BOTTOM, 1, t, 0, PS_SNAP, s->c->world));
    else MPI_CHECK(s->c, MPI_Isend(MPI_BOTTOM, 1, t, 0, PS_SNAP, s->c->world, &s->snap_req));
    MPI_Type_free(&t);
}

/* shard 0: post the receive of the next piece from another shard */
void snap_post(shard_t *s)
{
    if (s->nrreq <= snap_slot(s)) return;
    MPI_CHECK(s->c, MPI_Irecv(s->snap_in, (int)s->snap_in_bytes, MPI_BYTE, MPI_ANY_SOURCE, PS_SNAP, s->c->world,
                              &s->rreq[snap_slot(s)]));
}

/* shard 0: a piece from another shard has come in; receive the next */
void snap_recv(shard_t *s, const MPI_Status *st)
{
    int bytes, from = st->MPI_SOURCE;
    MPI_Get_count(st, MPI_BYTE, &bytes);
    size_t lo, n;
    if (from <= 0 || from >= s->cfg->servers)
        die("server shard 0: rank %d sent a checkpoint piece, but it is not a shard; the ranks disagree on --servers", from);
    ps_shard_range(s->nparams, s->cfg->servers, from, &lo, &n);
    if ((size_t)bytes != sizeof(ps_hdr_t) + (size_t)(1 + s->nopt) * n * sizeof(float))
        die("server shard 0: shard %d's checkpoint piece has %d bytes, not the %zu of its slice; the shards disagree on the run",
            from, bytes, sizeof(ps_hdr_t) + (size_t)(1 + s->nopt) * n * sizeof(float));
    ps_hdr_t h;
    memcpy(&h, s->snap_in, sizeof h);
    snap_piece(s, from, h.clock, (const float *)(s->snap_in + sizeof h));
    snap_post(s);
}

/* After the last push: the final snapshot, assembled on shard 0. */
void snap_final(shard_t *s)
{
    if (!s->cfg->snap_final) return;
    snap_take(s, SNAP_FINAL);
    /* the other shards' final pieces (some may have come in already) */
    while (s->k == 0 && !s->final_done) {
        MPI_Status st;
        MPI_CHECK(s->c, MPI_Wait(&s->rreq[snap_slot(s)], &st));
        snap_recv(s, &st);
    }
}
