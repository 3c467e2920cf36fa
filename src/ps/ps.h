/* ps — a sharded parameter server over MPI point-to-point messages.
 *
 * The first S ranks are server shards; shard k owns the contiguous slice
 * [lo_k, lo_k + n_k) of the flat parameter vector (balanced by size), the
 * server-side optimizer state of that slice, and a clock per worker. Workers
 * push gradients and pull parameters of the whole vector, to all shards in
 * parallel, with nonblocking calls and an explicit wait (ps-lite's shape: a
 * consistency model is a policy about when a pull is answered).
 *
 * Clocks and staleness. A worker's clock c is the number of pushes it has
 * made. Every parameter reply is stamped with m = the minimum clock over the
 * live workers: every update with timestamp < m is included. A gradient
 * computed at clock c on parameters stamped m is c − m clocks behind (the
 * clock gap, which SSP bounds). Its staleness, as the asynchronous-SGD
 * papers count it, is the number of updates the shard applied to its slice
 * between the reply the worker computed on (each reply carries the slice's
 * version: updates applied so far) and this push; the shard records both
 * when it applies the push. The gate that answers a pull from a
 * worker whose clock (after its push) is t:
 *   asp       always                     (staleness unbounded)
 *   ssp s     t − min_t ≤ s              (0 ≤ c − m ≤ s; s = 0 is BSP)
 *   dssp      SSP(s_L) plus extra iterations granted at push time by the
 *             synchronization controller, bounded by s_U
 * (each gate's exact rule: docs/algorithms.md §4–§6)
 *
 * Key ranges. A worker may own only part of the vector (a rank of a
 * model-parallel replica pushes and pulls only the slices it holds): it
 * sets its range [klo, klo + kn) once, and every message carries the part
 * of the shard's slice it covers (possibly empty, so that clocks and
 * liveness stay the same at every shard).
 *
 * Failure: a worker silent for more than the timeout (no message, no pull
 * waiting) is evicted: its clock no longer holds anyone back, and the shard
 * tells it so (PS_EVICTED). A worker that was frozen, not dead, reads that
 * at its next wait, stops training and says it is done (PS_DONE): it then
 * ends with the others, who learn from the final statistics that every
 * evicted worker came back (no peer lost). A shard that does not answer
 * makes the worker stop the job with a message naming it.
 */
#ifndef DSGD_PS_H
#define DSGD_PS_H

#include <stddef.h>
#include <stdint.h>

#include "../comm/comm.h"
#include "../optim/optim.h"
#include "shm.h"

typedef enum ps_tag {
    PS_PUSH = TAG_PS_BASE,   /* worker → shard: gradient slice */
    PS_PULL,                 /* worker → shard: parameters, through the gate */
    PS_PARAMS,               /* shard → worker: reply to a pull */
    PS_EVAL_PULL,            /* worker → shard: parameters now, no gate */
    PS_EVAL_PARAMS,          /* shard → worker: reply to an eval pull, with statistics */
    PS_DONE,                 /* worker → shard: finished its steps */
    PS_FINAL,                /* shard → lead worker: final slice and statistics */
    PS_KEEPALIVE,            /* shard → lead worker: still waiting for others */
    PS_STOP,                 /* worker → shard: the run's target is reached, or it is preempted (stop); tell every worker */
    PS_SNAP,                 /* shard → shard 0: its slice and optimizer state for a checkpoint */
    PS_EVICTED,              /* shard → worker: you were evicted (stamp: your step then; silent_s: why) */
    PS_PUSH_DATA,            /* worker → shard: a push's gradient, after its header (PS_PUSH) */
} ps_tag_t;

typedef enum ps_gate_kind { GATE_ASP, GATE_SSP, GATE_DSSP } ps_gate_kind_t;

#define PS_HIST 33           /* staleness histogram: 0..31 and ≥ 32 */

/* Running statistics of one shard, sent with eval and final replies. */
typedef struct ps_stats {
    int64_t updates;         /* pushes applied */
    int64_t st_min, st_max;  /* staleness: updates applied between the reply computed on and the push */
    double st_sum;
    int64_t hist[PS_HIST];
    int64_t gap_min, gap_max;/* clock gap c − m */
    double gap_sum;
    int32_t evicted;         /* workers evicted so far */
    int32_t evicted_list[8]; /* their worker indices (first 8) */
    int32_t returned;        /* evicted workers heard from again (frozen, not dead): they finish with the others */
} ps_stats_t;

