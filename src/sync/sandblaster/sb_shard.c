/* One Sandblaster shard: its slice of every named L-BFGS vector (w, g, d,
 * the trial point x, the gradient accumulator, the history s_i, y_i), the
 * operations the coordinator sends, parameter fetches and gradient pushes
 * from the replicas.
 *
 * Never counting a portion twice: a push carries the ids of the whole
 * portions it sums; the shard keeps, per pass, which ids it holds. The
 * coordinator grants each portion to one replica only, so in a healthy run
 * no id ever repeats. After a replica dies, the portions it held but may
 * not have pushed everywhere are recomputed and pushed alone (one id per
 * push): a shard that already holds that id drops the push. A group push
 * that repeats a held id would be a bug; it is dropped and reported
 * (conflicts), and the coordinator stops the run. */
#include <stdlib.h>
#include <string.h>

#include "../../util/util.h"
#include "sb.h"

typedef struct shard {
    comm_t *c;
    int k, S, R, P, nv;
    size_t lo, n;
    double timeout;
    float **v;               /* (nv) slices of the named vectors */
    unsigned char *have;     /* (P) portions held this pass */
    int64_t pass;
    long counted, discarded, conflicts;
    int end_wanted, stop, peer_lost;
    unsigned char **in;      /* (R) a replica's receive buffer: fetch, then push header + n floats */
    MPI_Request *rq;         /* (2R + 1) the receives kept posted (see "Receives") */
    sb_op_t op_in;
    float **out;             /* (R) X slices on their way to replicas */
    MPI_Request *out_req;    /* (R) */
    int64_t *fetch_pass;     /* (R) parked fetch: the pass wanted, or -1 */
    unsigned char *dead;     /* (R) evicted: its pushes no longer count */
    unsigned char *lent;     /* (R) its push buffer is MPI's (a withdrawn receive a message had matched) */
    comm_wait_t coord;       /* the coordinator's silence */
} shard_t;

static size_t push_bytes(const shard_t *s) { return sizeof(sb_push_hdr_t) + s->n * sizeof(float); }

/* ---- Receives ----
 * The shard keeps a receive posted for every live replica's next push and
 * next fetch, and for the coordinator's next operation: a push above the
 * MPI's eager limit moves while the shard adds another one or sends X,
 * instead of waiting for the shard to probe it and post its receive (which
 * let one push flow at a time). Request q is replica q's push, R + q its
 * fetch, 2R the operation; replica q's buffer holds its fetch request, then
 * its push. Memory: one push buffer per replica (R slices). */
#define RQ_FETCH(s, q) ((s)->R + (q))
#define RQ_OP(s) (2 * (s)->R)

static sb_req_t *fetch_in(const shard_t *s, int q) { return (sb_req_t *)s->in[q]; }
static unsigned char *push_in(const shard_t *s, int q) { return s->in[q] + sizeof(sb_req_t); }

static void post_push(shard_t *s, int q)
{
    MPI_CHECK(s->c, MPI_Irecv(push_in(s, q), (int)push_bytes(s), MPI_BYTE, 1 + s->S + q, SB_PUSH, s->c->world, &s->rq[q]));
}

static void post_fetch(shard_t *s, int q)
{
    MPI_CHECK(s->c, MPI_Irecv(fetch_in(s, q), (int)sizeof(sb_req_t), MPI_BYTE, 1 + s->S + q, SB_FETCH, s->c->world,
                              &s->rq[RQ_FETCH(s, q)]));
}

static void post_op(shard_t *s)
{
    MPI_CHECK(s->c, MPI_Irecv(&s->op_in, (int)sizeof(sb_op_t), MPI_BYTE, 0, SB_OP, s->c->world, &s->rq[RQ_OP(s)]));
}

/* An evicted replica's pushes no longer count: their receive is withdrawn
 * at once (one that a push has matched leaves the buffer to MPI until the
 * end). Its fetches are still answered: a replica that was frozen, not
 * dead, waits for its X before it hears from the coordinator that it was
 * evicted. */
static void forget(shard_t *s, int q)
{
    s->dead[q] = 1;
    if (!comm_withdraw(&s->rq[q], 0)) s->lent[q] = 1;
}

static void send_x(shard_t *s, int q)
{
    /* the replica has received the previous slice before it could ask again;
     * an evicted one may be dead inside it: it gets nothing more */
    if (s->dead[q]) {
        int done = 0;
        MPI_CHECK(s->c, MPI_Test(&s->out_req[q], &done, MPI_STATUS_IGNORE));
        if (!done) return;
    }
    MPI_CHECK(s->c, MPI_Wait(&s->out_req[q], MPI_STATUS_IGNORE));
    memcpy(s->out[q], s->v[LB_X], s->n * sizeof(float));
    MPI_CHECK(s->c, MPI_Isend(s->out[q], (int)s->n, MPI_FLOAT, 1 + s->S + q, SB_PARAMS, s->c->world, &s->out_req[q]));
    s->c->bytes_sent += s->n * sizeof(float);
    s->c->msgs_sent++;
    s->fetch_pass[q] = -1;
}

