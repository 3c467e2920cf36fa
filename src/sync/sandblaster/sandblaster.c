/* --sync sandblaster: Sandblaster L-BFGS (DistBelief; docs/algorithms.md §10).
 *
 * Ranks: 0 is the coordinator (it runs the training loop and leads: one
 * step is one L-BFGS iteration); 1..S are shards; the rest are replicas.
 *
 *   per iteration k (batch k, split into P portions):
 *     coordinator: the L-BFGS algorithm of optim/lbfgs.c, whose vector
 *       operations (dot, axpy, scale, copy) go to every shard, which runs
 *       them on its slice (dots come back as one partial sum per shard);
 *       each evaluation of f_k at x = w + t·d is a pass:
 *     pass: shards zero the accumulator; a replica asks for work, fetches
 *       x once per pass, computes the gradient sum of a portion, reports
 *       its loss and is told keep or discard (first result wins); it sums
 *       kept portions and pushes every --push-portions, with their ids;
 *       near the end idle replicas get duplicates of outstanding portions
 *       (backup tasks); the pass ends when every shard holds all P.
 *     shards keep s = t·d and y = ∇f_k(x) − ∇f_k(w) of the last m iterations.
 *
 * The coordinator holds no vector for the algorithm; to evaluate and to
 * write the final checkpoint it fetches w from the shards (evaluation only).
 * A replica that dies (--fail R@S: replica R exits before its S-th portion)
 * is found by --timeout and its portions are reissued; a dead shard or
 * coordinator stops everyone with a message (comm timeouts).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../run/faults.h"
#include "../../util/util.h"
#include "sb_coord.h"

typedef struct sb {
    sb_data_t data;
    int role;                /* 0 coordinator, 1 shard, 2 replica */
    int S, R, me;            /* me: shard or replica index */
    size_t *lo, *n;          /* (S) slices */
    /* coordinator */
    sb_coord_t co;
    lbfgs_t lb;
    lbfgs_vops_t vops;
    float *eval;             /* (nparams) w fetched for evaluation */
    MPI_Request *req;        /* (S) */
    float *saved;            /* coordinator: ((2m + 1), nparams) G, S_i, Y_i fetched for a checkpoint;
                                shard: its slices of them read from the resumed checkpoint */
    double *scalars;         /* coordinator: (m + 3) */
    ckpt_tensor_t tensors[4];
    /* replica */
    faults_t faults;
    float *gp, *acc;         /* (nparams) the last portion's sum; the group's sum */
    unsigned char **pbuf;    /* (S) push messages: header + slice */
    sb_push_hdr_t grp;       /* ids of the group held */
    int64_t pushed, started;
} sb_t;

enum { ROLE_COORD, ROLE_SHARD, ROLE_REPLICA };

static int sb_layout(run_t *r)
{
    const config_t *cfg = r->cfg;
    int S = (int)cfg->servers, N = r->comm->size, R = N - 1 - S;
    if (S < 1 || R < 1) {
        snprintf(r->err, sizeof r->err,
                 "--sync sandblaster needs a coordinator, --servers S >= 1 shards and at least one replica; %d ranks were started with --servers %d (try mpirun -np %d)",
                 N, S, S + 2);
        return -1;
    }
    int rank = r->comm->rank;
    r->is_worker = rank == 0;
    r->lead = rank == 0;
    r->nworkers = R;   /* --slowdown and --fail name replicas */
    r->wrank = rank > S ? rank - 1 - S : 0;
    return 0;
}

