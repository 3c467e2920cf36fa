/* sync — the paradigm interface. A paradigm is one file that decides what to
 * communicate after each local gradient; adding one is one file plus one row
 * in the table in registry.c. No paradigm copies the worker loop (train.c):
 *
 *   next batch → forward → backward → ops->step → metrics → maybe eval/checkpoint
 *
 * run_t is the state a paradigm sees: the model with its flat parameter and
 * gradient vectors, the optimizer, the MPI context and the configuration.
 */
#ifndef DSGD_SYNC_H
#define DSGD_SYNC_H

#include "../comm/comm.h"
#include "../data/augment.h"
#include "../data/data.h"
#include "../nn/model.h"
#include "../optim/optim.h"
#include "../run/checkpoint.h"
#include "../run/config.h"
#include "../run/faults.h"

typedef struct sync_ops sync_ops_t;

/* How the workers of a paradigm agree to stop a bounded run (--time-limit,
 * --target-acc; train/bounds.c). */
typedef enum sync_stop_mode {
    STOP_AGREE,      /* lockstep workers: a flag all-reduce after every step (the default) */
    STOP_OWN_CLOCK,  /* asynchronous workers: each its clock since the common start; the lead's message for a target */
    STOP_LEAD,       /* only the lead runs the loop (Sandblaster's coordinator) */
} sync_stop_mode_t;

/* A figure a paradigm reports: in progress lines and the done event. */
typedef struct sync_stat {
    const char *key;
    double value;
    const char *raw;      /* if set: a JSON value written instead of `value` (done event only) */
} sync_stat_t;

typedef struct run {
    const config_t *cfg;
    comm_t *comm;
    const sync_ops_t *ops;
    void *sync_state;        /* owned by the paradigm */
    model_t *model;
    optim_t *opt;
    lr_sched_t sched;
    dataset_t train, test;
    int nworkers, wrank;     /* workers in the run, this rank's worker index (set by layout) */
    int32_t *part;           /* this rank's sample indices */
    long part_n;
    batch_iter_t *it;
    long step;               /* completed steps */
    long steps_per_epoch, total_steps;
    float lr;                /* learning rate of the current step */
    float loss;              /* loss of the current batch */
    faults_t *faults;        /* this worker's --slowdown and --fail (set up before init) */
    int is_worker;           /* runs the worker loop (else ops->serve) */
    int lead;                /* evaluates, prints and writes metrics/checkpoints */
    int server_ckpt;         /* set by layout: the server shards hold the global model and optimizer
                                state and write the checkpoints (the lead writes none); a resume
                                restores the workers' model only, and ops->resume the rest */
    int own_opt_resume;      /* set by layout: the optimizer the loop steps is not --optimizer's (EAMSGD),
                                so a resume restores the model only and ops->resume the optimizer state */
    /* Model parallelism (--model-parallel M): a replica is M consecutive
     * worker ranks. Data and batches follow the replica; layout's
     * nworkers/wrank still count worker ranks. M = 1: replica = wrank. */
    int replica, replicas;   /* this rank's replica, and how many */
    int mp_index, mp_size;   /* this rank's partition p of M */
    int evaluates;           /* takes part in evaluation: the lead's replica */
    int left;                /* evicted: it has said so and stopped (train.c) */
    comm_t *dp;              /* data-parallel peers: the ranks holding the same partition (= comm when M = 1) */
    comm_t mp_comm, dp_comm; /* owned groups when M > 1 */
    const comm_t *own_comm;  /* a group the paradigm opened for itself (bsp --sync-bn), or NULL:
                              * its time and traffic count as this rank's communication */
    struct comm_mp *mp;      /* the gather/sum hooks of the model (M > 1) */
    model_t *full;           /* the lead's unpartitioned model for checkpoints (M > 1) */
    optim_t *full_opt;
    augment_t aug;           /* --augment */
    size_t *nodecay;         /* (2·nnodecay) spans weight decay skips (--weight-decay-bn 0), or NULL */
    int nnodecay;
    size_t *owners;          /* (3·n) the update's spans by thread (model_owner_spans), or NULL */
    char err[512];           /* setup error message, for comm_setup_check */
} run_t;