static void reply(shard_t *s, double value)
{
    sb_reply_t rp = { value, s->counted, s->discarded, s->conflicts };
    MPI_CHECK(s->c, MPI_Send(&rp, (int)sizeof rp, MPI_BYTE, 0, SB_REPLY, s->c->world));
    s->c->bytes_sent += sizeof rp;
    s->c->msgs_sent++;
}

static void on_op(shard_t *s, const sb_op_t *o)
{
    float **v = s->v;
    switch (o->op) {
    case OP_DOT: reply(s, lbfgs_kdot(v[o->a], v[o->b], s->n)); break;
    case OP_AXPY: lbfgs_kaxpy(o->alpha, v[o->a], v[o->b], s->n); break;
    case OP_SCALE: lbfgs_kscale(o->alpha, v[o->a], s->n); break;
    case OP_COPY: memcpy(v[o->b], v[o->a], s->n * sizeof(float)); break;
    case OP_BEGIN:
        s->pass = o->pass;
        s->counted = 0;
        s->end_wanted = 0;
        memset(v[LB_GX], 0, s->n * sizeof(float));
        memset(s->have, 0, (size_t)s->P);
        for (int q = 0; q < s->R; q++)
            if (s->fetch_pass[q] >= 0 && s->fetch_pass[q] <= s->pass) send_x(s, q);
        break;
    case OP_END:
        s->end_wanted = 1;
        if (s->counted == s->P) { reply(s, 0); s->end_wanted = 0; }
        break;
    case OP_EVICT:
        if (o->who >= 0 && o->who < s->R && !s->dead[o->who]) forget(s, o->who);
        s->peer_lost = 1;
        MPI_CHECK(s->c, MPI_Send(s->have, s->P, MPI_BYTE, 0, SB_BITMAP, s->c->world));
        break;
    case OP_GET:
        MPI_CHECK(s->c, MPI_Send(v[o->a], (int)s->n, MPI_FLOAT, 0, SB_SLICE, s->c->world));
        s->c->bytes_sent += s->n * sizeof(float);
        break;
    case OP_STOP:   /* the coordinator's verdict: an evicted replica may have come back */
        s->stop = 1;
        s->peer_lost = o->who;
        break;
    default: break;   /* OP_PING */
    }
}

static void on_push(shard_t *s, const sb_push_hdr_t *h, const float *g)
{
    if (h->pass != s->pass || h->nids < 1 || h->nids > SB_MAX_PUSH) { s->discarded++; return; }
    int repeated = 0;
    for (int i = 0; i < h->nids; i++) {
        if (h->ids[i] < 0 || h->ids[i] >= s->P) return;
        repeated += s->have[h->ids[i]];
    }
    if (repeated) {   /* a reissued portion that arrived here before: the first copy counts */
        if (h->nids == 1) s->discarded++;
        else s->conflicts++;
        return;
    }
    for (int i = 0; i < h->nids; i++) s->have[h->ids[i]] = 1;
    s->counted += h->nids;
    lbfgs_kadd(g, s->v[LB_GX], s->n);
    if (s->end_wanted && s->counted == s->P) { reply(s, 0); s->end_wanted = 0; }
}

/* Take what is no receive's: anything an evicted replica still sends (a
 * frozen one that came back waits in its send until it is taken), and
 * messages of other protocols (e.g. a roll call). A message of ours that
 * came between a receive's completion and its repost stays for the repost.
 * A sender that dies within its message is abandoned after the timeout. */
static void drain(shard_t *s)
{
    for (;;) {
        int flag = 0, bytes = 0;
        MPI_Status st;
        MPI_CHECK(s->c, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, s->c->world, &flag, &st));
        if (!flag) return;
        int src = st.MPI_SOURCE, q = src - 1 - s->S, tag = st.MPI_TAG;
        if ((src == 0 && tag == SB_OP) || (q >= 0 && q < s->R && (tag == SB_FETCH || (tag == SB_PUSH && !s->dead[q]))))
            return;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        unsigned char *junk = xmalloc((size_t)bytes + 1);
        MPI_Request r;
        MPI_CHECK(s->c, MPI_Irecv(junk, bytes, MPI_BYTE, src, tag, s->c->world, &r));
        if (comm_wait_bounded(s->c, &r, s->timeout, NULL, NULL) != 0) return;   /* junk stays with MPI */
        free(junk);
    }
}

/* Completed receive i: act on it and post the next one of its kind. */
static void take(shard_t *s, int i)
{
    if (i == RQ_OP(s)) {
        sb_op_t o = s->op_in;
        post_op(s);
        on_op(s, &o);
        return;
    }
    int q = i < s->R ? i : i - s->R;
    if (i == q) {
        if (s->dead[q]) return;
        on_push(s, (const sb_push_hdr_t *)push_in(s, q), (const float *)(push_in(s, q) + sizeof(sb_push_hdr_t)));
        post_push(s, q);
        return;
    }
    s->fetch_pass[q] = fetch_in(s, q)->pass;
    post_fetch(s, q);
    /* a fetch of a later pass waits for its OP_BEGIN; one of an earlier
     * pass gets the current X: its result comes too late to count and is
     * discarded by the coordinator */
    if (s->fetch_pass[q] <= s->pass) send_x(s, q);
}