/* ---- the coordinator's vector operations: sent to the shards ---- */
static double c_dot(void *ctx, int a, int b)
{
    sb_t *s = ctx;
    sb_coord_replies(&s->co, OP_DOT, a, b, "a dot product at the shards");
    double sum = 0;
    for (int k = 0; k < s->S; k++) sum += s->co.rep_in[k].value;   /* shard order: deterministic */
    return sum;
}
static void c_axpy(void *ctx, double al, int x, int y) { sb_t *s = ctx; sb_coord_op(&s->co, OP_AXPY, x, y, al, 0); }
static void c_scale(void *ctx, double al, int x) { sb_t *s = ctx; sb_coord_op(&s->co, OP_SCALE, x, 0, al, 0); }
static void c_copy(void *ctx, int src, int dst) { sb_t *s = ctx; sb_coord_op(&s->co, OP_COPY, src, dst, 0, 0); }
static double c_eval(void *ctx, long k)
{
    sb_t *s = ctx;
    double loss = sb_coord_pass(&s->co, k);
    sb_coord_op(&s->co, OP_SCALE, LB_GX, 0, 1.0 / (double)s->data.BT, 0);   /* the sum → the mean gradient */
    return loss / (double)s->data.BT;
}

static int sb_init(run_t *r)
{
    const config_t *cfg = r->cfg;
    sb_t *s = xcalloc(1, sizeof *s);
    r->sync_state = s;
    int rank = r->comm->rank;
    s->S = (int)cfg->servers;
    s->R = r->comm->size - 1 - s->S;
    s->role = rank == 0 ? ROLE_COORD : rank <= s->S ? ROLE_SHARD : ROLE_REPLICA;
    s->me = s->role == ROLE_SHARD ? rank - 1 : s->role == ROLE_REPLICA ? rank - 1 - s->S : 0;
    if (sb_data_init(&s->data, r, s->R) != 0) return -1;
    const size_t np = r->model->nparams;
    s->lo = xmalloc(sizeof(size_t) * (size_t)s->S);
    s->n = xmalloc(sizeof(size_t) * (size_t)s->S);
    for (int k = 0; k < s->S; k++) ps_shard_range(np, s->S, k, &s->lo[k], &s->n[k]);
    s->req = xmalloc(sizeof(MPI_Request) * (size_t)s->S);
    if (s->role == ROLE_COORD) {
        lbfgs_ls_t ls;
        lbfgs_ls_parse(cfg->line_search, &ls);   /* checked by config_validate */
        lbfgs_init(&s->lb, (int)cfg->lbfgs_history, ls, cfg->weight_decay, s->data.BT == s->data.n);
        sb_coord_init(&s->co, r->comm, s->S, s->R, s->data.P, cfg->no_backup_tasks);
        s->vops = (lbfgs_vops_t){ s, c_dot, c_axpy, c_scale, c_copy, c_eval };
        s->eval = xalloc_floats(np);
    } else if (s->role == ROLE_REPLICA) {
        if (faults_parse(&s->faults, cfg->slowdown, cfg->fail, s->me, s->R, (uint64_t)cfg->seed, r->err, sizeof r->err) != 0) return -1;
        s->gp = xalloc_floats(np);
        s->acc = xalloc_floats(np);
        s->pbuf = xcalloc((size_t)s->S, sizeof(unsigned char *));
        for (int k = 0; k < s->S; k++) s->pbuf[k] = xmalloc(sizeof(sb_push_hdr_t) + s->n[k] * sizeof(float));
    }
    return 0;
}

/* The coordinator fetches vector a from the shards into out. */
static void fetch_vector(run_t *r, int a, float *out)
{
    sb_t *s = r->sync_state;
    for (int k = 0; k < s->S; k++)
        MPI_CHECK(r->comm, MPI_Irecv(out + s->lo[k], (int)s->n[k], MPI_FLOAT, 1 + k, SB_SLICE, r->comm->world, &s->req[k]));
    sb_coord_op(&s->co, OP_GET, a, 0, 0, 0);
    comm_waitall(r->comm, s->S, s->req, "fetching the parameters from the shards");
}

/* One L-BFGS iteration. The loop checkpoints the lead's model: bring w
 * there when a checkpoint is due. */
static int sb_step(run_t *r)
{
    sb_t *s = r->sync_state;
    r->loss = (float)lbfgs_iterate(&s->lb, &s->vops, r->step);
    long every = r->cfg->checkpoint_every;
    if (every > 0 && (r->step + 1) % every == 0) fetch_vector(r, LB_W, r->model->params);
    return 0;
}

