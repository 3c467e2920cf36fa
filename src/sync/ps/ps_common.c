/* What every parameter-server paradigm shares: roles (the first --servers
 * ranks are shards, the rest workers, worker 0 leads), the server loop, the
 * client, evaluation of the global model, statistics, and the end of a run. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../../util/util.h"
#include "ps_sync.h"

int ps_sync_layout(run_t *r)
{
    const config_t *cfg = r->cfg;
    int S = (int)cfg->servers, N = r->comm->size;
    if (S < 1 || S >= N) {
        snprintf(r->err, sizeof r->err,
                 "--sync %s needs --servers S >= 1 server ranks plus at least one worker; %d ranks were started with --servers %d (try mpirun -np %d)",
                 cfg->sync, N, S, S + 2);
        return -1;
    }
    if (*cfg->resume && cfg->model_parallel > 1) {
        snprintf(r->err, sizeof r->err, "--resume is not supported for --sync %s with --model-parallel yet; resume without it", cfg->sync);
        return -1;
    }
    /* the shards hold the global model and write its checkpoints; a resume
     * gives the workers the model only (their optimizer is local) */
    r->server_ckpt = cfg->model_parallel == 1;
    r->is_worker = r->comm->rank >= S;
    r->nworkers = N - S;
    r->wrank = r->is_worker ? r->comm->rank - S : 0;
    r->lead = r->comm->rank == S;
    return 0;
}


/* the shards' checkpoint's sync_state */
static const ckpt_key_t STATE_KEYS[] = { { "workers", 1, INT_MAX }, { "updates", 0, LONG_MAX } };

static int server_opt(const config_t *cfg, optim_cfg_t *o, char *err, size_t len)
{
    *o = (optim_cfg_t){ .momentum = (float)cfg->momentum, .weight_decay = (float)cfg->weight_decay,
                        .eps = (float)cfg->adagrad_eps };
    const char *k = *cfg->server_opt ? cfg->server_opt : cfg->optimizer;
    if (!strcmp(k, "momentum")) {
        o->kind = OPT_SGD;
        if (o->momentum == 0) o->momentum = 0.9f;
    } else if (optim_kind_parse(k, &o->kind) != 0) {
        snprintf(err, len, "unknown --server-opt '%s'; choose sgd, momentum, nesterov or adagrad", k);
        return -1;
    }
    return 0;
}

/* Shard 0: write a checkpoint of the assembled global model. The model
 * tensors are the shards' parameters, optim.* their optimizer state (of
 * --server-opt), sync.ps_clocks every worker's clock and step (F64
 * [workers, 2]); the step is the workers' mean step. */
static int ps_sync_write(void *ctx, const ps_snapshot_t *snap)
{
    ps_sync_t *s = ctx;
    run_t *r = s->run;
    const config_t *cfg = r->cfg;
    const int W = s->pcfg.workers;
    if (!s->clk64) s->clk64 = xcalloc((size_t)W * 2, sizeof(double));
    int64_t sum = 0;
    for (int p = 0; p < W; p++) {
        s->clk64[2 * p] = (double)snap->clock[p];
        s->clk64[2 * p + 1] = (double)snap->step[p];
        sum += snap->step[p];
    }
    optim_t o = { .cfg = s->pcfg.opt, .n = r->model->nparams, .velocity = (float *)snap->velocity, .accum = (float *)snap->accum };
    ckpt_tensor_t clk = { .name = "sync.ps_clocks", .data64 = s->clk64, .rows = W, .cols = 2 };
    ckpt_meta_t meta = { .extra = &clk, .nextra = 1, .params = snap->params };
    sync_ckpt_meta(r, &meta, (long)(sum / W), s->pcfg.opt.kind);
    ckpt_state_write(meta.sync_state, sizeof meta.sync_state, 2, STATE_KEYS, (long[]){ W, (long)snap->updates });
    /* the shard computes no batch: the statistics saved are recomputed at
     * the global parameters (a worker's own follow its last pull) */
    sync_bn_recalibrate(r, snap->params);
    char err[512];
    if (ckpt_save(cfg->checkpoint, r->model, &o, &meta, err, sizeof err) == 0) return 0;
    /* the job's one line: the lead worker, told in the replies, closes the
     * metrics and stops the job without a line of its own */
    fprintf(stderr, "dsgd: error: rank %d (%s): server shard 0: %s; the previous checkpoint, if any, is kept, and so is the metrics record\n",
            r->comm->rank, r->comm->host, err);
    fflush(stderr);
    return -1;
}

