/* One parameter-server shard: the receive loop, the server-side optimizer,
 * per-worker clocks, Downpour's warm start, staleness bookkeeping and
 * eviction of silent workers. The consistency gate the paradigm chose
 * (ASP / SSP / DSSP) is in gate.c. */
#include <stdlib.h>
#include <string.h>

#include "../util/sim.h"
#include "../util/util.h"
#include "gate.h"
#include "ps.h"

typedef struct worker_state {
    int64_t t;               /* pushes received: the worker's clock */
    int64_t applied;         /* pushes applied (t, less a push held for its turn) */
    unsigned char *held;     /* bsp-ps / ssp 0: the receive buffer (header + n floats) of a push that
                              * arrived before its turn, handed over without a copy; kept as the
                              * spare the next held push swaps with; or NULL */
    ps_hdr_t held_h;         /* its header */
    float *held_g;           /* the held gradient, at its offset in the slice: in held or in slot */
    int has_held;
    float *slot;             /* its slot in the host's shared window (shm.h), or NULL */
    int64_t read;            /* replies it has read out of the pool (from its last message) */
    int64_t shm_sent;        /* replies sent to it through the pool */
    int64_t served;          /* its clock when its last pull was answered */
    int64_t step;            /* its step count (warm start) */
    double last_seen;
    int parked;              /* a pull is waiting for the gate */
    int queued;              /* its push's header is in and its gradient is queued or coming in */
    ps_hdr_t qh;             /* that header */
    int alive, done;
    int returned;            /* evicted, then said it is done: it gets the final message */
    size_t off, cnt;         /* its part of this shard's slice (from its messages) */
} worker_state_t;

typedef struct shard {
    comm_t *c;
    const ps_config_t *cfg;
    int k;
    size_t lo, n;
    /* The slice's parameters. Replies are sent from it without a copy, so
     * while a reply is in flight from a buffer, that buffer is not written:
     * an update then goes out of place into a buffer no reply is reading,
     * which becomes the current one. At most one buffer per reply slot plus
     * one are ever needed (a reply to a dead worker never completes, so its
 * buffer is simply never free again). */
    float *w;                /* (n) the current parameters: one of wb */
    float **wb;              /* (npool + 2·workers + 1) buffers: the shared pool's (shm.h),
                              * then private ones allocated when first needed */
    int nwb, npool;
    optim_t *opt;            /* state of the slice */
    worker_state_t *ws;      /* (workers) */
    ps_gate_t gate;
    /* Receives. Every worker has a small receive posted at all times for
     * its next message (a header: a push's, a pull, a stop, ...), so that
     * pulls are answered while pushes come in. A push's gradient follows its
     * header as a message of its own, and the shard takes these one at a
     * time in the order the headers came (first come, first served): over
     * TCP a message above the eager limit moves only once its receive is
     * posted, so the one being received has the link to itself while the
     * replies go out the other way. A shard that probed for any message and
     * received it whole took pushes ahead of the pulls that followed them
     * and used its link one direction at a time; one that posted every
     * push's receive at once shared its link among all of them, so they
     * finished together and the replies then went out together, again one
     * direction at a time. A worker's next header is received only once its
     * gradient is in: its messages are handled in the order it sent them.
     * rreq: (workers) the headers' receives into hin; then the gradient's,
     * into in; then shard 0's receive of the other shards' checkpoint
     * pieces, when there are any. */
    ps_hdr_t *hin;           /* (workers) */
    MPI_Request *rreq;       /* (workers + 2) */
    int nrreq;               /* workers + 1, or + 2 with the pieces' receive */
    int *fifo;               /* (workers) workers whose gradient waits to be received, in order */
    int fifo_head, fifo_len;
    int inflight;            /* the worker whose gradient is being received into in, or −1 */
    unsigned char *in;       /* receive buffer of gradients: header + n floats */
    /* Replies go out with MPI_Isend, one slot per worker and kind (pull or
     * evaluation): a blocking send to a worker that died after asking would
     * never return (large messages wait for the receiver). */
    ps_hdr_t *out;           /* (2·workers) reply headers */
    ps_hdr_t *ev_hdr;        /* (workers) eviction notices */
    MPI_Request *ev_req;     /* (workers) */
    MPI_Request *out_req;    /* (2·workers) */
    const float **out_from;  /* (2·workers) the buffer each reply is sent from */
    int64_t *out_seq;        /* (2·workers) > 0: the reply went through the pool, and its buffer
                              * is in use until the worker has read this many replies */
    ps_stats_t st;
    int64_t version;         /* updates applied to the slice (replies carry it) */
    double last_keepalive;
    double last_poll;        /* when this shard last looked for messages */
    int stop_all;            /* COMM_STOP_*: every worker is asked to stop: say so in every reply */
    int no_snap;             /* no checkpoint is written from now on: a worker's loss diverged, or a save failed */
    /* Staleness 0 (bsp-ps, ssp 0): a round's pushes are applied in worker
     * order, whatever order they arrive in, so runs repeat bit for bit. */
    int ordered;
    int64_t round;           /* the round being applied: pushes made at this clock */
    int next;                /* the worker whose push of the round comes next */
    /* Snapshots for checkpoints (ps_snapshot_t). */
    size_t nparams;
    int nopt;                /* optimizer vectors of the slice: 0, 1 or 2 */
    int64_t sum_step;        /* Σ over workers of their step counts */
    int64_t snap_index;      /* the last multiple of snap_every × workers crossed */
    float *snap_out;         /* ((1 + nopt) · n) a piece in flight to shard 0 */
    ps_hdr_t snap_hdr;       /* its header (the index in clock) */
    MPI_Request snap_req;
    /* shard 0: the assembly */
    float *asm_v[3];         /* (nparams) parameters, velocity, accumulator */
    int64_t *have;           /* (servers) index of the piece held from each shard; −1: none */
    int64_t target;          /* the index being assembled */
    int64_t *clk_t, *clk_step;   /* (workers) the clocks at shard 0's own piece */
    int64_t clk_updates;
    int final_done;          /* the final snapshot is complete */
    unsigned char *snap_in;  /* receive buffer: header + the largest piece */
    size_t snap_in_bytes;
} shard_t;