/* The fixed header in front of every message's float payload. */
typedef struct ps_hdr {
    int32_t worker;          /* sender's worker index (worker → shard) */
    int32_t stop;            /* COMM_STOP_*: PS_STOP's reason; in a reply, every worker is asked to stop */
    int64_t clock;           /* push: worker clock c before this push; pull: clock after */
    int64_t stamp;           /* push: stamp of the parameters used; reply: min clock m */
    int64_t step;            /* push: the worker's step count after this push */
    float lr;                /* push: learning rate for this update */
    float silent_s;          /* PS_EVICTED: the silence, in seconds, that got the worker evicted */
    int64_t off, cnt;        /* the sender's part of the shard's slice: [off, off + cnt) */
    /* the shared-memory path (shm.h) */
    int64_t read;            /* worker → shard: replies it has read out of the shard's pool */
    int64_t applied;         /* reply: this worker's pushes the shard has applied */
    int64_t version;         /* reply: updates applied to the slice so far; push: the version the gradient was computed on */
    int32_t buf;             /* push: >= 0, the gradient is in the worker's slot; reply: the
                              * pool buffer holding the parameters; -1: in this message */
    int32_t pad;
    ps_stats_t stats;        /* eval and final replies */
} ps_hdr_t;

/* Checkpoints come from the shards, not from any worker: shard k sends its
 * slice and the slice's optimizer state to shard 0, which assembles the
 * full vectors and hands them, with its per-worker clocks, to on_snapshot.
 * A periodic snapshot is taken by each shard when the sum of the workers'
 * step counts it has seen crosses a multiple of snap_every × workers (under
 * BSP every worker is then at the same step; otherwise each shard's slice
 * holds the pushes it had received by then); a final one once every worker
 * is done or evicted. */
typedef struct ps_snapshot {
    const float *params;         /* (nparams) */
    const float *velocity;       /* (nparams) the server optimizer's, or NULL */
    const float *accum;          /* (nparams) or NULL */
    const int64_t *clock;        /* (workers) pushes received from each worker, at shard 0 */
    const int64_t *step;         /* (workers) each worker's step count, at shard 0 */
    int64_t updates;             /* pushes applied (by shard 0), resumed runs' included */
    int final;
} ps_snapshot_t;

/* A resumed run's server state (full vectors; each shard takes its slice). */
typedef struct ps_restore {
    const float *velocity, *accum;   /* (nparams) or NULL: the optimizer starts from zero */
    const int64_t *clock, *step;     /* (workers) */
} ps_restore_t;

typedef struct ps_config {
    int servers;                 /* S */
    int workers;                 /* W = world − S */
    ps_gate_kind_t gate;
    long staleness;              /* ssp s (0: BSP); dssp s_L */
    long staleness_high;         /* dssp s_U */
    long warmup_steps;           /* Downpour warm start: worker 0 trains this many steps alone */
    int replica_size;            /* workers [0, replica_size) form worker 0's replica: they train together */
    optim_cfg_t opt;             /* server-side optimizer */
    float fixed_lr;              /* > 0: the server uses this rate (Adagrad γ), not the pushed one */
    double timeout_s;
    long snap_every;             /* > 0: periodic snapshots (see ps_snapshot_t) */
    int snap_final;              /* a snapshot when the run ends */
    /* called on shard 0; -1: the checkpoint could not be written (the
     * callback has said why on stderr): the shard writes no more and asks
     * every worker to stop (COMM_STOP_SAVE_FAILED) */
    int (*on_snapshot)(void *ctx, const ps_snapshot_t *snap);
    void *snap_ctx;
    const ps_restore_t *restore; /* a resumed run's state, or NULL */
    struct ps_shm *shm;          /* the host's shared window (ps_shm_open), or NULL: messages only */
} ps_config_t;

/* Slice of shard k: [lo, lo + n). */
void ps_shard_range(size_t nparams, int servers, int k, size_t *lo, size_t *n);
/* A message is a header followed by cnt floats (or, through the host's
 * shared memory, shm.h, a header alone). The two need not be
 * adjacent in memory: this committed datatype describes both at their
 * absolute addresses (use it with MPI_BOTTOM and count 1), so payloads go
 * from and to the caller's vectors without a copy. Its signature is plain
 * bytes, the same as a contiguous buffer of header + payload. Free it after
 * starting the call (MPI keeps it alive until the call completes).
 * Sending the header and then the slice as a separate contiguous message
 * was tried: the transports then move the slice in one copy, the receiver
 * reading the sender's memory (CMA), which lowered push+pull / bare
 * send+receive by about 0.1 in make bench. But MPICH over UCX 1.13 aborts the
 * receiving shard when that read finds the sender dead, so a worker dying
 * with a push in flight killed the run (tests/decentral.sh, easgd with a
 * dead peer); the one-message form goes through bounce fragments, and a
 * dead sender just leaves it incomplete. */