int ps_sync_init(run_t *r, ps_gate_kind_t gate, long warmup_steps)
{
    ps_sync_t *s = xcalloc(1, sizeof *s);
    r->sync_state = s;
    return ps_sync_setup(r, s, gate, warmup_steps);
}

int ps_sync_setup(run_t *r, ps_sync_t *s, ps_gate_kind_t gate, long warmup_steps)
{
    const config_t *cfg = r->cfg;
    ps_config_t *pc = &s->pcfg;
    pc->servers = (int)cfg->servers;
    pc->workers = r->nworkers;
    pc->gate = gate;
    pc->staleness = gate == GATE_DSSP ? cfg->staleness_low : cfg->staleness;
    pc->staleness_high = cfg->staleness_high;
    pc->warmup_steps = warmup_steps;
    pc->replica_size = r->mp_size;
    pc->timeout_s = cfg->timeout;
    pc->fixed_lr = cfg->adagrad_lr > 0 ? (float)cfg->adagrad_lr : 0.0f;
    if (server_opt(cfg, &pc->opt, r->err, sizeof r->err) != 0) return -1;
    pc->opt.nodecay = r->nodecay;   /* --weight-decay-bn 0: the shards skip the same spans */
    pc->opt.nnodecay = r->nnodecay;
    s->run = r;
    if (r->server_ckpt && *cfg->checkpoint) {
        pc->snap_every = cfg->checkpoint_every;
        pc->snap_final = 1;
        pc->on_snapshot = ps_sync_write;
        pc->snap_ctx = s;
    }
    /* every rank, here: creating the host's shared window is collective */
    ps_transport_t tr = PS_AUTO;
    ps_transport_parse(cfg->ps_transport, &tr);   /* checked with the other options */
    pc->shm = ps_shm_open(r->comm, pc->servers, pc->workers, r->model->full_nparams, tr);
    if (gate == GATE_DSSP && cfg->staleness_high < cfg->staleness_low) {
        snprintf(r->err, sizeof r->err, "--staleness-high %ld is below --staleness-low %ld", cfg->staleness_high, cfg->staleness_low);
        return -1;
    }
    if (r->is_worker) {
        /* model parallel: the key space is the partitions' vectors end to
         * end, and each rank owns its partition's range */
        s->client = ps_client_create(r->comm, pc, r->wrank, r->model->full_nparams);
        size_t base = 0;
        for (int q = 0; q < r->mp_index; q++) base += model_part_nparams(r->model, q);
        ps_client_set_range(s->client, base, r->model->nparams);
        if (r->evaluates) s->eval = xalloc_floats(r->model->nparams);
    }
    return 0;
}

/* A checkpoint written by the shards (sync.ps_clocks) gives back the server
 * optimizer's state and every worker's clock and step; with another number
 * of workers (elastic resume) every worker starts at the mean clock and the
 * checkpoint's step, and the shards re-slice the full vectors. A checkpoint
 * of another paradigm gives the model only (clocks start at 0, the step
 * where it was). A worker resumed under a gate (ssp, dssp, bsp-ps) spends
 * its first step on a gated pull, so that its first push after the resume
 * keeps the staleness bound. */