static float *sb_eval_params(run_t *r)
{
    sb_t *s = r->sync_state;
    fetch_vector(r, LB_W, s->eval);
    return s->eval;
}

static void sb_finish(run_t *r)
{
    sb_t *s = r->sync_state;
    fetch_vector(r, LB_W, r->model->params);
    sb_coord_stop(&s->co);
}

/* ---- checkpoint and resume: the L-BFGS state, as --sync lbfgs saves it ----
 * The coordinator holds the scalars and fetches the shards' slices of G,
 * S_i and Y_i (the history lives at the shards); on resume each shard takes
 * its slices straight from the checkpoint and the coordinator its scalars. */
static int sb_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    sb_t *s = r->sync_state;
    const int m = s->lb.m;
    const size_t n = r->model->nparams;
    if (!s->saved) {
        s->saved = xalloc_floats((size_t)(2 * m + 1) * n);
        s->scalars = xcalloc((size_t)m + 3, sizeof(double));
    }
    fetch_vector(r, LB_G, s->saved);
    for (int i = 0; i < 2 * m; i++) fetch_vector(r, LB_S(0) + i, s->saved + (size_t)(1 + i) * n);
    sb_lbfgs_save(&s->lb, s->scalars, s->saved, s->saved + n, s->saved + (size_t)(1 + m) * n, n, s->tensors, meta);
    return 0;
}

static int sb_resume(run_t *r, const ckpt_t *ck)
{
    sb_t *s = r->sync_state;
    if (!sb_lbfgs_in(ck) || s->role == ROLE_REPLICA) return 0;
    const int m = (int)r->cfg->lbfgs_history;
    if (s->role == ROLE_COORD) {
        s->scalars = xcalloc((size_t)m + 3, sizeof(double));
        return sb_lbfgs_load(&s->lb, ck, s->scalars, r->err, sizeof r->err);
    }
    /* a shard: its slices of G, S_i, Y_i (the coordinator checks the scalars) */
    const size_t n = r->model->nparams, lo = s->lo[s->me], cnt = s->n[s->me];
    float *row = xalloc_floats(n);
    s->saved = xalloc_floats((size_t)(2 * m + 1) * (cnt ? cnt : 1));
    int bad = ckpt_rows(ck, "sync.lbfgs_s") != m || ckpt_rows(ck, "sync.lbfgs_y") != m;
    for (int i = 0; i < 2 * m + 1 && !bad; i++) {
        const char *name = i == 0 ? "sync.lbfgs_g" : i <= m ? "sync.lbfgs_s" : "sync.lbfgs_y";
        long at = i == 0 ? 0 : i <= m ? i - 1 : i - 1 - m;
        bad = ckpt_read_row(ck, name, at, row, n) != 0;
        if (!bad) memcpy(s->saved + (size_t)i * cnt, row + lo, cnt * sizeof(float));
    }
    free(row);
    if (bad) {
        snprintf(r->err, sizeof r->err, "checkpoint's L-BFGS vectors (sync.lbfgs_g, _s, _y) are missing or not of --lbfgs-history %d", m);
        return -1;
    }
    return 0;
}

/* ---- replicas ---- */
static void send_req(run_t *r, int kind, int portion, int64_t pass, double loss)
{
    sb_t *s = r->sync_state;
    sb_req_t m = { kind, portion, pass, s->pushed, loss };
    MPI_CHECK(r->comm, MPI_Send(&m, (int)sizeof m, MPI_BYTE, 0, SB_REQ, r->comm->world));
    r->comm->bytes_sent += sizeof m;
    r->comm->msgs_sent++;
}

/* The coordinator's next task (keep-alives restart the clock). */
static void wait_task(run_t *r, sb_task_t *t)
{
    sb_t *s = r->sync_state;
    for (;;) {
        comm_preempt_tell(r->comm, 0);   /* a signal to this replica preempts the job: the coordinator stops it */
        MPI_Request q;
        MPI_CHECK(r->comm, MPI_Irecv(t, (int)sizeof *t, MPI_BYTE, 0, SB_TASK, r->comm->world, &q));
        if (comm_wait_bounded(r->comm, &q, r->cfg->timeout, NULL, NULL) != 0)
            die("sandblaster replica %d: the coordinator (rank 0) has not answered for %g s (--timeout); stopping",
                s->me, r->cfg->timeout);
        if (t->action != ACT_KEEPALIVE) return;
    }
}

