/* What --sync lbfgs (one process) and --sync sandblaster share: the large
 * batch of L-BFGS iteration k and its portions, the gradient sum of one
 * portion, and Sandblaster's messages (docs/algorithms.md §10).
 *
 * Batch k is positions [k·BT, (k+1)·BT) (mod n) of one seeded permutation
 * of the training set; portion p of it is the PS positions from p·PS (the
 * last one may be shorter), so a portion's samples depend on (k, p) alone,
 * never on which replica computes it. P = ⌈BT / PS⌉ portions per batch.
 */
#ifndef DSGD_SB_H
#define DSGD_SB_H

#include <stdint.h>

#include "../../optim/lbfgs.h"
#include "../../ps/ps.h"
#include "../sync.h"

#define SB_MAX_PUSH 64       /* portions in one push (--push-portions) */

typedef struct sb_data {
    const dataset_t *d;
    int32_t *perm;           /* (n) the fixed order of the training set */
    long n, BT, PS;
    int P;                   /* portions per batch */
    int K;                   /* portions a replica sums per push */
    float *x;                /* (max_batch, dim) gathered samples */
    int32_t *y;              /* (max_batch) */
} sb_data_t;

/* BT, PS (auto: ⌈BT / (10·replicas)⌉), P; -1 with r->err on a bad flag. */
int  sb_data_init(sb_data_t *b, run_t *r, int replicas);
void sb_data_free(sb_data_t *b);
long sb_step_samples(run_t *r);
/* g = Σ over the samples of portion p of batch k of ∇loss at m->params
 * (n floats); returns the summed loss. Computed in chunks of m->max_batch. */
double sb_portion_grad(sb_data_t *b, model_t *m, long k, int p, float *g);
/* A single replica pushes after portion p when its group holds K portions,
 * and alone for the last portion (it flushes before it starts the last one,
 * which no peer can finish first): the one-process run sums in these groups
 * too, so the two add the same floats in the same order. */
static inline int sb_single_push_after(int p, int P, int K) { return (p + 1) % K == 0 || p >= P - 2; }

/* ---- Sandblaster's messages ---- */
typedef enum sb_tag {
    SB_OP = TAG_SB_BASE,     /* coordinator → shard: a vector operation (sb_op_t) */
    SB_REPLY,                /* shard → coordinator: partial dot product or pass report (sb_reply_t) */
    SB_BITMAP,               /* shard → coordinator: the portions it holds, after an eviction (P bytes) */
    SB_SLICE,                /* shard → coordinator: a slice of a vector (evaluation, end of run) */
    SB_REQ,                  /* replica → coordinator: a portion's result, a request for work, a push notice */
    SB_TASK,                 /* coordinator → replica: verdict on its last result and its next task */
    SB_FETCH,                /* replica → shard: X of a pass, please */
    SB_PARAMS,               /* shard → replica: its slice of X */
    SB_PUSH,                 /* replica → shard: gradient sum of whole portions, with their ids */
} sb_tag_t;

typedef enum sb_opcode {
    OP_DOT, OP_AXPY, OP_SCALE, OP_COPY,   /* the L-BFGS vector operations */
    OP_BEGIN,                /* a pass: GX = 0, forget the portions held; answer fetches of it */
    OP_END,                  /* report once every portion of the pass is held */
    OP_EVICT,                /* replica `who` is dead: ignore it from now on, report the portions held */
    OP_GET,                  /* send the slice of vector a */
    OP_PING,                 /* the coordinator is alive */
    OP_STOP,                 /* end of run (who = 1: a peer died, skip MPI_Finalize) */
} sb_opcode_t;

typedef struct sb_op {
    int32_t op, a, b, who;
    int64_t pass;
    double alpha;
} sb_op_t;

typedef struct sb_reply {
    double value;            /* OP_DOT: the slice's partial dot product */
    int64_t counted;         /* OP_END: portions held this pass */
    int64_t discarded;       /* pushes dropped as duplicates (whole run) */
    int64_t conflicts;       /* group pushes that repeated a held portion (must stay 0) */
} sb_reply_t;

typedef enum sb_req_kind { REQ_DONE, REQ_IDLE, REQ_NOTICE } sb_req_kind_t;
typedef struct sb_req {
    int32_t kind, portion;   /* REQ_DONE: the portion computed */
    int64_t pass;            /* the pass it belongs to (fetch: the pass wanted) */
    int64_t pushed;          /* portions this replica has pushed in the whole run */
    double loss;             /* REQ_DONE: summed loss of the portion */
} sb_req_t;

typedef enum sb_action { ACT_WORK, ACT_IDLE, ACT_STOP, ACT_KEEPALIVE } sb_action_t;
typedef enum sb_verdict { V_NONE, V_KEEP, V_DISCARD } sb_verdict_t;
#define SB_FLUSH_FIRST 1     /* push the held group before computing this portion */
#define SB_SOLO 2            /* reissued after a failure: push it alone */
#define SB_EVICTED 4         /* ACT_STOP to a replica declared dead that spoke again (it was frozen) */
typedef struct sb_task {
    int32_t action, verdict, portion, flags;
    int64_t pass, batch;
    int32_t peer_lost, pad;
} sb_task_t;

typedef struct sb_push_hdr {
    int64_t pass;
    int32_t replica, nids;
    int32_t ids[SB_MAX_PUSH];
} sb_push_hdr_t;

/* The shard loop (sb_shard.c): shard k = rank 1 + k. */
/* restore: a resumed run's slices of G, S_0..S_{m−1}, Y_0..Y_{m−1} end to
 * end ((2m + 1) · n floats), or NULL. */
int sb_shard_run(run_t *r, const sb_data_t *b, int k, const float *restore);

/* L-BFGS state in a checkpoint, shared by --sync lbfgs and sandblaster
 * (lbfgs_local.c): the scalars ρ_0..ρ_{m−1}, γ, f, t (F64
 * sync.lbfgs_scalars, into scalars: m + 3 doubles) and the ring position and
 * counters (sync_state); save also lists, in tensors and meta->extra, the
 * caller's vectors g (n), s and y (m rows of n each) as sync.lbfgs_g,
 * sync.lbfgs_s and sync.lbfgs_y, with the scalars. load: -1 with err set if the state is
 * malformed, out of range or of another --lbfgs-history; 0 (nothing read)
 * for a checkpoint of a paradigm other than lbfgs and sandblaster. */
void sb_lbfgs_save(const lbfgs_t *lb, double *scalars, const float *g, const float *sv, const float *yv, size_t n,
                   ckpt_tensor_t tensors[4], ckpt_meta_t *meta);
int  sb_lbfgs_load(lbfgs_t *lb, const ckpt_t *ck, double *scalars, char *err, size_t len);
/* Does the checkpoint hold L-BFGS state (lbfgs or sandblaster)? */
int  sb_lbfgs_in(const ckpt_t *ck);

#endif