struct sync_ops {
    const char *name;            /* as given to --sync */
    const char *help;
    /* The options this paradigm takes (NULL-terminated; NULL: none): its
     * configuration line shows them even at their defaults, and --help
     * lists them under it. The paradigms with shards share SYNC_PS_OPTIONS. */
    const char *const *options;
    int  (*layout)(run_t *r);    /* roles of the ranks; may refuse a world size (-1, r->err set) */
    int  (*init)(run_t *r);      /* e.g. broadcast initial parameters */
    int  (*step)(run_t *r);      /* after backward: communicate and/or update */
    int  (*serve)(run_t *r);     /* non-worker ranks run this instead of the loop */
    void (*finish)(run_t *r);    /* flush, final sync (before the final evaluation) */
    void (*destroy)(run_t *r);   /* free sync_state, after the done event */
    /* Figures for progress lines (progress = 1) or the done event; returns
     * how many it wrote to out (at most max). */
    int  (*stats)(run_t *r, sync_stat_t *out, int max, int progress);
    /* The parameters to evaluate, if not the local replica (e.g. the
     * parameter server's global model); called on the lead rank only. */
    float *(*eval_params)(run_t *r);
    /* Set by paradigms whose step draws and processes its own samples (L-BFGS
     * over a large batch; Sandblaster's coordinator hands the batch out to
     * replicas): the loop then draws no batch and computes no gradient before
     * step (and applies no --fail/--slowdown: the paradigm does, to its own
     * workers), and one step counts this many training samples instead of
     * batch × workers. Called once the data is loaded. */
    long (*step_samples)(run_t *r);
    /* The paradigm's own state for a checkpoint, beyond the lead's model and
     * optimizer (e.g. every worker's local model): called on every worker
     * rank together; on the lead it sets meta->extra/nextra (buffers the
     * paradigm owns until the next call) and meta->sync_state. Taken before
     * finish for the final checkpoint, so a resumed run continues where the
     * loop stopped. */
    int  (*ckpt_state)(run_t *r, ckpt_meta_t *meta);
    /* After init, on every rank of a resumed run (servers included): take
     * that state back from the checkpoint; -1 with r->err set if it does not
     * fit the run. */
    int  (*resume)(run_t *r, const ckpt_t *ck);
    int model_parallel;          /* combines with --model-parallel M > 1 */
    /* Every large message of it meets a receive already posted, or posted
     * as it comes (its traffic is collectives, and the model partitions'
     * exchanges): comm_init may then let such messages go eagerly over TCP
     * (comm.h), which would only queue a shard's pushes unasked. */
    int posted_receives;
    /* How a bounded run stops (NULL: STOP_AGREE). */
    sync_stop_mode_t (*stop_mode)(const run_t *r);
    /* STOP_OWN_CLOCK: tell the job why it stops (why: COMM_STOP_*). The
     * lead, when the target is reached, and any worker, when the job is
     * preempted: the workers see it as comm->stop_heard (NULL: bounds.c
     * sends each a message for the target, which they probe for after every
     * step). COMM_STOP_DIVERGED: the servers write no checkpoint from now on
     * (the parameters have exploded; the lead is stopping the job). */
    void (*announce_stop)(run_t *r, int why);
    /* On a worker that does not lead: 1 when the lead worker has been lost
     * and this worker is next in line to take over the evaluations and the
     * metrics (parameter-server paradigms, whose shards evict dead workers). */
    int  (*lead_lost)(const run_t *r);
    /* Batch normalization's running statistics (model_t.state), on every
     * worker before each evaluation and checkpoint and before the final
     * evaluation, for paradigms whose workers are in lockstep there: bsp
     * makes every replica's statistics their mean. NULL: nothing. */
    void (*sync_bn)(run_t *r);
    /* eval_params' buffer carries the state vector after the parameters
     * (the average of gossip replicas): it is evaluated with that state. */
    int eval_has_state;
    /* On every worker before each evaluation during the run (and each
     * --eval-offline snapshot), for lockstep paradigms whose delivered
     * model takes a collective to assemble (localsgd: the workers' average,
     * into a buffer of its own; the trajectory is untouched). NULL: none. */
    void (*eval_prepare)(run_t *r);
    /* The evaluating rank's running statistics do not describe the model it
     * evaluates (Sandblaster's coordinator computes no batch; L-BFGS's line
     * search runs trial points): they are recomputed before each evaluation
     * and checkpoint, averaged over the first training batches at the
     * evaluated parameters. */
    int recalibrate_bn;
    /* Rank 0 is a coordinator and the other ranks that are not workers its
     * shards (Sandblaster): the header names the roles so. */
    int coordinator;
    /* Honours --sync-bn (bsp: batch normalization over every replica's
     * batch); other paradigms refuse the flag. */
    int takes_sync_bn;
};