#define SNAP_FINAL INT64_MAX

/* The slice's vectors in piece order: parameters, then optimizer state. */
static int slice_vectors(const shard_t *s, float **v)
{
    int n = 0;
    v[n++] = s->w;
    if (s->opt->velocity) v[n++] = s->opt->velocity;
    if (s->opt->accum) v[n++] = s->opt->accum;
    return n;
}

static void snap_setup(shard_t *s)
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

static void snap_free(shard_t *s)
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
static void snap_take(shard_t *s, int64_t c)
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
static void snap_post(shard_t *s)
{
    if (s->nrreq <= s->cfg->workers + 1) return;
    MPI_CHECK(s->c, MPI_Irecv(s->snap_in, (int)s->snap_in_bytes, MPI_BYTE, MPI_ANY_SOURCE, PS_SNAP, s->c->world,
                              &s->rreq[s->cfg->workers + 1]));
}

/* shard 0: a piece from another shard has come in; receive the next */
static void snap_recv(shard_t *s, const MPI_Status *st)
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
static void snap_final(shard_t *s)
{
    if (!s->cfg->snap_final) return;
    snap_take(s, SNAP_FINAL);
    /* the other shards' final pieces (some may have come in already) */
    while (s->k == 0 && !s->final_done) {
        MPI_Status st;
        MPI_CHECK(s->c, MPI_Wait(&s->rreq[s->cfg->workers + 1], &st));
        snap_recv(s, &st);
    }
}

static size_t msg_bytes(size_t n) { return sizeof(ps_hdr_t) + n * sizeof(float); }
static int worker_rank(const shard_t *s, int p) { return s->cfg->servers + p; }

void ps_shard_range(size_t nparams, int servers, int k, size_t *lo, size_t *n)
{
    *lo = nparams * (size_t)k / (size_t)servers;
    *n = nparams * (size_t)(k + 1) / (size_t)servers - *lo;
}

MPI_Datatype ps_msg_type(const ps_hdr_t *h, const float *data, size_t cnt)
{
    int len[2] = { (int)sizeof *h, (int)(cnt * sizeof(float)) };
    MPI_Aint at[2];
    MPI_Datatype types[2] = { MPI_BYTE, MPI_BYTE }, t;
    MPI_Get_address(h, &at[0]);
    MPI_Get_address(data, &at[1]);
    if (MPI_Type_create_struct(2, len, at, types, &t) != MPI_SUCCESS || MPI_Type_commit(&t) != MPI_SUCCESS)
        die("cannot build the message datatype of %zu floats", cnt);
    return t;
}

/* Is a reply still reading buffer b? Completes the replies that are done. */
static int buffer_busy(shard_t *s, const float *b)
{
    int busy = 0;
    for (int j = 0; j < 2 * s->cfg->workers; j++) {
        if (s->out_from[j] != b) continue;
        if (s->out_seq[j]) {   /* through the pool: until the worker says it has read it */
            if (s->ws[j / 2].read >= s->out_seq[j]) { s->out_from[j] = NULL; s->out_seq[j] = 0; }
            else busy = 1;
            continue;
        }
        if (s->out_req[j] == MPI_REQUEST_NULL) continue;
        if (sim_build()) {
            /* SimGrid 3.32 keeps a message completed by MPI_Test in its
             * sender's list of activities for good and scans that whole list at
             * every later completion, so a shard that tests its replies slows
             * the simulation down quadratically (95% of the time in that scan;
             * 3.34 fixed it). The simulated shard never tests a reply: a buffer
             * is busy until send_params waits for the reply of its slot, which
             * keeps at most 2·workers + 1 buffers. */
            busy = 1;
            continue;
        }
        int done = 0;
        MPI_CHECK(s->c, MPI_Test(&s->out_req[j], &done, MPI_STATUS_IGNORE));
        if (done) s->out_from[j] = NULL;
        else busy = 1;
    }
    return busy;
}

