#include "gate.h"

#include <stdlib.h>

#include "../util/util.h"

void ps_gate_init(ps_gate_t *g, const ps_config_t *cfg)
{
    const size_t W = (size_t)cfg->workers;
    g->kind = cfg->gate;
    g->s_low = cfg->staleness;
    g->s_high = cfg->staleness_high;
    g->workers = cfg->workers;
    g->A_prev = xcalloc(W, sizeof(double));
    g->A_last = xcalloc(W, sizeof(double));
    g->r = xcalloc(W, sizeof(int64_t));
    g->granted = xcalloc(W, sizeof(int));
}

void ps_gate_free(ps_gate_t *g)
{
    free(g->A_prev);
    free(g->A_last);
    free(g->r);
    free(g->granted);
}

int ps_gate_open(const ps_gate_t *g, int p, int64_t t_p, int64_t t_min)
{
    if (g->kind == GATE_ASP) return 1;
    if (t_p - t_min <= g->s_low) return 1;
    return g->kind == GATE_DSSP && g->granted[p];
}

void ps_gate_answered(ps_gate_t *g, int p) { g->granted[p] = 0; }

/* DSSP's synchronization controller: how many more iterations r* in
 * [0, rmax] the fastest worker may run so that it stops closest to the
 * slowest worker's next push (docs/algorithms.md §6, J = 1). */
static int64_t dssp_controller(const ps_gate_t *g, int fast, int slow, int64_t rmax)
{
    if (g->A_prev[fast] <= 0 || g->A_prev[slow] <= 0) return 0;   /* fewer than two timestamps: SSP(s_L) */
    double If = g->A_last[fast] - g->A_prev[fast], Is = g->A_last[slow] - g->A_prev[slow];
    double Ts = g->A_last[slow] + Is, best = 1e300;
    int64_t arg = 0;
    for (int64_t k = 0; k <= rmax; k++) {
        double d = g->A_last[fast] + (double)k * If - Ts;
        if (d < 0) d = -d;
        if (d < best) { best = d; arg = k; }
    }
    return arg;
}

void ps_gate_pushed(ps_gate_t *g, int p, double now, int64_t t_p, int64_t t_min, int slow, int fast)
{
    g->A_prev[p] = g->A_last[p];
    g->A_last[p] = now;
    if (g->kind != GATE_DSSP) return;
    if (g->r[p] > 0) {
        g->r[p]--;
        g->granted[p] = 1;
    } else if (t_p - t_min <= g->s_low) {
        g->granted[p] = 1;
    } else if (p == fast) {
        /* At distance d = t[p] − t[slow] > s_L, r* granted iterations end
         * at distance d + r* − 1, so r* ≤ s_U − d + 1 keeps every
         * staleness ≤ s_U. On the first grant (d = s_L + 1) that is the
         * paper's r_max = s_U − s_L; capping it also on later grants is
         * what stops a worker that is always fastest from being granted
         * again and again past s_U. */
        int64_t d = t_p - t_min, room = g->s_high - d + 1;
        int64_t rmax = g->s_high - g->s_low;
        if (room < rmax) rmax = room;
        int64_t rstar = rmax > 0 ? dssp_controller(g, fast, slow, rmax) : 0;
        if (rstar > 0) { g->r[p] = rstar - 1; g->granted[p] = 1; }   /* "− 1": this push is the first */
    }
}
