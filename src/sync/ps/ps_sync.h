/* Shared state and helpers of the parameter-server paradigms (ps_common.c):
 * asp, ssp, dssp, bsp-ps (ssp.c) and downpour (downpour.c). */
#ifndef DSGD_PS_SYNC_H
#define DSGD_PS_SYNC_H

#include "../../ps/ps.h"
#include "../sync.h"

typedef struct ps_sync {
    ps_config_t pcfg;
    ps_client_t *client;     /* workers */
    float *eval;             /* (nparams) the lead's copy of the global model */
    char hist_json[PS_HIST * 24];  /* the staleness histogram, for the done event */
    /* Checkpoints from the shards, and resume (ps_common.c). */
    run_t *run;
    int resume_pull;         /* a resumed gated worker's first step only pulls (see ps_sync_resume) */
    optim_t *restore_opt;    /* servers: the server optimizer's state read from the checkpoint */
    int64_t *restore_clock, *restore_step;   /* (workers) */
    ps_restore_t restore;
    double *clk64;           /* (workers, 2) for the checkpoint */
} ps_sync_t;

int   ps_sync_layout(run_t *r);
int   ps_sync_init(run_t *r, ps_gate_kind_t gate, long warmup_steps);
/* The same for a paradigm that extends this state (its struct begins with
 * a ps_sync_t, r->sync_state points at it): sets up s in place. */
int   ps_sync_setup(run_t *r, ps_sync_t *s, ps_gate_kind_t gate, long warmup_steps);
int   ps_sync_serve(run_t *r);
float *ps_sync_eval_params(run_t *r);
void  ps_sync_finish(run_t *r);
void  ps_sync_destroy(run_t *r);
/* What ps_sync_setup allocated, freed (not s itself). */
void  ps_sync_release(ps_sync_t *s);
/* Take the servers' state back from a checkpoint (every rank; servers:
 * model, optimizer state, clocks; workers: their clock and step). */
int   ps_sync_resume(run_t *r, const ckpt_t *ck);
/* A gated worker's first step after a resume: a pull only (1), else 0. */
int   ps_sync_resume_pull(run_t *r);
int   ps_sync_stats(run_t *r, sync_stat_t *out, int max, int progress);
/* Workers run unsynchronized: a bounded run stops on their own clocks. */
sync_stop_mode_t ps_sync_stop_mode(const run_t *r);
/* The shards relay the lead's stop in their replies. */
void ps_sync_announce_stop(run_t *r, int why);
int  ps_sync_lead_lost(const run_t *r);

#endif