/* b's index in the shared pool, or -1 (a private buffer) */
static int pool_index(const shard_t *s, const float *b)
{
    for (int i = 0; i < s->npool; i++)
        if (s->wb[i] == b) return i;
    return -1;
}

/* Where the next update of the slice goes: the current buffer when no reply
 * is reading it (the usual case: a worker asks again only after receiving),
 * else a free one. */
static float *update_target(shard_t *s, int whole)
{
    /* Through the pool, an update of the whole slice goes to the next free
     * pool buffer rather than in place: writing lines that a worker on
     * another core has just read costs an invalidation each, and in the
     * buffer read longest ago they have left that core's cache (measured:
     * the shard's update of the mlp slice 150 -> 80 us). It costs no copy. */
    if (whole && s->npool > 1) {
        int cur = pool_index(s, s->w);
        if (cur < 0) cur = s->npool;
        for (int d = 1; d < s->npool; d++) {
            float *b = s->wb[(cur + d) % s->npool];
            if (!buffer_busy(s, b)) return b;
        }
    }
    if (!buffer_busy(s, s->w)) return s->w;
    for (int i = 0; i < s->nwb; i++)
        if (s->wb[i] != s->w && !buffer_busy(s, s->wb[i])) return s->wb[i];
    if (s->nwb == s->npool + 2 * s->cfg->workers + 1) die("server shard %d: no free parameter buffer (a bug)", s->k);
    s->wb[s->nwb] = xalloc_floats(s->n ? s->n : 1);
    return s->wb[s->nwb++];
}

/* Minimum clock over live workers still training: those evicted, and those
 * that finished (a bounded run stops workers at different clocks), hold no
 * one back. */
static int64_t min_clock(const shard_t *s, int *slow)
{
    int64_t m = INT64_MAX;
    *slow = -1;
    for (int p = 0; p < s->cfg->workers; p++)
        if (s->ws[p].alive && !s->ws[p].done && s->ws[p].t < m) { m = s->ws[p].t; *slow = p; }
    return m == INT64_MAX ? 0 : m;
}

static int fastest(const shard_t *s)
{
    int f = -1;
    for (int p = 0; p < s->cfg->workers; p++)
        if (s->ws[p].alive && !s->ws[p].done && (f < 0 || s->ws[p].t > s->ws[f].t)) f = p;
    return f;
}

static void send_params(shard_t *s, int p, int tag, int64_t stamp)
{
    int slot = 2 * p + (tag == PS_EVAL_PARAMS);
    /* the worker has received the previous reply of this kind before it could ask again */
    MPI_CHECK(s->c, MPI_Wait(&s->out_req[slot], MPI_STATUS_IGNORE));
    ps_hdr_t *h = &s->out[slot];
    memset(h, 0, sizeof *h);
    h->stamp = stamp;
    h->stop = s->stop_all;
    h->stats = s->st;
    worker_state_t *w = &s->ws[p];
    if (tag == PS_PARAMS) w->served = w->t;
    h->applied = w->applied;
    h->version = s->version;
    h->buf = tag != PS_FINAL && w->slot ? pool_index(s, s->w) : -1;
    s->out_from[slot] = s->w;
    s->out_seq[slot] = 0;
    if (h->buf >= 0) {   /* the parameters stay in the pool: the header names the buffer */
        ps_shm_sync(s->cfg->shm);
        MPI_CHECK(s->c, MPI_Isend(h, (int)sizeof *h, MPI_BYTE, worker_rank(s, p), tag, s->c->world, &s->out_req[slot]));
        s->out_seq[slot] = ++w->shm_sent;
        s->c->bytes_sent += sizeof *h;
    } else {
        MPI_Datatype t = ps_msg_type(h, s->w + w->off, w->cnt);
        MPI_CHECK(s->c, MPI_Isend(MPI_BOTTOM, 1, t, worker_rank(s, p), tag, s->c->world, &s->out_req[slot]));
        MPI_Type_free(&t);
        s->c->bytes_sent += msg_bytes(w->cnt);
    }
    s->c->msgs_sent++;
}

/* May worker p's pull be answered now? Downpour's warm start (--warmup-steps
 * K) holds every other replica's first pull until worker 0 has trained K
 * steps alone; then the gate decides. */
static int gate_open(shard_t *s, int p)
{
    if (s->cfg->warmup_steps > 0 && p >= s->cfg->replica_size && s->ws[0].alive && !s->ws[0].done &&
        s->ws[0].step < s->cfg->warmup_steps)
        return 0;
    int slow;
    return ps_gate_open(&s->gate, p, s->ws[p].t, min_clock(s, &slow));
}

static void apply_in_order(shard_t *s);

static void answer_parked(shard_t *s)
{
    if (s->ordered) apply_in_order(s);
    int answered = 0;
    for (int p = 0; p < s->cfg->workers; p++) {
        worker_state_t *w = &s->ws[p];
        if (!w->parked || !gate_open(s, p)) continue;
        int slow;
        w->parked = 0;
        ps_gate_answered(&s->gate, p);
        w->last_seen = now_s();   /* its silence starts now, not when it asked */
        send_params(s, p, PS_PARAMS, min_clock(s, &slow));
        answered = 1;
    }
    if (s->ordered && answered) apply_in_order(s);   /* a round that waited for those answers */
}

