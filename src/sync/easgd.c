/* --sync easgd: elastic averaging SGD (Zhang, Choromanska, LeCun 2015;
 * docs/algorithms.md §7). α = ηρ (--alpha, default 0.9/N so that
 * β = Nα = 0.9).
 *
 * Asynchronous (--easgd-mode async, default): the center variable x̃ lives on
 * the parameter-server shards (--servers S). Worker i, every step t:
 *     x = x_i                                snapshot; g = ∇(x) was taken there
 *     if t % τ == 0:  read x̃;  d = α (x − x̃);  x_i −= d;  shards: x̃ += d
 *     x_i −= η g(x)                          (the local optimizer step)
 * The shards add d by applying it as a "gradient" with rate −1 and plain SGD.
 * EAMSGD (--momentum-nesterov δ): the same elastic step, then a Nesterov
 * momentum step with δ as the local optimizer.
 *
 * Synchronous (--easgd-mode sync): no server; every τ steps, with x̄ the
 * mean of the workers' x_i (all-reduce) and x̃ replicated on every rank:
 *     x_i −= α (x_i − x̃);   x̃ = (1 − β) x̃ + β x̄   (β = Nα), then the local step.
 *
 * The model evaluated and saved is the center variable x̃. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "ps/ps_sync.h"

typedef struct easgd_sync {
    ps_sync_t ps;            /* async: the shards and client; must stay first */
    int sync_mode;
    float alpha;
    float *center;           /* (n) x̃: a fetched copy (async) or the replica (sync) */
    float *diff;             /* (n) d = α (x − x̃) */
    sync_rows_t rows;        /* sync: every worker's state, gathered for a checkpoint */
} easgd_t;

/* the checkpoint's sync_state */
static const ckpt_key_t STATE_KEYS[] = { { "workers", 1, INT_MAX } };   /* the checkpoint's sync_state */

static int is_sync(const run_t *r) { return !strcmp(r->cfg->easgd_mode, "sync"); }

static int easgd_layout(run_t *r)
{
    if (strcmp(r->cfg->easgd_mode, "sync") && strcmp(r->cfg->easgd_mode, "async")) {
        snprintf(r->err, sizeof r->err, "unknown --easgd-mode '%s'; choose async or sync", r->cfg->easgd_mode);
        return -1;
    }
    /* EAMSGD steps with Nesterov δ, not --optimizer: its state comes back through easgd_resume */
    r->own_opt_resume = r->cfg->momentum_nesterov > 0;
    return is_sync(r) ? sync_layout_all_workers(r) : ps_sync_layout(r);
}

static int easgd_init(run_t *r)
{
    const config_t *cfg = r->cfg;
    easgd_t *e = xcalloc(1, sizeof *e);
    r->sync_state = e;
    if (!is_sync(r)) {   /* the shards and the client, in e->ps */
        if (ps_sync_setup(r, &e->ps, GATE_ASP, 0) != 0) return -1;
        e->ps.pcfg.opt = (optim_cfg_t){ .kind = OPT_SGD };   /* x̃ += d: plain addition */
        e->ps.pcfg.fixed_lr = 0;
    }
    e->sync_mode = is_sync(r);
    e->alpha = cfg->alpha > 0 ? (float)cfg->alpha : 0.9f / (float)r->nworkers;
    const size_t n = r->model->nparams;
    if (r->is_worker) {
        e->center = xalloc_floats(n);
        e->diff = xalloc_floats(n + r->model->nstate);
        memcpy(e->center, r->model->params, n * sizeof(float));
        if (cfg->momentum_nesterov > 0) {   /* EAMSGD: Nesterov momentum δ as the local step */
            optim_cfg_t oc = r->opt->cfg;
            oc.kind = OPT_NESTEROV;
            oc.momentum = (float)cfg->momentum_nesterov;
            optim_free(r->opt);
            r->opt = optim_create(&oc, n);
        }
    }
    return e->sync_mode ? sync_bcast_params(r) : 0;
}