int ps_sync_resume(run_t *r, const ckpt_t *ck)
{
    ps_sync_t *s = r->sync_state;
    const ckpt_meta_t *m = &ck->meta;
    const int W = s->pcfg.workers;
    s->restore_clock = xcalloc((size_t)W, sizeof(int64_t));
    s->restore_step = xcalloc((size_t)W, sizeof(int64_t));
    for (int p = 0; p < W; p++) s->restore_step[p] = m->step;
    const long rows = ckpt_rows(ck, "sync.ps_clocks");
    if (rows > 0) {
        long kv[2];   /* workers, updates */
        if (ckpt_state_read(m->sync_state, 2, STATE_KEYS, kv) != 0 || kv[0] != rows) {
            snprintf(r->err, sizeof r->err, "checkpoint's parameter-server state '%.64s' is malformed or does not match its %ld clocks",
                     m->sync_state, rows);
            return -1;
        }
        if (strcmp(m->optimizer, optim_kind_name(s->pcfg.opt.kind))) {
            snprintf(r->err, sizeof r->err, "checkpoint's server optimizer is '%s', not '%s'; resume with --server-opt %s",
                     m->optimizer, optim_kind_name(s->pcfg.opt.kind), m->optimizer);
            return -1;
        }
        int64_t *t = xcalloc((size_t)rows, sizeof(int64_t)), *st = xcalloc((size_t)rows, sizeof(int64_t)), sum_t = 0;
        for (long p = 0; p < rows; p++) {
            double v[2];
            if (ckpt_read_row64(ck, "sync.ps_clocks", p, v, 2) != 0 || v[0] < 0 || v[0] > 1e12 || v[1] < 0 || v[1] > 1e12 ||
                v[0] != (double)(int64_t)v[0] || v[1] != (double)(int64_t)v[1]) {
                snprintf(r->err, sizeof r->err, "checkpoint's sync.ps_clocks row %ld is not two integers in 0..1e12", p);
                free(t); free(st);
                return -1;
            }
            t[p] = (int64_t)v[0];
            st[p] = (int64_t)v[1];
            sum_t += t[p];
        }
        for (int p = 0; p < W; p++) {
            s->restore_clock[p] = rows == W ? t[p] : sum_t / rows;
            s->restore_step[p] = rows == W ? st[p] : m->step;
        }
        free(t); free(st);
        if (!r->is_worker) {
            s->restore_opt = optim_create(&s->pcfg.opt, r->model->nparams);
            optim_t *o = s->restore_opt;
            if ((o->velocity && ckpt_read_tensor(ck, "optim.velocity", o->velocity, o->n) != 0) ||
                (o->accum && ckpt_read_tensor(ck, "optim.accum", o->accum, o->n) != 0)) {
                snprintf(r->err, sizeof r->err, "checkpoint has no server optimizer state for --server-opt %s of %zu parameters",
                         optim_kind_name(o->cfg.kind), o->n);
                return -1;
            }
            s->restore.velocity = o->velocity;
            s->restore.accum = o->accum;
        }
    }
    if (!r->is_worker) {
        s->restore.clock = s->restore_clock;
        s->restore.step = s->restore_step;
        s->pcfg.restore = &s->restore;
        return 0;
    }
    /* the worker: its clock, its step, and the stamp of the model it starts from */
    int64_t mn = INT64_MAX;
    for (int p = 0; p < W; p++) if (s->restore_clock[p] < mn) mn = s->restore_clock[p];
    s->client->clock = s->restore_clock[r->wrank];
    for (int k = 0; k < s->pcfg.servers; k++) s->client->stamp[k] = mn;
    r->step = s->restore_step[r->wrank];
    if (s->pcfg.gate != GATE_ASP && r->step > 0) {
        s->resume_pull = 1;
        r->step--;   /* the pull takes one step */
    }
    if (r->step > r->total_steps) r->step = r->total_steps;
    batch_iter_seek(r->it, r->step);
    return 0;
}

int ps_sync_resume_pull(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    if (!s->resume_pull) return 0;
    s->resume_pull = 0;
    ps_pull_start(s->client, 0, r->model->params);
    ps_pull_wait(s->client, r->model->params);
    return 1;
}

