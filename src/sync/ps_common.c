/* What every parameter-server paradigm shares: roles (the first --servers
 * ranks are shards, the rest workers, worker 0 leads), the server loop, the
 * client, evaluation of the global model, statistics, and the end of a run. */
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
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
    if (*cfg->resume) {
        snprintf(r->err, sizeof r->err, "--resume is not supported for parameter-server paradigms yet (--sync %s)", cfg->sync);
        return -1;
    }
    r->is_worker = r->comm->rank >= S;
    r->nworkers = N - S;
    r->wrank = r->is_worker ? r->comm->rank - S : 0;
    r->lead = r->comm->rank == S;
    return 0;
}

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

int ps_sync_init(run_t *r, ps_gate_kind_t gate, long warmup_steps)
{
    const config_t *cfg = r->cfg;
    ps_sync_t *s = xcalloc(1, sizeof *s);
    r->sync_state = s;
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
    ps_client_free(s->client);
    free(s->local_acc);
    free(s->acc_sent);
    free(s->eval);
    free(s);
    r->sync_state = NULL;
}

sync_stop_mode_t ps_sync_stop_mode(const run_t *r) { return STOP_OWN_CLOCK; }

void ps_sync_announce_stop(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    ps_client_stop(s->client);
}

int ps_sync_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    ps_sync_t *s = r->sync_state;
    if (!s || !s->client || max < 6) return 0;
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
    return n;
}