/* Helpers shared by the collective paradigms (common.c). */
int  sync_layout_all_workers(run_t *r);      /* every rank is a worker; rank 0 leads */
int  sync_bcast_params(run_t *r);            /* rank 0's initial parameters to all */
/* dst := Σ_i weight_i · params_i over all ranks (weight 1/N: the mean),
 * and the state vector (batch-norm statistics) after them: dst holds
 * nparams + nstate floats, and may be r->model->params itself. */
void sync_average_params(run_t *r, float *dst, float weight, const char *what);

/* Every worker's state in a checkpoint, for the collective paradigms: each
 * vector is gathered on the lead (rank 0) as a [workers, n] tensor. Call
 * add/add64 on every worker in the same order, then meta (the lead's meta
 * then points at the tensors until the next checkpoint). On resume each
 * worker reads its own row (read: -1 with r->err set if it is absent or of
 * another shape). */
#define SYNC_ROWS_MAX 8
typedef struct sync_rows {
    void *buf[SYNC_ROWS_MAX];        /* lead: (workers, n) per tensor, kept between checkpoints */
    ckpt_tensor_t t[SYNC_ROWS_MAX];
    int nt;
} sync_rows_t;
/* The vectors a worker's optimizer step reads and writes: its parameters and
 * its optimizer's state ("sync.worker_params", "sync.worker_velocity",
 * "sync.worker_accum"); returns how many (at most 3). */
int  sync_worker_vectors(run_t *r, float **v, const char **names);
void sync_rows_add(run_t *r, sync_rows_t *sr, const char *name, const float *v, size_t n);
void sync_rows_add64(run_t *r, sync_rows_t *sr, const char *name, const double *v, size_t n);
void sync_rows_meta(const run_t *r, sync_rows_t *sr, ckpt_meta_t *meta);
/* What every checkpoint of this run says about it (step, seed, input
 * shape, classes, model, paradigm, optimizer), into *meta; the caller adds
 * its own state. */
void sync_ckpt_meta(const run_t *r, ckpt_meta_t *meta, long step, opt_kind_t optimizer);
void sync_rows_free(sync_rows_t *sr);
int  sync_rows_read(run_t *r, const ckpt_t *ck, const char *name, float *dst, size_t n);
/* A checkpoint's per-worker state (WHAT, e.g. "the local models") of
 * WORKERS workers resumes only on as many: 0, or -1 with r->err set. */
int  sync_same_workers(run_t *r, int workers, const char *what);
int  sync_rows_read64(run_t *r, const ckpt_t *ck, const char *name, double *dst, size_t n);
/* A worker's own vectors (sync_worker_vectors) and its model's state
 * ("sync.worker_state"), gathered as rows for a checkpoint / taken back
 * from one on resume (0, or -1 with r->err set). */
void sync_worker_rows_add(run_t *r, sync_rows_t *sr);
int  sync_worker_rows_read(run_t *r, const ckpt_t *ck);
/* The checkpoint's sync_state read by the paradigm's schema (checkpoint.h)
 * into vals: 0, or -1 with r->err naming WHAT (e.g. "the local models")
 * and the text. A key named "workers" must match this run's worker count. */
int  sync_state_load(run_t *r, const ckpt_meta_t *m, int n, const ckpt_key_t keys[], long vals[], const char *what);

/* Batch normalization's running statistics (model state) recomputed at
 * params (the model's own or another vector of nparams): the mean of the
 * batch means and unbiased variances over the first 2048 training samples,
 * in batches of the model's max_batch. For evaluators that compute no batch
 * of their own (Sandblaster's coordinator, a parameter-server shard writing
 * the checkpoint) or whose batches ran trial points (L-BFGS). */
void sync_bn_recalibrate(run_t *r, const float *params);

#define SYNC_PS_OPTIONS "servers", "server-opt", "adagrad-lr"

const sync_ops_t *sync_find(const char *name);
/* The registry's i-th row (0 ≤ i < sync_count()), in --help's order. */
int sync_count(void);
const sync_ops_t *sync_at(int i);
/* "none | bsp | ..." for --help and error messages. */
void sync_names(char *buf, size_t len);

#endif