MPI_Datatype ps_msg_type(const ps_hdr_t *h, const float *data, size_t cnt);

/* ---- server (server.c) ---- */
/* Run shard `k` (this rank) until every worker is done or evicted; params
 * holds the initial full vector (only the slice is used). Returns 0. */
int ps_server_run(comm_t *c, const ps_config_t *cfg, int k, const float *params, size_t nparams);

/* ---- client (client.c) ---- */
typedef struct ps_client {
    comm_t *comm;
    const ps_config_t *cfg;
    int worker;                  /* this worker's index */
    size_t nparams;
    size_t *lo, *n;              /* (servers) slices */
    size_t klo, kn;              /* this worker's key range (default: all) */
    size_t *off, *cnt;           /* (servers) its part of each slice, shard-relative */
    ps_hdr_t *shdr;              /* (servers) push headers (payloads go from the caller's vector) */
    ps_hdr_t *rhdr;              /* (servers) reply headers */
    ps_hdr_t *qhdr;              /* (servers) pull requests (header only) */
    float *rbuf;                 /* (kn) replies land here when they cannot go to their destination directly */
    float *pull_into;            /* where the pending pull lands: the caller's vector or rbuf */
    MPI_Request *push_req;       /* (servers) */
    MPI_Request *pull_req;       /* (2·servers): request sends and reply receives */
    int push_active, pull_active, pull_tag;
    int64_t clock;               /* pushes made */
    int64_t *stamp;              /* (servers) stamp of the last reply from each shard */
    int64_t *version;            /* (servers) its slice's version */
    ps_stats_t stats;            /* merged statistics of the last eval/final reply */
    int lead_gone;               /* the shards evicted every worker below this one: it leads now */
    /* the shared-memory path, per shard (NULL slot: messages) */
    float **slot;                /* (servers) this worker's slot for each shard */
    int64_t *read;               /* (servers) replies read out of each shard's pool */
    int64_t *applied;            /* (servers) this worker's pushes each shard last said it applied */
    int64_t *slot_until;         /* (servers) the clock after the last push through the slot (0: none) */
    /* the reply to a push through the slot, copied while the shard computes it (shm.h, progress) */
    uint64_t *guess_tag;         /* (servers) the push's tag; 0: no guess */
    int *guess_buf;              /* (servers) the pool buffer being copied from; −1: not found yet */
    size_t *guess_done;          /* (servers) chunks copied */
    int guessing;                /* some shard has a guess */
    int lost_set;                /* comm->peer_lost was set from the shards' statistics */
} ps_client_t;

ps_client_t *ps_client_create(comm_t *c, const ps_config_t *cfg, int worker, size_t nparams);
void ps_client_free(ps_client_t *pc);
/* Own only keys [klo, klo + kn): vectors passed to push/pull/finish are then
 * that range (index 0 = key klo). */
void ps_client_set_range(ps_client_t *pc, size_t klo, size_t kn);
/* Push g (the worker's range; each shard gets its part) applied with rate lr.
 * By message g is sent from where it is, not copied: it must not change
 * until the push is complete (ps_push_wait, which the next push and every
 * ps_pull_wait call first). Through shared memory it is copied into the
 * worker's slot before this returns. */
void ps_push_start(ps_client_t *pc, const float *g, float lr, int64_t step);
void ps_push_wait(ps_client_t *pc);
/* Pull through the gate (eval = 0) or at once with statistics (eval = 1).
 * into != NULL: the parameters land in that vector directly, which the
 * caller neither reads nor writes until ps_pull_wait(pc, into); NULL: they
 * land in a buffer of the client's and ps_pull_wait copies them out (for a
 * caller that keeps computing on its vector meanwhile). */
void ps_pull_start(ps_client_t *pc, int eval, float *into);
/* Wait for the pull (and any push still in flight); the parameters are then
 * in params (which must be the pull's `into` if one was given). */
void ps_pull_wait(ps_client_t *pc, float *params);
/* Tell every shard why the job stops (why: COMM_STOP_*): for the target
 * (the lead) or a preemption (any worker), every shard tells every worker
 * in its replies (a worker sees it as comm->stop_heard); for a divergence,
 * the shards write no checkpoint from then on. */
void ps_client_stop(ps_client_t *pc, int why);
/* Tell every shard this worker is done, then wait for the shards' final
 * message (sent once every worker is done or evicted): the lead worker takes
 * the final parameters and statistics (into params and pc->stats); every
 * worker learns whether a peer was evicted (comm->peer_lost). */
void ps_finish(ps_client_t *pc, int lead, float *params);

#endif