static int easgd_step(run_t *r)
{
    easgd_t *e = r->sync_state;
    model_t *m = r->model;
    const size_t n = m->nparams;
    float *x = m->params;
    if (r->step % r->cfg->tau == 0) {
        if (e->sync_mode) {
            /* x̄ = mean x_i (before the elastic move), into diff; the
             * workers' batch-norm statistics (the state after x) become
             * their mean, the centre's statistics */
            const size_t ns = m->nstate;
            memcpy(e->diff, x, (n + ns) * sizeof(float));
            comm_allreduce_sum(r->comm, e->diff, n + ns, "the EASGD average");
            const float inv = 1.0f / (float)r->nworkers, beta = e->alpha * (float)r->nworkers;
            for (size_t i = 0; i < ns; i++) m->state[i] = e->diff[n + i] * inv;
            for (size_t i = 0; i < n; i++) {
                float xbar = e->diff[i] * inv;
                x[i] -= e->alpha * (x[i] - e->center[i]);
                e->center[i] = (1.0f - beta) * e->center[i] + beta * xbar;
            }
        } else {
            ps_pull_start(e->ps.client, 0, e->center);
            ps_pull_wait(e->ps.client, e->center);
            for (size_t i = 0; i < n; i++) {
                e->diff[i] = e->alpha * (x[i] - e->center[i]);
                x[i] -= e->diff[i];
            }
            ps_push_start(e->ps.client, e->diff, -1.0f, r->step + 1);   /* shards: x̃ −= (−1)·d */
        }
    }
    optim_step(r->opt, x, m->grads, 0, n, r->lr);
    return 0;
}

static float *easgd_eval_params(run_t *r)
{
    easgd_t *e = r->sync_state;
    return e->sync_mode ? e->center : ps_sync_eval_params(r);
}

static void easgd_finish(run_t *r)
{
    easgd_t *e = r->sync_state;
    if (e->sync_mode) memcpy(r->model->params, e->center, r->model->nparams * sizeof(float));
    else ps_sync_finish(r);   /* the lead receives the final x̃ */
}

static void easgd_destroy(run_t *r)
{
    easgd_t *e = r->sync_state;
    if (!e) return;
    sync_rows_free(&e->rows);
    free(e->center);
    free(e->diff);
    ps_sync_release(&e->ps);
    free(e);
    r->sync_state = NULL;
}

/* sync: the checkpoint's model is the center x̃ (mid-run too), and every
 * worker's x_i and optimizer state go in as sync.worker_* rows, so a resume
 * continues bit for bit. (async: the shards write the center; see ps_common.c.) */
static int easgd_ckpt_state(run_t *r, ckpt_meta_t *meta)
{
    easgd_t *e = r->sync_state;
    if (!e->sync_mode) return 0;
    sync_worker_rows_add(r, &e->rows);
    sync_rows_meta(r, &e->rows, meta);
    meta->params = e->center;
    ckpt_state_write(meta->sync_state, sizeof meta->sync_state, 1, STATE_KEYS, (long[]){ r->nworkers });
    return 0;
}

/* async: the center, its clocks, from the shards' checkpoint (ps_sync_resume);
 * every worker starts from the center. sync: the center is the checkpoint's
 * model; each worker takes back its x_i and optimizer state (same worker
 * count; a checkpoint of another paradigm starts every x_i at its model). */
static int easgd_resume(run_t *r, const ckpt_t *ck)
{
    easgd_t *e = r->sync_state;
    if (!e->sync_mode) {
        if (ps_sync_resume(r, ck) != 0) return -1;
        if (r->is_worker) memcpy(e->center, r->model->params, r->model->nparams * sizeof(float));
        return 0;
    }
    const ckpt_meta_t *m = &ck->meta;
    if (strcmp(m->sync, "easgd") || !ckpt_rows(ck, "sync.worker_params")) return 0;
    long workers;
    if (sync_state_load(r, m, 1, STATE_KEYS, &workers, "the EASGD local models") != 0) return -1;
    return sync_worker_rows_read(r, ck);
}

static sync_stop_mode_t easgd_stop_mode(const run_t *r) { return is_sync(r) ? STOP_AGREE : STOP_OWN_CLOCK; }

/* async: the shards relay the stop in their replies to the pulls of x̃ */
static void easgd_announce_stop(run_t *r, int why)
{
    easgd_t *e = r->sync_state;
    if (!e->sync_mode && e->ps.client) ps_client_stop(e->ps.client, why);
}

static int easgd_stats(run_t *r, sync_stat_t *out, int max, int progress)
{
    easgd_t *e = r->sync_state;
    if (!e || e->sync_mode || max < 1) return 0;
    out[0] = (sync_stat_t){ "center_updates", (double)e->ps.client->stats.updates, NULL };
    return 1;
}

const sync_ops_t sync_easgd = {
    .name = "easgd",
    .help = "elastic averaging SGD (async through the parameter server, or sync)",
    .options = (const char *const[]){ SYNC_PS_OPTIONS, "tau", "alpha", "momentum-nesterov", "easgd-mode", NULL },
    .layout = easgd_layout,
    .init = easgd_init,
    .step = easgd_step,
    .serve = ps_sync_serve,
    .finish = easgd_finish,
    .destroy = easgd_destroy,
    .stats = easgd_stats,
    .eval_params = easgd_eval_params,
    .ckpt_state = easgd_ckpt_state,
    .resume = easgd_resume,
    .stop_mode = easgd_stop_mode,
    .announce_stop = easgd_announce_stop,
};