int ps_sync_serve(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    if (r->mp_size == 1) return ps_server_run(r->comm, &s->pcfg, r->comm->rank, r->model->params, r->model->nparams);
    /* the initial key space: every partition's initial slice, end to end */
    const size_t n = r->model->full_nparams;
    float *keys = xalloc_floats(n);
    const model_t *m0 = r->model;
    size_t at = 0;
    for (int q = 0; q < r->mp_size; q++) {
        model_part_t part = { .index = q, .count = r->mp_size };
        model_t *mq = model_create_part(m0->spec, m0->in_c, m0->in_h, m0->in_w, m0->classes, 1, &part);
        model_init_params(mq, (uint64_t)r->cfg->seed);
        memcpy(keys + at, mq->params, mq->nparams * sizeof(float));
        at += mq->nparams;
        model_free(mq);
    }
    int rc = ps_server_run(r->comm, &s->pcfg, r->comm->rank, keys, n);
    free(keys);
    return rc;
}

float *ps_sync_eval_params(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    if (!s->eval) s->eval = xalloc_floats(r->model->nparams);   /* a worker that took over the lead */
    ps_pull_start(s->client, 1, s->eval);
    ps_pull_wait(s->client, s->eval);
    return s->eval;
}

void ps_sync_finish(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    ps_finish(s->client, r->evaluates, r->model->params);
}

void ps_sync_destroy(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    if (!s) return;
    ps_sync_release(s);
    free(s);
    r->sync_state = NULL;
}

void ps_sync_release(ps_sync_t *s)
{
    ps_client_free(s->client);
    ps_shm_close(s->pcfg.shm);
    optim_free(s->restore_opt);
    free(s->restore_clock);
    free(s->restore_step);
    free(s->clk64);
    free(s->eval);
}

sync_stop_mode_t ps_sync_stop_mode(const run_t *r) { return STOP_OWN_CLOCK; }

int ps_sync_lead_lost(const run_t *r)
{
    const ps_sync_t *s = r->sync_state;
    return s && s->client && s->client->lead_gone && !r->lead && r->mp_size == 1;
}

void ps_sync_announce_stop(run_t *r, int why)
{
    ps_sync_t *s = r->sync_state;
    if (s && s->client) ps_client_stop(s->client, why);
}

int ps_sync_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    ps_sync_t *s = r->sync_state;
    if (!s || !s->client || max < 9) return 0;
    const ps_stats_t *st = &s->client->stats;
    int n = 0;
    out[n++] = (sync_stat_t){ "staleness_mean", st->updates ? st->st_sum / (double)st->updates : 0, NULL };
    out[n++] = (sync_stat_t){ "staleness_max", (double)st->st_max, NULL };
    if (progress) return n;
    out[n++] = (sync_stat_t){ "staleness_min", (double)st->st_min, NULL };
    out[n++] = (sync_stat_t){ "server_updates", (double)st->updates, NULL };
    out[n++] = (sync_stat_t){ "evictions", (double)st->evicted, NULL };
    size_t at = 0;
    at += (size_t)snprintf(s->hist_json + at, sizeof s->hist_json - at, "[");
    for (int i = 0; i < PS_HIST; i++)
        at += (size_t)snprintf(s->hist_json + at, sizeof s->hist_json - at, "%s%lld", i ? "," : "", (long long)st->hist[i]);
    snprintf(s->hist_json + at, sizeof s->hist_json - at, "]");
    out[n++] = (sync_stat_t){ "staleness_hist", 0, s->hist_json };
    /* the clock gap c − m beside it: what SSP's bound s limits */
    out[n++] = (sync_stat_t){ "clock_gap_mean", st->updates ? st->gap_sum / (double)st->updates : 0, NULL };
    out[n++] = (sync_stat_t){ "clock_gap_max", (double)st->gap_max, NULL };
    out[n++] = (sync_stat_t){ "clock_gap_min", (double)st->gap_min, NULL };
    return n;
}