/* ---- the shard as comm_serve's handlers ---- */

static int stopped(void *ctx) { return ((shard_t *)ctx)->stop; }

/* a signal to this shard preempts the job: the coordinator stops it */
static void polled(void *ctx) { comm_preempt_tell(((shard_t *)ctx)->c, 0); }

static void took(void *ctx, int i, MPI_Status *st)
{
    shard_t *s = ctx;
    if (i == RQ_OP(s)) comm_wait_heard(&s->coord);
    take(s, i);
}

static int quiet(void *ctx)
{
    shard_t *s = ctx;
    drain(s);
    if (comm_wait_late(&s->coord))
        die("sandblaster shard %d: the coordinator (rank 0) has been silent for %.1f s (--timeout %g); stopping", s->k,
            comm_wait_s(&s->coord), s->timeout);
    return 0;
}

int sb_shard_run(run_t *r, const sb_data_t *b, int k, const float *restore)
{
    comm_t *c = r->comm;
    shard_t sh, *s = &sh;
    memset(s, 0, sizeof *s);
    s->c = c;
    s->k = k;
    s->S = (int)r->cfg->servers;
    s->R = r->nworkers;
    s->P = b->P;
    s->timeout = r->cfg->timeout;
    s->nv = lbfgs_nvecs((int)r->cfg->lbfgs_history);
    s->pass = -1;
    ps_shard_range(r->model->nparams, s->S, k, &s->lo, &s->n);
    s->v = xcalloc((size_t)s->nv, sizeof(float *));
    for (int i = 0; i < s->nv; i++) s->v[i] = xalloc_floats(s->n ? s->n : 1);
    memcpy(s->v[LB_W], r->model->params + s->lo, s->n * sizeof(float));
    if (restore) {   /* a resumed run: G, then S_i, then Y_i (their indices are consecutive) */
        const int m = (int)r->cfg->lbfgs_history;
        memcpy(s->v[LB_G], restore, s->n * sizeof(float));
        for (int i = 0; i < 2 * m; i++) memcpy(s->v[LB_S(0) + i], restore + (size_t)(1 + i) * s->n, s->n * sizeof(float));
    }
    s->have = xcalloc((size_t)s->P, 1);
    s->in = xcalloc((size_t)s->R, sizeof(unsigned char *));
    s->rq = xmalloc(sizeof(MPI_Request) * (size_t)(2 * s->R + 1));
    s->out = xcalloc((size_t)s->R, sizeof(float *));
    s->out_req = xmalloc(sizeof(MPI_Request) * (size_t)s->R);
    s->fetch_pass = xmalloc(sizeof(int64_t) * (size_t)s->R);
    s->dead = xcalloc((size_t)s->R, 1);
    s->lent = xcalloc((size_t)s->R, 1);
    for (int q = 0; q < s->R; q++) {
        s->in[q] = xmalloc(sizeof(sb_req_t) + push_bytes(s));
        s->out[q] = xalloc_floats(s->n ? s->n : 1);
        s->out_req[q] = MPI_REQUEST_NULL;
        s->fetch_pass[q] = -1;
        post_push(s, q);
        post_fetch(s, q);
    }
    post_op(s);
    const int nrq = 2 * s->R + 1;
    s->coord = comm_wait_start(s->c, live_deadline(s->timeout, LIVE_SILENT));
    const comm_serve_t h = { .done = stopped, .polled = polled, .take = took, .quiet = quiet };
    comm_serve(c, nrq, s->rq, &h, s);
    /* the coordinator is alive (it sent OP_STOP); after a death elsewhere a
     * replica may not be */
    for (int i = 0; i < nrq; i++)
        if (!comm_withdraw(&s->rq[i], COMM_WITHDRAW_S) && i != RQ_OP(s)) s->lent[i < s->R ? i : i - s->R] = 1;
    for (int q = 0; q < s->R; q++) {
        if (!s->dead[q]) MPI_CHECK(c, MPI_Wait(&s->out_req[q], MPI_STATUS_IGNORE));
        else if (s->out_req[q] != MPI_REQUEST_NULL) MPI_Request_free(&s->out_req[q]);   /* to a dead replica: abandon */
        free(s->out[q]);
        if (!s->lent[q]) free(s->in[q]);
    }
    if (s->peer_lost) c->peer_lost = 1;
    for (int i = 0; i < s->nv; i++) free(s->v[i]);
    free(s->v); free(s->have); free(s->in); free(s->rq); free(s->out); free(s->out_req); free(s->fetch_pass); free(s->dead); free(s->lent);
    return 0;
}