/* A push about to be applied: st updates were applied to the slice since
 * the reply it was computed on, and it is gap clocks behind. */
static void record_staleness(shard_t *s, int64_t st, int64_t gap)
{
    if (st < 0) st = 0;   /* a version cannot exceed the shard's; guard anyway */
    if (gap < 0) gap = 0;   /* nor a stamp the clock */
    if (s->st.updates == 0 || st < s->st.st_min) s->st.st_min = st;
    if (st > s->st.st_max) s->st.st_max = st;
    s->st.st_sum += (double)st;
    s->st.hist[st < PS_HIST - 1 ? st : PS_HIST - 1]++;
    if (s->st.updates == 0 || gap < s->st.gap_min) s->st.gap_min = gap;
    if (gap > s->st.gap_max) s->st.gap_max = gap;
    s->st.gap_sum += (double)gap;
    s->st.updates++;
}

/* g: the pushed part at its offset in the slice (g[w->off .. w->off + w->cnt)) */
static void on_push(shard_t *s, int p, const ps_hdr_t *h, const float *g)
{
    worker_state_t *w = &s->ws[p];
    record_staleness(s, s->version - h->version, h->clock - h->stamp);
    float lr = s->cfg->fixed_lr > 0 ? s->cfg->fixed_lr : h->lr;
    if (w->cnt) {
        float *to = update_target(s, w->cnt == s->n);
        int b = pool_index(s, to);
        /* a pool buffer's progress word changes before the buffer does
         * (shm.h); only an update of the whole slice is one a worker may
         * copy from as it proceeds */
        uint64_t tag = b >= 0 && w->cnt == s->n ? ps_shm_tag(p, h->clock) : 0;
        if (b >= 0) ps_shm_progress_set(s->cfg->shm, s->k, b, 0, 0);
        if (to != s->w) {   /* out of place: the rest of the slice is carried over */
            memcpy(to, s->w, w->off * sizeof(float));
            memcpy(to + w->off + w->cnt, s->w + w->off + w->cnt, (s->n - w->off - w->cnt) * sizeof(float));
        }
        if (tag) {
            const size_t ch = ps_shm_chunk(s->n);
            for (size_t a = 0, i = 1; a < s->n; a += ch, i++) {
                optim_step_into_stream(s->opt, to, s->w, g, 1.0f, a, s->n - a < ch ? s->n - a : ch, lr);
                ps_shm_progress_set(s->cfg->shm, s->k, b, tag, i);
            }
        } else if (b >= 0) {
            optim_step_into_stream(s->opt, to, s->w, g, 1.0f, w->off, w->cnt, lr);
        } else {
            optim_step_into(s->opt, to, s->w, g, 1.0f, w->off, w->cnt, lr);
        }
        s->w = to;
        s->version++;
    }
    w->applied++;
    s->sum_step += h->step - w->step;
    w->step = h->step;
    if (s->cfg->snap_every > 0) {
        int64_t c = s->sum_step / ((int64_t)s->cfg->snap_every * s->cfg->workers);
        if (c > s->snap_index) { s->snap_index = c; snap_take(s, c); }
    }
    int slow, fast = fastest(s);
    int64_t m = min_clock(s, &slow);
    ps_gate_pushed(&s->gate, p, now_s(), w->t, m, slow, fast);
}

/* Staleness 0: is a worker that pushed in round `round` still to be
 * answered its pull of that round? Its pull must see exactly the rounds
 * before its next push, so the next round waits for it: a worker
 * descheduled between its push and its pull (ranks sharing cores) would
 * otherwise get parameters with some of the next round's pushes in them,
 * and the run would no longer repeat bit for bit. */
static int round_owed(const shard_t *s)
{
    for (int p = 0; p < s->cfg->workers; p++) {
        const worker_state_t *w = &s->ws[p];
        if (w->alive && !w->done && w->t > s->round && w->served <= s->round) return 1;
    }
    return 0;
}

/* Staleness 0: apply the held pushes whose turn has come. Round r holds
 * the pushes made at clock r; within it worker 0 goes first. A worker
 * that is evicted or done, or whose push of the round was applied before
 * (a resumed run), is passed over; one whose push has not arrived stops
 * the walk until it does (the gate holds every pull until then anyway).
 * A round starts once every pull of the one before it is answered. */
static void apply_in_order(shard_t *s)
{
    const int W = s->cfg->workers;
    for (;;) {
        int held = 0;
        for (int p = 0; p < W; p++) held |= s->ws[p].has_held;
        if (!held) return;   /* nothing to apply: the walk resumes at the next push */
        if (s->next == W) {
            if (round_owed(s)) return;   /* resumes when that pull is answered */
            s->next = 0;
            s->round++;
        }
        worker_state_t *w = &s->ws[s->next];
        if (w->has_held && w->held_h.clock <= s->round) {
            w->has_held = 0;
            w->off = (size_t)w->held_h.off;
            w->cnt = (size_t)w->held_h.cnt;
            on_push(s, s->next, &w->held_h, w->held_g);
        } else if (!w->has_held && w->alive && !w->done && w->t <= s->round) {
            return;   /* its push of the round is still to come */
        }
        s->next++;
    }
}