/* Push the group held (whole portions, with their ids) to every shard. */
static void flush(run_t *r, int64_t pass)
{
    sb_t *s = r->sync_state;
    if (s->grp.nids == 0) return;
    s->grp.pass = pass;
    s->grp.replica = s->me;
    for (int k = 0; k < s->S; k++) {
        memcpy(s->pbuf[k], &s->grp, sizeof s->grp);
        memcpy(s->pbuf[k] + sizeof s->grp, s->acc + s->lo[k], s->n[k] * sizeof(float));
        size_t bytes = sizeof s->grp + s->n[k] * sizeof(float);
        MPI_CHECK(r->comm, MPI_Isend(s->pbuf[k], (int)bytes, MPI_BYTE, 1 + k, SB_PUSH, r->comm->world, &s->req[k]));
        r->comm->bytes_sent += bytes;
        r->comm->msgs_sent++;
    }
    comm_waitall(r->comm, s->S, s->req, "pushing gradients to the shards");
    s->pushed += s->grp.nids;
    s->grp.nids = 0;
    memset(s->acc, 0, r->model->nparams * sizeof(float));
}

static void fetch_x(run_t *r, int64_t pass)
{
    sb_t *s = r->sync_state;
    sb_req_t m = { REQ_IDLE, -1, pass, 0, 0 };
    for (int k = 0; k < s->S; k++) {
        MPI_CHECK(r->comm, MPI_Irecv(r->model->params + s->lo[k], (int)s->n[k], MPI_FLOAT, 1 + k, SB_PARAMS, r->comm->world,
                                     &s->req[k]));
        MPI_CHECK(r->comm, MPI_Send(&m, (int)sizeof m, MPI_BYTE, 1 + k, SB_FETCH, r->comm->world));
    }
    r->comm->msgs_sent += (uint64_t)s->S;
    comm_waitall(r->comm, s->S, s->req, "fetching parameters from the shards");
}

static int replica_run(run_t *r)
{
    sb_t *s = r->sync_state;
    int64_t my_pass = -1;
    int last = -1, last_solo = 0;
    sb_task_t t;
    send_req(r, REQ_IDLE, -1, -1, 0);
    for (;;) {
        wait_task(r, &t);
        if (t.verdict == V_KEEP) {
            lbfgs_kadd(s->gp, s->acc, r->model->nparams);
            s->grp.ids[s->grp.nids++] = last;
        }
        int pushed_now = 0;
        if (s->grp.nids > 0 &&
            (s->grp.nids >= s->data.K || last_solo || t.action != ACT_WORK || (t.flags & SB_FLUSH_FIRST))) {
            flush(r, my_pass);
            pushed_now = 1;
        }
        if (t.action == ACT_STOP) {
            if (t.flags & SB_EVICTED) {   /* its work is done by others; it waits for the end with them */
                fprintf(stderr, "dsgd: sandblaster replica %d (rank %d): evicted while silent past --timeout %g (frozen); "
                        "its portions went to the others; it computes no more\n", s->me, r->comm->rank, r->cfg->timeout);
                continue;
            }
            if (t.peer_lost) r->comm->peer_lost = 1;
            return 0;
        }
        if (t.action == ACT_IDLE) {
            send_req(r, REQ_IDLE, -1, my_pass, 0);
            continue;
        }
        if (pushed_now) send_req(r, REQ_NOTICE, -1, my_pass, 0);
        r->comm->step = t.batch;
        if (t.pass != my_pass) {
            if (s->grp.nids) die("sandblaster replica %d: holds portions of pass %lld at pass %lld (a bug)", s->me,
                                 (long long)my_pass, (long long)t.pass);
            fetch_x(r, t.pass);
            my_pass = t.pass;
        }
        faults_exit_if_due(&s->faults, s->started++, "replica", s->me, r->comm->rank, "before its portion");
        double t0 = now_s();
        double loss = sb_portion_grad(&s->data, r->model, t.batch, t.portion, s->gp);
        double t1 = now_s();
        faults_delay(&s->faults, t1 - t0, t1);
        last = t.portion;
        last_solo = (t.flags & SB_SOLO) != 0;
        send_req(r, REQ_DONE, t.portion, t.pass, loss);
    }
}

