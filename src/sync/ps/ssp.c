/* --sync asp | ssp | dssp | bsp-ps: SGD through the parameter server under
 * one consistency gate (docs/algorithms.md §4–§6; the gates are in ps/gate.c).
 *
 * Worker, every step:  g = ∇ at the parameters of the last pull (stamped m)
 *                      push g to every shard (clock c → c + 1)
 *                      pull the parameters through the gate
 * Shard, on a push:    record staleness c − m; apply g with the server-side
 *                      optimizer (--server-opt, default: --optimizer) at the
 *                      worker's learning rate for that step.
 *
 *   bsp-ps  staleness 0: every pull waits for every worker's push (BSP)
 *   ssp     --staleness s: the fastest worker may be s clocks ahead
 *   dssp    --staleness-low s_L --staleness-high s_U: SSP(s_L) plus extra
 *           iterations the controller grants the fastest worker
 *   asp     no gate
 * With one worker every variant is plain SGD (tested against --sync none). */
#include <string.h>

#include "ps_sync.h"

static int gate_of(const run_t *r, ps_gate_kind_t *g)
{
    const char *n = r->cfg->sync;
    *g = !strcmp(n, "asp") ? GATE_ASP : !strcmp(n, "dssp") ? GATE_DSSP : GATE_SSP;
    return 0;
}

static int ssp_init(run_t *r)
{
    ps_gate_kind_t g;
    gate_of(r, &g);
    if (ps_sync_init(r, g, 0) != 0) return -1;
    if (!strcmp(r->cfg->sync, "bsp-ps")) ((ps_sync_t *)r->sync_state)->pcfg.staleness = 0;
    return 0;
}

static int ssp_step(run_t *r)
{
    ps_sync_t *s = r->sync_state;
    if (ps_sync_resume_pull(r)) return 0;
    ps_push_start(s->client, r->model->grads, r->lr, r->step + 1);
    ps_pull_start(s->client, 0, r->model->params);
    ps_pull_wait(s->client, r->model->params);
    return 0;
}

#define PS_OPS(NAME, HELP, OPTIONS) {                                                  \
        .name = NAME, .help = HELP, .options = OPTIONS, .layout = ps_sync_layout, .init = ssp_init, \
        .step = ssp_step, .serve = ps_sync_serve, .finish = ps_sync_finish,    \
        .destroy = ps_sync_destroy, .stats = ps_sync_stats,                   \
        .eval_params = ps_sync_eval_params, .stop_mode = ps_sync_stop_mode, \
        .resume = ps_sync_resume,                                            \
        .announce_stop = ps_sync_announce_stop, .lead_lost = ps_sync_lead_lost }

static const char *const ps_options[] = { SYNC_PS_OPTIONS, NULL };
static const char *const ssp_options[] = { SYNC_PS_OPTIONS, "staleness", NULL };
static const char *const dssp_options[] = { SYNC_PS_OPTIONS, "staleness-low", "staleness-high", NULL };
const sync_ops_t sync_asp = PS_OPS("asp", "parameter server, no staleness bound", ps_options);
const sync_ops_t sync_ssp = PS_OPS("ssp", "parameter server, staleness bound --staleness", ssp_options);
const sync_ops_t sync_dssp = PS_OPS("dssp", "parameter server, staleness bound chosen per iteration in [s_L, s_U]", dssp_options);
const sync_ops_t sync_bsp_ps = PS_OPS("bsp-ps", "parameter server, every step waits for every worker", ps_options);