/* A push at staleness 0: held until its turn (worker order within the
 * round). A gradient in the worker's slot stays there (the worker does not
 * write the slot again before the shard says it applied it); one in the
 * receive buffer: the worker takes that buffer as it is, and the shard
 * receives on into the worker's spare. */
static void hold_push(shard_t *s, int p, const ps_hdr_t *h, const float *g)
{
    worker_state_t *w = &s->ws[p];
    if (w->has_held) die("server shard %d: worker %d pushed twice in one round at staleness 0 (a bug)", s->k, p);
    if (g != (const float *)(s->in + sizeof(ps_hdr_t))) {   /* in its slot, or an empty push */
        w->held_g = (float *)g;
    } else {
        unsigned char *spare = w->held ? w->held : xmalloc(msg_bytes(s->n));
        w->held = s->in;
        s->in = spare;
        w->held_g = (float *)(w->held + sizeof(ps_hdr_t));
    }
    w->held_h = *h;
    w->has_held = 1;
}

static void drop_gradient(shard_t *s, int p);

static void evict(shard_t *s, int p, double silent)
{
    s->ws[p].alive = 0;
    s->ws[p].parked = 0;
    drop_gradient(s, p);
    if (s->st.evicted < 8) s->st.evicted_list[s->st.evicted] = p;
    s->st.evicted++;
    s->c->peer_lost = 1;
    if (s->k == 0)
        fprintf(stderr, "dsgd: server: evicting worker %d (rank %d): silent for %.1f s (--timeout %g)\n", p,
                worker_rank(s, p), silent, s->cfg->timeout_s);
    /* the notice: a dead worker never reads it; a frozen one does when it wakes */
    ps_hdr_t *h = &s->ev_hdr[p];
    memset(h, 0, sizeof *h);
    h->stamp = s->ws[p].step;
    h->silent_s = (float)silent;
    if (MPI_Isend(h, (int)sizeof *h, MPI_BYTE, worker_rank(s, p), PS_EVICTED, s->c->world, &s->ev_req[p]) != MPI_SUCCESS)
        s->ev_req[p] = MPI_REQUEST_NULL;
    s->c->msgs_sent++;
}

/* An evicted worker that says it is done was frozen, not dead: it ends
 * with the others, and once every evicted worker has, no peer is lost. */
static void on_returned(shard_t *s, int p)
{
    worker_state_t *w = &s->ws[p];
    if (w->returned) return;
    w->returned = 1;
    s->st.returned++;
    s->c->peer_lost = s->st.evicted > s->st.returned;
}

/* Post worker p's next header receive. */
static void post_header(shard_t *s, int p)
{
    MPI_CHECK(s->c, MPI_Irecv(&s->hin[p], (int)sizeof(ps_hdr_t), MPI_BYTE, worker_rank(s, p), MPI_ANY_TAG,
                              s->c->world, &s->rreq[p]));
}

/* Start receiving the next queued gradient, if none is coming in. It goes
 * straight to its offset in the slice's vector. */
static void next_gradient(shard_t *s, double now)
{
    const int W = s->cfg->workers;
    while (s->inflight < 0 && s->fifo_len > 0) {
        int p = s->fifo[s->fifo_head];
        s->fifo_head = (s->fifo_head + 1) % W;
        s->fifo_len--;
        worker_state_t *w = &s->ws[p];
        float *g = (float *)(s->in + sizeof(ps_hdr_t)) + w->qh.off;
        MPI_CHECK(s->c, MPI_Irecv(g, (int)w->qh.cnt, MPI_FLOAT, worker_rank(s, p), PS_PUSH_DATA, s->c->world,
                                  &s->rreq[W]));
        s->inflight = p;
        w->last_seen = now;   /* its silence counts from now, not from its wait in the queue */
    }
}

/* Worker p is evicted: a gradient of its still to come is left to MPI (one
 * of a dead worker never arrives; one of a frozen worker lands in a buffer
 * no one reads), and the queue moves on. */
static void drop_gradient(shard_t *s, int p)
{
    worker_state_t *w = &s->ws[p];
    if (!w->queued) return;
    w->queued = 0;
    const int W = s->cfg->workers;
    if (s->inflight == p) {
        MPI_Request_free(&s->rreq[W]);
        s->in = xmalloc(msg_bytes(s->n));   /* the old buffer stays with the abandoned receive */
        s->inflight = -1;
    } else {
        for (int i = 0; i < s->fifo_len; i++) {
            int j = (s->fifo_head + i) % W;
            if (s->fifo[j] != p) continue;
            for (int m = i; m + 1 < s->fifo_len; m++) s->fifo[(s->fifo_head + m) % W] = s->fifo[(s->fifo_head + m + 1) % W];
            s->fifo_len--;
            break;
        }
        float *sink = xalloc_floats((size_t)w->qh.cnt ? (size_t)w->qh.cnt : 1);   /* MPI's until the end */
        MPI_Request r;
        MPI_CHECK(s->c, MPI_Irecv(sink, (int)w->qh.cnt, MPI_FLOAT, worker_rank(s, p), PS_PUSH_DATA, s->c->world, &r));
        MPI_Request_free(&r);
    }
    post_header(s, p);   /* its later messages are still read: a frozen worker may say it is done */
    next_gradient(s, now_s());
}