static int sb_serve(run_t *r)
{
    sb_t *s = r->sync_state;
    if (s->role == ROLE_SHARD) return sb_shard_run(r, &s->data, s->me, s->saved);
    return replica_run(r);
}

static void sb_destroy(run_t *r)
{
    sb_t *s = r->sync_state;
    if (!s) return;
    if (s->role == ROLE_COORD && s->co.rep) {
        sb_coord_free(&s->co);
        lbfgs_free(&s->lb);
    }
    if (s->pbuf)
        for (int k = 0; k < s->S; k++) free(s->pbuf[k]);
    free(s->pbuf);
    free(s->gp);
    free(s->acc);
    free(s->eval);
    free(s->saved);
    free(s->scalars);
    free(s->req);
    free(s->lo);
    free(s->n);
    sb_data_free(&s->data);
    free(s);
    r->sync_state = NULL;
}

static sync_stop_mode_t sb_stop_mode(const run_t *r) { return STOP_LEAD; }

static int sb_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    sb_t *s = r->sync_state;
    if (!s || s->role != ROLE_COORD || max < 14) return 0;
    const sb_coord_t *co = &s->co;
    int n = 0;
    out[n++] = (sync_stat_t){ "lbfgs_evals", (double)s->lb.evals, NULL };
    out[n++] = (sync_stat_t){ "lbfgs_step", s->lb.t, NULL };
    out[n++] = (sync_stat_t){ "duplicates_issued", (double)co->dup_issued, NULL };
    if (progress) return n;
    out[n++] = (sync_stat_t){ "passes", (double)co->passes, NULL };
    out[n++] = (sync_stat_t){ "portions_per_batch", (double)s->data.P, NULL };
    out[n++] = (sync_stat_t){ "portion_size", (double)s->data.PS, NULL };
    out[n++] = (sync_stat_t){ "portions_issued", (double)co->issued, NULL };
    out[n++] = (sync_stat_t){ "duplicates_discarded", (double)co->dup_discarded, NULL };
    out[n++] = (sync_stat_t){ "portions_reissued", (double)co->reissued, NULL };
    out[n++] = (sync_stat_t){ "portions_counted", (double)co->counted, NULL };
    out[n++] = (sync_stat_t){ "shard_duplicates_dropped", (double)co->shard_discarded, NULL };
    out[n++] = (sync_stat_t){ "replica_evictions", (double)co->evictions, NULL };
    out[n++] = (sync_stat_t){ "pass_s_mean", co->passes ? co->pass_s / (double)co->passes : 0, NULL };
    out[n++] = (sync_stat_t){ "ls_failures", (double)s->lb.ls_failures, NULL };
    return n;
}

const sync_ops_t sync_sandblaster = {
    .name = "sandblaster",
    .coordinator = 1,
    .help = "Sandblaster L-BFGS: coordinator, sharded L-BFGS state, replicas computing portions with backup tasks",
    .options = (const char *const[]){ SYNC_PS_OPTIONS, "batch-total", "portion", "push-portions", "lbfgs-history", "line-search", "no-backup-tasks", NULL },
    .layout = sb_layout,
    .init = sb_init,
    .step = sb_step,
    .serve = sb_serve,
    .finish = sb_finish,
    .destroy = sb_destroy,
    .stats = sb_stats,
    .eval_params = sb_eval_params,
    .recalibrate_bn = 1,
    .ckpt_state = sb_ckpt_state,
    .resume = sb_resume,
    .step_samples = sb_step_samples,
    .stop_mode = sb_stop_mode,
};
