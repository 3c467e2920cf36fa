/* Shared state and helpers of the parameter-server paradigms (ps_common.c):
 * asp, ssp, dssp, bsp-ps (ssp.c) and downpour (downpour.c). */
#ifndef DSGD_PS_SYNC_H
#define DSGD_PS_SYNC_H

#include "../ps/ps.h"
#include "sync.h"

typedef struct ps_sync {
    ps_config_t pcfg;
    ps_client_t *client;     /* workers */
    float *eval;             /* (nparams) the lead's copy of the global model */
    float *local_acc;        /* downpour: gradients accumulated since the last push */
    float *acc_sent;         /* downpour: the accumulator of the push in flight (sent without a copy) */
    long since_push;
    char hist_json[PS_HIST * 24];  /* the staleness histogram, for the done event */
} ps_sync_t;

int   ps_sync_layout(run_t *r);
int   ps_sync_init(run_t *r, ps_gate_kind_t gate, long warmup_steps);
int   ps_sync_serve(run_t *r);
float *ps_sync_eval_params(run_t *r);
void  ps_sync_finish(run_t *r);
void  ps_sync_destroy(run_t *r);
int   ps_sync_stats(run_t *r, sync_stat_t *out, int max, int progress);
/* Workers run unsynchronized: a bounded run stops on their own clocks. */
sync_stop_mode_t ps_sync_stop_mode(const run_t *r);
/* The shards relay the lead's stop in their replies. */
void ps_sync_announce_stop(run_t *r);

#endif