/* At the end: take back the receives still posted (a header's is cancelled;
 * one that MPI cannot cancel keeps its buffer). */
static void cancel_receives(shard_t *s)
{
    for (int j = 0; j < s->nrreq; j++) {
        if (s->rreq[j] == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&s->rreq[j]);
        int done = 0;
        double t0 = now_s();
        while (!done && now_s() - t0 < 0.5)
            if (MPI_Test(&s->rreq[j], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (done) continue;
        MPI_Request_free(&s->rreq[j]);
        if (j < s->cfg->workers) s->hin = NULL;
        else if (j == s->cfg->workers) s->in = NULL;
        else s->snap_in = NULL;
    }
}

/* A reply still on its way: it moves only while this shard is in an MPI
 * call (the shared-memory transport hands a large message over in
 * fragments), so the shard must not sleep then. Completes the finished ones. */
static int replies_in_flight(shard_t *s)
{
    int any = 0;
    for (int j = 0; j < 2 * s->cfg->workers; j++) {
        if (s->out_req[j] == MPI_REQUEST_NULL) continue;
        int done = 0;
        if (MPI_Test(&s->out_req[j], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) any = 1;
    }
    return any;
}

static int all_finished(const shard_t *s)
{
    for (int p = 0; p < s->cfg->workers; p++)
        if (s->ws[p].alive && !s->ws[p].done) return 0;
    return 1;
}

/* A push's gradient g (at its offset in the slice) is in. */
static void on_gradient(shard_t *s, int p, const ps_hdr_t *h, float *g)
{
    worker_state_t *w = &s->ws[p];
    w->t++;
    if (s->ordered) hold_push(s, p, h, g);
    else on_push(s, p, h, g);
    answer_parked(s);
}

/* Worker p's header has come into hin[p]. Returns 1 when p's next header
 * may be received, 0 when its gradient is to come first. */
static int on_message(shard_t *s, int p, int tag, int bytes, double now)
{
    const ps_config_t *cfg = s->cfg;
    if (bytes < (int)sizeof(ps_hdr_t)) return 1;   /* not the protocol's (e.g. a roll call): ignore */
    ps_hdr_t h = s->hin[p];
    worker_state_t *w = &s->ws[p];
    if (!w->alive) {                             /* an evicted worker stays out */
        if (tag == PS_DONE) on_returned(s, p);
        if (tag == PS_PUSH && h.buf < 0 && h.cnt > 0 && h.cnt <= (int64_t)s->n) {   /* its gradient: received, dropped */
            w->qh = h;
            w->queued = 1;
            drop_gradient(s, p);
            return 0;
        }
        return 1;
    }
    w->last_seen = now;
    if (h.read > w->read) w->read = h.read;
    if (h.off < 0 || h.cnt < 0 || (size_t)(h.off + h.cnt) > s->n)
        die("server shard %d: worker %d sent keys [%lld, %lld) outside its slice of %zu; the ranks disagree on the model",
            s->k, p, (long long)h.off, (long long)(h.off + h.cnt), s->n);
    w->off = (size_t)h.off;
    w->cnt = (size_t)h.cnt;
    switch (tag) {
    case PS_PUSH:
        if (h.buf >= 0) {   /* in the worker's slot, at its offset */
            if (!w->slot)
                die("server shard %d: worker %d pushed through a shared slot it does not have here; the ranks disagree on --ps-transport", s->k, p);
            ps_shm_sync(cfg->shm);
            on_gradient(s, p, &h, w->slot);
        } else if (h.cnt > 0) {   /* in a message of its own: queued */
            w->qh = h;
            w->queued = 1;
            s->fifo[(s->fifo_head + s->fifo_len++) % cfg->workers] = p;
            next_gradient(s, now);
            return 0;
        } else {   /* an empty push: nothing to receive (the receive buffer may be in use) */
            on_gradient(s, p, &h, w->slot);
        }
        break;
    case PS_PULL:
        w->parked = 1;
        answer_parked(s);
        break;
    case PS_EVAL_PULL: {
        int slow;
        send_params(s, p, PS_EVAL_PARAMS, min_clock(s, &slow));
        break;
    }
    case PS_STOP:
        if (h.stop == COMM_STOP_DIVERGED) s->no_snap = 1;
        else if (h.stop > s->stop_all) s->stop_all = h.stop;
        else if (!s->stop_all) s->stop_all = COMM_STOP_TARGET;
        break;
    case PS_DONE:
        w->done = 1;
        answer_parked(s);   /* a finished worker no longer holds the warm start */
        break;
    default:
        break;
    }
    return 1;
}

int ps_server_run(comm_t *c, const ps_config_t *cfg, int k, const float *params, size_t nparams)
{
    shard_t sh, *s = &sh;
    memset(s, 0, sizeof *s);
    s->c = c;
    s->cfg = cfg;
    s->k = k;
    ps_shard_range(nparams, cfg->servers, k, &s->lo, &s->n);
    /* the pool's buffers first: they are the ones looked at first for an update */
    s->npool = ps_shm_pool(cfg->shm, k, 0) ? ps_shm_npool(cfg->shm) : 0;
    s->wb = xcalloc((size_t)(s->npool + 2 * cfg->workers + 1), sizeof(float *));
    for (int i = 0; i < s->npool; i++) s->wb[s->nwb++] = ps_shm_pool(cfg->shm, k, i);
    if (!s->npool) s->wb[s->nwb++] = xalloc_floats(s->n ? s->n : 1);
    s->w = s->wb[0];
    memcpy(s->w, params + s->lo, s->n * sizeof(float));
    s->opt = optim_create(&cfg->opt, s->n);
    s->opt->base = s->lo;   /* its nodecay spans are in whole-vector keys */
    s->ws = xcalloc((size_t)cfg->workers, sizeof(worker_state_t));
    ps_gate_init(&s->gate, cfg);
    s->nparams = nparams;
    double t0 = now_s();
    for (int p = 0; p < cfg->workers; p++) {
        s->ws[p].alive = 1;
        s->ws[p].last_seen = t0;
        s->ws[p].cnt = s->n;   /* until its first message says otherwise */
        s->ws[p].slot = ps_shm_slot(cfg->shm, p, k);
    }
    if (cfg->restore) {   /* a resumed run: the slice's optimizer state, every worker's clock */
        const ps_restore_t *rs = cfg->restore;
        if (s->opt->velocity && rs->velocity) memcpy(s->opt->velocity, rs->velocity + s->lo, s->n * sizeof(float));
        if (s->opt->accum && rs->accum) memcpy(s->opt->accum, rs->accum + s->lo, s->n * sizeof(float));
        for (int p = 0; p < cfg->workers; p++) {
            s->ws[p].t = s->ws[p].applied = s->ws[p].served = rs->clock[p];
            s->ws[p].step = rs->step[p];
            s->sum_step += rs->step[p];
            s->st.updates += rs->clock[p];
        }
    }
    s->ordered = cfg->gate == GATE_SSP && cfg->staleness == 0;
    {
        int slow;
        s->round = min_clock(s, &slow);   /* a resumed run's clocks differ by at most one */
    }
    snap_setup(s);
    s->out = xcalloc((size_t)(2 * cfg->workers), sizeof(ps_hdr_t));
    s->out_req = xcalloc((size_t)(2 * cfg->workers), sizeof(MPI_Request));
    s->out_from = xcalloc((size_t)(2 * cfg->workers), sizeof(float *));
    s->out_seq = xcalloc((size_t)(2 * cfg->workers), sizeof(int64_t));
    for (int j = 0; j < 2 * cfg->workers; j++) s->out_req[j] = MPI_REQUEST_NULL;
    s->ev_hdr = xcalloc((size_t)cfg->workers, sizeof(ps_hdr_t));
    s->ev_req = xcalloc((size_t)cfg->workers, sizeof(MPI_Request));
    for (int p = 0; p < cfg->workers; p++) s->ev_req[p] = MPI_REQUEST_NULL;

    comm_idle_t idle = comm_idle_start(s->c);
    s->nrreq = cfg->workers + 1 + (s->k == 0 && s->snap_in && cfg->servers > 1);
    s->hin = xcalloc((size_t)cfg->workers, sizeof(ps_hdr_t));
    s->rreq = xcalloc((size_t)s->nrreq, sizeof(MPI_Request));
    s->fifo = xcalloc((size_t)cfg->workers, sizeof(int));
    s->inflight = -1;
    s->in = xmalloc(msg_bytes(s->n));
    int *idx = xcalloc((size_t)s->nrreq, sizeof(int));
    MPI_Status *sts = xcalloc((size_t)s->nrreq, sizeof(MPI_Status));
    for (int j = 0; j < s->nrreq; j++) s->rreq[j] = MPI_REQUEST_NULL;
    for (int p = 0; p < cfg->workers; p++) post_header(s, p);
    snap_post(s);
    while (!all_finished(s)) {
        int nready = 0;
        if (sim_build()) {
            /* simulated workers never die: block instead of polling, which
             * the simulator would pay for as one event per failed test.
             * Waitany, not Waitsome: SimGrid's Waitsome tests every request
             * and charges the cost of a failed test (smpi/test) for each
             * one still open. */
            MPI_CHECK(c, MPI_Waitany(s->nrreq, s->rreq, &idx[0], &sts[0]));
            nready = idx[0] == MPI_UNDEFINED ? 0 : 1;
        } else {
            MPI_CHECK(c, MPI_Testsome(s->nrreq, s->rreq, &nready, idx, sts));
        }
        double now = now_s();
        /* a preemption signal to this shard stops every worker (they see it in their replies) */
        if (comm_preempt_signal() && s->stop_all < COMM_STOP_PREEMPT) s->stop_all = COMM_STOP_PREEMPT;
        /* A worker is silent only while this shard listens: a shard that was
         * itself away (stopped, descheduled, held inside MPI) for longer
         * than a quarter of --timeout, or 0.25 s, does not count that time
         * against the workers. Without it a shard frozen past --timeout
         * evicted every healthy worker the moment it came back. */
        double away = now - s->last_poll, quarter = cfg->timeout_s / 4 < 0.25 ? cfg->timeout_s / 4 : 0.25;
        if (s->last_poll > 0 && away > quarter)
            for (int p = 0; p < cfg->workers; p++) s->ws[p].last_seen += away;
        s->last_poll = now;
        if (nready <= 0) {
            /* evict workers silent for too long (a parked worker is waiting on
             * us, not silent); one that died in the middle of a message never
             * completes its receive, and is evicted the same way */
            for (int p = 0; p < cfg->workers; p++) {
                worker_state_t *w = &s->ws[p];
                if (w->alive && !w->done && !w->parked && !(w->queued && s->inflight != p) &&
                    now - w->last_seen > cfg->timeout_s) {
                    evict(s, p, now - w->last_seen);
                    answer_parked(s);
                }
            }
            if (now - s->last_keepalive > cfg->timeout_s / 4) {
                /* finished workers wait for the end: tell them we are alive */
                ps_hdr_t h;
                memset(&h, 0, sizeof h);
                for (int p = 0; p < cfg->workers; p++)
                    if ((s->ws[p].alive && s->ws[p].done) || s->ws[p].returned)
                        MPI_CHECK(c, MPI_Send(&h, (int)sizeof h, MPI_BYTE, worker_rank(s, p), PS_KEEPALIVE, c->world));
                s->last_keepalive = now;
            }
            idle.spin = s->c->wait_spin || replies_in_flight(s);
            comm_idle(&idle);
            continue;
        }
        comm_idle_reset(&idle);
        for (int i = 0; i < nready; i++) {
            int p = idx[i], bytes;
            if (p > cfg->workers) { snap_recv(s, &sts[i]); continue; }
            if (p == cfg->workers) {   /* a gradient is in */
                p = s->inflight;
                s->inflight = -1;
                worker_state_t *w = &s->ws[p];
                w->queued = 0;
                w->last_seen = now;
                on_gradient(s, p, &w->qh, (float *)(s->in + sizeof(ps_hdr_t)));   /* base of the slice */
                post_header(s, p);
                next_gradient(s, now);
                continue;
            }
            MPI_Get_count(&sts[i], MPI_BYTE, &bytes);
            if (on_message(s, p, sts[i].MPI_TAG, bytes, now)) post_header(s, p);
        }
    }
    free(idx);
    free(sts);
    /* every worker is done or evicted: the final checkpoint first, so that
     * the final replies can say whether it was written; then each survivor
     * gets the final slice and statistics (the lead keeps the parameters;
     * all learn of evictions) */
    if (s->ordered) apply_in_order(s);
    snap_final(s);
    int slow;
    int64_t m = min_clock(s, &slow);
    for (int p = 0; p < cfg->workers; p++)
        if (s->ws[p].alive || s->ws[p].returned) send_params(s, p, PS_FINAL, m);
    if (s->snap_out) MPI_CHECK(c, MPI_Wait(&s->snap_req, MPI_STATUS_IGNORE));
    cancel_receives(s);
    snap_free(s);
    int keep = 0;   /* a reply to a dead worker that MPI may still read from: its buffer is not freed */
    for (int p = 0; p < cfg->workers; p++) {
        for (int j = 0; j < 2; j++) {
            MPI_Request *q = &s->out_req[2 * p + j];
            if (s->ws[p].alive || (s->ws[p].returned && j == 0)) MPI_CHECK(c, MPI_Wait(q, MPI_STATUS_IGNORE));
            else if (*q != MPI_REQUEST_NULL) { MPI_Request_free(q); keep = 1; }   /* to a dead worker: abandon */
        }
        MPI_Request *e = &s->ev_req[p];
        if (s->ws[p].returned) MPI_CHECK(c, MPI_Wait(e, MPI_STATUS_IGNORE));   /* it read the notice */
        else if (*e != MPI_REQUEST_NULL) { MPI_Request_free(e); keep = 1; }
    }
    if (!keep) {
        for (int i = s->npool; i < s->nwb; i++) free(s->wb[i]);   /* the pool's go with the window */
        free(s->out);
        free(s->ev_hdr);
    }
    free(s->ev_req);
    for (int p = 0; p < cfg->workers; p++) free(s->ws[p].held);
    free(s->in); free(s->hin); free(s->fifo); free(s->rreq); free(s->out_req); free(s->out_from); free(s->out_seq); free(s->wb); free(s->ws);
    ps_gate_free(&s->gate);
    optim_free(s->opt);
    return 0;
}
