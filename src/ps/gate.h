/* The consistency gate of a parameter-server shard (docs/algorithms.md
 * §4-§6): whether a worker's gated pull is answered now. The paradigm
 * chooses the rule (ps_config_t.gate); the shard tells the gate each
 * worker's clock (its pushes received) and the slowest live worker's, and
 * each push as it is applied. The gate keeps the state of its own rule.
 *
 *   ASP   always
 *   SSP   when the worker is at most s clocks ahead of the slowest
 *   DSSP  SSP with s = s_L, or when the synchronization controller granted
 *         the fastest worker extra iterations at its last push (up to s_U) */
#ifndef DSGD_PS_GATE_H
#define DSGD_PS_GATE_H

#include <stdint.h>

#include "ps.h"

typedef struct ps_gate {
    ps_gate_kind_t kind;
    int64_t s_low, s_high;   /* SSP: s = s_low; DSSP: s_L, s_U */
    int workers;
    double *A_prev, *A_last; /* (workers) DSSP: each worker's last two push times */
    int64_t *r;              /* (workers) DSSP: extra iterations still granted */
    int *granted;            /* (workers) DSSP: its next pull is answered regardless of s_L */
} ps_gate_t;

void ps_gate_init(ps_gate_t *g, const ps_config_t *cfg);
void ps_gate_free(ps_gate_t *g);
/* May worker p, at clock t_p, be answered while the slowest is at t_min? */
int ps_gate_open(const ps_gate_t *g, int p, int64_t t_p, int64_t t_min);
/* Worker p's gated pull was answered: a grant is used up. */
void ps_gate_answered(ps_gate_t *g, int p);
/* Worker p's push was applied at time now; t_p is its clock, t_min and
 * slow the slowest live worker's clock and index, fast the fastest's. */
void ps_gate_pushed(ps_gate_t *g, int p, double now, int64_t t_p, int64_t t_min, int slow, int fast);

#endif
