#include "train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sync/sync.h"
#include "../util/blas.h"
#include "../util/cpu.h"
#include "../util/util.h"
#include "bounds.h"
#include "../run/checkpoint.h"
#include "../run/faults.h"
#include "metrics.h"
#include "outputs.h"
#include "parallel.h"
#include "snapshots.h"

#define EVAL_CHUNK 256

typedef struct evaluator {
    int32_t *labels;     /* (test n) */
    float *x;            /* (max_batch, dim) test inputs as floats; allocated by
                            the first evaluation, so only evaluating ranks hold it */
    double acc, loss;
    long step;           /* of the last evaluation (-1: none yet) */
    snapshots_t snaps;   /* --eval-offline */
} evaluator_t;

/* The model the paradigm delivers during the run (e.g. the parameter
 * server's), its parameters and its batch-normalization statistics. */
static float *delivered_model(run_t *r, float **state)
{
    float *p = r->model->params;
    *state = r->model->state;
    if (r->ops->eval_params) {
        p = r->ops->eval_params(r);
        if (r->ops->eval_has_state) *state = p + r->model->nparams;
    }
    return p;
}

/* Test accuracy and loss of the model with these parameters and
 * statistics (the model's own when NULL). */
static void evaluate_model(run_t *r, evaluator_t *ev, float *params, float *state)
{
    model_t *m = r->model;
    float *own = m->params, *own_state = m->state;
    if (params) m->params = params;
    if (state) m->state = state;
    const dataset_t *d = &r->test;
    const long dim = dataset_dim(d);
    long correct = 0;
    double loss = 0;
    if (!ev->x) ev->x = xalloc_floats((size_t)m->max_batch * (size_t)dim);
    if (r->ops && r->ops->recalibrate_bn && m->nstate) sync_bn_recalibrate(r, m->params);   /* (dsgd eval: no paradigm) */
    model_set_training(m, 0);   /* batch normalization by its running statistics */
    /* an lc model's halos while evaluating are not the training step's */
    const uint64_t halo_bytes = r->mp ? r->mp->halo_bytes : 0;
    const double halo_wait = r->mp ? r->mp->halo_wait_s : 0;
    for (long at = 0; at < d->n; at += m->max_batch) {
        int B = (int)((d->n - at) < m->max_batch ? d->n - at : m->max_batch);
        dataset_rows(d, at, B, ev->x);
        model_forward(m, ev->x, B);
        loss += (double)model_loss(m, ev->labels + at, B) * B;
        correct += model_correct(m, ev->labels + at, B);
    }
    ev->acc = (double)correct / (double)d->n;
    ev->loss = loss / (double)d->n;
    m->params = own;
    m->state = own_state;
    model_set_training(m, 1);
    if (r->mp) { r->mp->halo_bytes = halo_bytes; r->mp->halo_wait_s = halo_wait; }
}

/* Test accuracy and loss of the paradigm's model to evaluate (during the
 * run, global = 1: e.g. the parameter server's), or of the local replica. */
static void evaluate(run_t *r, evaluator_t *ev, int global)
{
    float *state = NULL, *params = global ? delivered_model(r, &state) : NULL;
    evaluate_model(r, ev, params, state);
}

/* flags: dataset_load's (dsgd eval reads only the test split, so a
 * partial training set does not matter to it) */
static int load_data(run_t *r, const config_t *cfg, int flags)
{
    if (dataset_load(cfg->data, flags, &r->train, &r->test, r->err, sizeof r->err) != 0) return -1;
    dataset_truncate(&r->train, cfg->train_subset);
    dataset_truncate(&r->test, cfg->test_subset);
    return 0;
}

#define FAIL(...) do { snprintf(r->err, sizeof r->err, __VA_ARGS__); return -1; } while (0)

/* The paradigm's figures as " key value" pairs. */
static void stats_text(run_t *r, char *out, size_t len)
{
    sync_stat_t st[16];
    int n = r->ops->stats ? r->ops->stats(r, st, 16, 1) : 0;
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < n && at < len; i++)
        if (!st[i].raw) at += (size_t)snprintf(out + at, len - at, "  %s %.4g", st[i].key, st[i].value);
}

/* A live status line only for a single process on a terminal: under
 * mpirun, stdout is a pseudo-terminal even when the user pipes it. Other
 * runs get a plain line every --progress-every seconds instead. */
static int live_line(const run_t *r)
{
    return r->lead && r->comm->size == 1 && !r->cfg->quiet && isatty(STDOUT_FILENO);
}

/* L-BFGS paradigms draw a step's samples themselves: a step is an
 * iteration over --batch-total samples, and epochs say little about it. */
static int counts_iterations(const run_t *r) { return r->ops->step_samples != NULL; }

/* "epoch E  step S" or, for L-BFGS, "iter S" */
static void print_position_at(const run_t *r, long step)
{
    if (counts_iterations(r)) printf("iter %6ld", step);
    else printf("epoch %6.2f  step %7ld", (double)step / (double)r->steps_per_epoch, step);
}

static void print_position(const run_t *r) { print_position_at(r, r->step); }

/* Decimals that give a time in seconds four significant digits (one from
 * 100 s up): a simulated run of a small model lasts milliseconds of
 * simulated time, which one decimal printed as 0.0. */
static int time_decimals(double t)
{
    return t < 1 ? 4 : t < 10 ? 3 : t < 100 ? 2 : 1;
}

/* An evaluation's line: where (m), what (ev), t seconds since the process began. */
static void print_progress(run_t *r, const evaluator_t *ev, const snap_meta_t *m, double t)
{
    if (r->cfg->quiet || !r->lead) return;
    if (live_line(r)) fputs("\r\033[K", stdout);
    print_position_at(r, m->step);
    printf("  loss %.4f  test_acc %.4f  test_loss %.4f  samples/s %9.0f  time %7.*fs",
           m->train_loss, ev->acc, ev->loss, m->sps, time_decimals(t), t);
    for (int i = 0; i < m->nstats; i++) printf("  %s %.4g", m->key[i], m->value[i]);
    putchar('\n');
    fflush(stdout);
}

/* Between evaluations when there is no live line: where the run is. */
static void print_heartbeat(const run_t *r, double train_loss, double sps, double t)
{
    print_position(r);
    printf("  of %ld  loss %.4f  samples/s %9.0f  time %7.*fs\n", r->total_steps, train_loss, sps, time_decimals(t), t);
    fflush(stdout);
}

/* What the run is: the whole model, the data, the ranks' roles. */
static void print_header(const run_t *r)
{
    const config_t *cfg = r->cfg;
    size_t nparams = r->model->full_nparams;
    printf("model %s: %zu parameters; data: %ld train, %ld test samples of %dx%dx%d, %d classes\n",
           cfg->model, nparams, r->train.n, r->test.n, r->train.c, r->train.h, r->train.w, r->train.classes);
    if (r->train.note[0]) printf("data: %s\n", r->train.note);
    int others = r->comm->size - r->nworkers;
    if (!strcmp(cfg->sync, "sandblaster"))
        printf("ranks: 1 coordinator, %d shard%s, %d replica%s", others - 1, others > 2 ? "s" : "", r->replicas,
               r->replicas > 1 ? "s" : "");
    else if (r->mp_size > 1)
        printf("ranks: %d replica%s x %d model-parallel partitions (each rank holds %zu parameters)", r->replicas,
               r->replicas > 1 ? "s" : "", r->mp_size, r->model->nparams);
    else
        printf("ranks: %d worker%s", r->nworkers, r->nworkers > 1 ? "s" : "");
    if (others > 0 && strcmp(cfg->sync, "sandblaster")) printf(", %d server shard%s", others, others > 1 ? "s" : "");
    if (counts_iterations(r))
        printf("; %ld iterations of %ld samples each\n", r->total_steps, r->ops->step_samples((run_t *)r));
    else
        printf("; %ld steps per epoch, %ld steps\n", r->steps_per_epoch, r->total_steps);
    char blas[256];
    blas_describe(blas, sizeof blas);
    printf("blas: OpenBLAS %s\n", blas);
}

/* Called on every rank of the lead's replica (they assemble a partitioned
 * model); the lead writes. */
static int save_checkpoint(run_t *r, const ckpt_meta_t *state)
{
    const config_t *cfg = r->cfg;
    const model_t *m;
    const optim_t *o;
    par_assemble(r, &m, &o);
    if (!r->lead) return 0;
    if (r->ops->recalibrate_bn && r->model->nstate) sync_bn_recalibrate(r, r->model->params);
    ckpt_meta_t meta = { .step = r->step, .seed = cfg->seed, .c = r->model->in_c, .h = r->model->in_h,
                         .w = r->model->in_w, .classes = r->model->classes, .extra = state->extra, .nextra = state->nextra,
                         .params = state->params, .state = state->state };
    snprintf(meta.sync_state, sizeof meta.sync_state, "%s", state->sync_state);
    snprintf(meta.model, sizeof meta.model, "%s", cfg->model);
    snprintf(meta.sync, sizeof meta.sync, "%s", cfg->sync);
    snprintf(meta.optimizer, sizeof meta.optimizer, "%s", optim_kind_name(r->opt->cfg.kind));
    return ckpt_save(cfg->checkpoint, m, o, &meta, r->err, sizeof r->err);
}

/* Setup, stage 1: flags and files, before anything is loaded. */
static int setup_config(run_t *r, optim_cfg_t *oc, part_kind_t *pk, ckpt_t *resume)
{
    const config_t *cfg = r->cfg;
    if (config_validate(cfg, r->err, sizeof r->err) != 0) return -1;
    r->ops = sync_find(cfg->sync);
    if (!r->ops) {
        char names[256];
        sync_names(names, sizeof names);
        FAIL("unknown --sync '%s'; choose one of: %s", cfg->sync, names);
    }
    *oc = (optim_cfg_t){ .momentum = (float)cfg->momentum, .weight_decay = (float)cfg->weight_decay,
                         .eps = (float)cfg->adagrad_eps };
    if (optim_kind_parse(cfg->optimizer, &oc->kind) != 0)
        FAIL("unknown --optimizer '%s'; choose sgd, nesterov or adagrad", cfg->optimizer);
    r->sched = (lr_sched_t){ .base = (float)cfg->lr, .warmup = cfg->lr_warmup,
                             .step_every = cfg->lr_step_every, .gamma = (float)cfg->lr_gamma };
    if (lr_sched_parse(cfg->lr_schedule, &r->sched.kind) != 0)
        FAIL("unknown --lr-schedule '%s'; choose constant, step or cosine", cfg->lr_schedule);
    if (!strcmp(cfg->lr_horizon, "time")) r->sched.horizon_s = cfg->time_limit;
    if (augment_parse(cfg->augment, &r->aug, r->err, sizeof r->err) != 0) return -1;
    if (augment_on(&r->aug) && r->ops->step_samples)
        FAIL("--augment: --sync %s draws its own samples for each iteration and does not augment them; drop --augment", cfg->sync);
    if (cfg->sync_bn && strcmp(r->ops->name, "bsp"))
        FAIL("--sync-bn is for --sync bsp only (under --sync %s each replica normalizes its own batches); drop --sync-bn", cfg->sync);
    if (!cfg->weight_decay_bn && cfg->model_parallel > 1)
        FAIL("--weight-decay-bn 0 is not supported with --model-parallel %ld; drop one of them", cfg->model_parallel);
    if (r->sched.kind == LR_STEP && cfg->lr_step_every < 1)
        FAIL("--lr-schedule step needs --lr-step-every N (steps between decays)");
    if (part_kind_parse(cfg->partition, pk) != 0)
        FAIL("unknown --partition '%s'; choose iid, full or label-skew", cfg->partition);
    if (*cfg->resume && ckpt_load(cfg->resume, resume, r->err, sizeof r->err) != 0) return -1;
    /* the lead is not known yet; rank 0 shares its files */
    if (r->comm->rank == 0 && outputs_check(cfg, r->err, sizeof r->err) != 0) return -1;
    return 0;
}

/* Setup, stage 3: data, model, optimizer, resume, partition. */
static int setup_model(run_t *r, const optim_cfg_t *oc, part_kind_t pk, const ckpt_t *resume)
{
    const config_t *cfg = r->cfg;
    if (load_data(r, cfg, cfg->data_partial ? DATA_PARTIAL : 0) != 0) return -1;
    if (model_spec_check(cfg->model, r->train.c, r->train.h, r->train.w, r->train.classes, r->err, sizeof r->err) != 0)
        return -1;
    /* data and batches follow the replica: its M ranks see the same samples */
    int nworkers = r->replicas, wrank = r->replica;
    r->part = partition_indices(&r->train, pk, wrank, nworkers, (uint64_t)cfg->seed, &r->part_n);
    if (r->part_n < 1) FAIL("rank %d's data partition is empty; use fewer ranks or more data", wrank);
    r->it = batch_iter_create(&r->train, r->part, r->part_n, (int)cfg->batch, (uint64_t)cfg->seed, (uint64_t)wrank);
    if (cfg->inject_alpha > 0) {
        int C = r->train.classes;
        int k = (int)ceil(cfg->inject_alpha * C - 1e-9), m = (int)floor(cfg->inject_beta * cfg->batch * nworkers / C + 1e-9);
        if (m < 1) FAIL("--inject-beta %g gives no injected samples (floor(beta*B*N/C) = 0); raise it", cfg->inject_beta);
        batch_iter_inject(r->it, k, m);
    }
    /* evaluation runs in chunks of max_batch; a graph model's activations
     * (a residual network's), or any model's whose activations for
     * EVAL_CHUNK samples would pass 64 M floats (a locally connected one on
     * large images), are large enough that the training batch sets it */
    const int big = model_spec_graph(cfg->model) ||
                    model_spec_act_floats(cfg->model, r->train.c, r->train.h, r->train.w, r->train.classes) * EVAL_CHUNK > 64e6;
    int max_batch = r->it->nb > EVAL_CHUNK || big ? r->it->nb : EVAL_CHUNK;
    if (par_check_model(r) != 0) return -1;
    r->model = par_model_create(r, max_batch);
    if (cfg->sync_bn && !model_bn_channels(r->model))
        FAIL("--sync-bn: --model %s has no batch normalization; drop --sync-bn", cfg->model);
    model_init_params(r->model, (uint64_t)cfg->seed);
    r->opt = optim_create(oc, r->model->nparams);
    if (!cfg->weight_decay_bn) {
        r->nodecay = xmalloc(sizeof(size_t) * 2 * (size_t)(r->model->nlayers + 1));
        r->nnodecay = model_nodecay_spans(r->model, r->nodecay, r->model->nlayers);
        r->opt->cfg.nodecay = r->nodecay;
        r->opt->cfg.nnodecay = r->nnodecay;
    }
    augment_setup(&r->aug, r->train.c, r->train.h, r->train.w);
    if (*cfg->resume) {
        char why[400];
        /* with server_ckpt the checkpoint's optimizer state is the servers' (ops->resume) */
        int rc = r->server_ckpt || r->own_opt_resume ? ckpt_restore(resume, r->model, NULL, why, sizeof why)
                                                     : par_restore(r, resume, why, sizeof why);
        if (rc != 0) FAIL("'%s': %s", cfg->resume, why);
        r->step = resume->meta.step;
    }
    long per_step = r->ops->step_samples ? r->ops->step_samples(r) : (long)nworkers * cfg->batch;
    r->steps_per_epoch = per_step > 0 ? r->train.n / per_step : 0;
    if (r->steps_per_epoch < 1 && r->ops->step_samples)
        FAIL("--sync %s: a step's %ld samples exceed the %ld training samples", cfg->sync, per_step, r->train.n);
    if (r->steps_per_epoch < 1)
        FAIL("--batch %ld x %d workers exceeds the %ld training samples; use a smaller batch", cfg->batch, nworkers, r->train.n);
    /* the flag ranges keep this product far from overflow; checked all the same */
    if (cfg->steps > 0) r->total_steps = cfg->steps;
    else if (__builtin_mul_overflow(cfg->epochs, r->steps_per_epoch, &r->total_steps))
        FAIL("--epochs %ld x %ld steps per epoch is too many steps", cfg->epochs, r->steps_per_epoch);
    r->sched.total = lr_sched_length(cfg->epochs, r->steps_per_epoch, r->total_steps);
    if (*cfg->resume && r->step > r->total_steps)
        FAIL("checkpoint '%s' is at step %ld, past the %ld steps this run would train; raise --epochs or --steps",
             cfg->resume, r->step, r->total_steps);
    batch_iter_seek(r->it, r->step);
    return 0;
}

/* Every input problem is found here, before any output file is opened; each
 * stage ends with a check all ranks take together. */
static void setup(run_t *r, const config_t *cfg, comm_t *comm, ckpt_t *resume, faults_t *faults)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->comm = comm;
    optim_cfg_t oc;
    part_kind_t pk;
    comm->timeout_s = cfg->timeout;
    comm->wait_spin = strcmp(cfg->wait, "spin") == 0;
    char *desc = config_describe(cfg, config_train_opts);
    comm_check_same_config(comm, desc);
    free(desc);
    comm_setup_check(comm, setup_config(r, &oc, &pk, resume) != 0, r->err);
    comm_setup_check(comm, r->ops->layout(r) != 0, r->err);
    comm_setup_check(comm, par_layout(r) != 0, r->err);
    par_groups(r);
    comm_setup_check(comm, faults_parse(faults, cfg->slowdown, cfg->fail, r->wrank, r->nworkers, (uint64_t)cfg->seed, r->err, sizeof r->err) != 0,
                     r->err);
    comm_setup_check(comm, setup_model(r, &oc, pk, resume) != 0, r->err);
}

#undef FAIL

static void teardown(run_t *r)
{
    if (r->ops && r->ops->destroy) r->ops->destroy(r);
    par_free(r);
    batch_iter_free(r->it);
    augment_free(&r->aug);
    free(r->nodecay);
    free(r->part);
    optim_free(r->opt);
    model_free(r->model);
    dataset_free(&r->train);
    dataset_free(&r->test);
}

/* A run-time failure after the metrics file is open: remove the partial
 * file, then stop every rank. */
static void __attribute__((noreturn, format(printf, 2, 3))) run_abort(metrics_t *mx, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    metrics_close(mx, 0);
    die("%s", msg);
}

/* The done event's first fields; the caller adds its own and ends it. */
static void done_begin(metrics_t *mx, long step, const char *status)
{
    metrics_begin(mx, "done", now_s());
    metrics_long(mx, "steps", step);
    metrics_str(mx, "status", status);
}

/* Divergence: a loss that is not finite or exceeds --diverge-loss, or
 * parameters that are not finite when a checkpoint is due. The run stops
 * with DIVERGED_EXIT on every rank and one line; the lead keeps the record
 * so far, closed by a done event of status "diverged"; no checkpoint is
 * written (the previous one stays). */
enum { DIVERGED_EXIT = 3 };

/* An asynchronous paradigm's servers, which write the checkpoints, write
 * none from now on: their parameters have exploded too, and the job takes
 * a moment to stop. */
static void diverge_tell_servers(run_t *r)
{
    if (r->ops && r->ops->announce_stop) r->ops->announce_stop(r, COMM_STOP_DIVERGED);
}

static void __attribute__((noreturn, format(printf, 4, 5)))
run_diverged_at(run_t *r, metrics_t *mx, const char *where, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    diverge_tell_servers(r);
    if (mx->f) {
        done_begin(mx, r->step, "diverged");
        metrics_str(mx, "diverged", why);
        if (*where) metrics_str(mx, "diverged_at", where);
        metrics_end(mx);
        metrics_close(mx, 1);
    }
    char here[64];
    if (!*where) snprintf(here, sizeof here, "step %ld", r->step);
    die_status(DIVERGED_EXIT, "training diverged at %s: %s; lower --lr (the last checkpoint, if any, is kept)", *where ? where : here, why);
}
#define run_diverged(r, mx, ...) run_diverged_at(r, mx, "", __VA_ARGS__)

/* A worker other than the lead whose loss diverges does not stop the job
 * itself: MPI_Abort would kill the lead before it closed the metrics. It
 * tells the lead where and why, and goes on stepping, so that no
 * collective, gate or gossip exchange waits for it; the lead, which looks
 * for the notice after each of its steps and before its done event, stops
 * the job as for its own divergence. A notice no lead answers within
 * --timeout + 5 s (a lead blocked or dead) stops the worker itself. */
enum { NOTICE_LEN = 256 };
typedef struct diverge_watch {
    double since;            /* when this rank diverged and told the lead; < 0: it has not */
    double probed;           /* the lead: when it last looked for a notice */
    char note[NOTICE_LEN];   /* "step S of worker W (rank R)", a NUL, then why (sent from here) */
} diverge_watch_t;

static void diverge_notify(run_t *r, diverge_watch_t *dw, int lead_rank, const char *why)
{
    if (dw->since >= 0) return;
    dw->since = now_s();
    diverge_tell_servers(r);
    int n = snprintf(dw->note, NOTICE_LEN / 2, "step %ld of worker %d (rank %d)", r->step, r->wrank, r->comm->rank);
    if (n >= NOTICE_LEN / 2) n = NOTICE_LEN / 2 - 1;
    snprintf(dw->note + n + 1, (size_t)(NOTICE_LEN - n - 1), "%s", why);
    MPI_Request q;
    /* to a dead lead nothing is delivered: the deadline stops this rank then */
    if (MPI_Isend(dw->note, NOTICE_LEN, MPI_CHAR, lead_rank, TAG_DIVERGED, r->comm->world, &q) == MPI_SUCCESS) {
        MPI_Request_free(&q);
        r->comm->msgs_sent++;
    }
}

/* The lead looks at most every 50 ms: a probe makes MPI poll its
 * transports, which costs a step of a small model several times its time
 * (and SimGrid charges each probe simulated time). */
static int diverge_check_due(double *last, double now)
{
    if (now - *last < 0.05) return 0;
    *last = now;
    return 1;
}

/* On the lead: a worker's notice, if one has arrived, ends the run. */
static void diverge_heard(run_t *r, metrics_t *mx)
{
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_DIVERGED, r->comm->world, &flag, &st) != MPI_SUCCESS || !flag) return;
    char note[NOTICE_LEN];
    MPI_CHECK(r->comm, MPI_Recv(note, NOTICE_LEN, MPI_CHAR, st.MPI_SOURCE, TAG_DIVERGED, r->comm->world, MPI_STATUS_IGNORE));
    note[NOTICE_LEN - 1] = 0;
    const size_t n = strlen(note);
    run_diverged_at(r, mx, note, "%s", n + 1 < NOTICE_LEN ? note + n + 1 : "");
}

/* 1 if every parameter is finite */
static int params_finite(const model_t *m)
{
    int ok = 1;
    for (size_t i = 0; i < m->nparams; i++) ok &= isfinite(m->params[i]) != 0;
    return ok;
}

/* What the lead's metrics need to close on a peer's fault. */
typedef struct fault_rec {
    metrics_t *mx;
    const run_t *r;
} fault_rec_t;

/* comm's fault hook: the run's record so far goes into place, ending with
 * a done event that says what was lost, at which step. */
static void record_fault(void *ctx, const char *what, const int *lost, int nlost)
{
    fault_rec_t *f = ctx;
    if (!f->mx->f) return;
    char ranks[512] = "[";
    size_t at = 1;
    for (int i = 0; i < nlost && at < sizeof ranks - 16; i++)
        at += (size_t)snprintf(ranks + at, sizeof ranks - at, "%s%d", i ? "," : "", lost[i]);
    snprintf(ranks + at, sizeof ranks - at, "]");
    done_begin(f->mx, f->r->step, "fault");
    metrics_raw(f->mx, "lost_ranks", ranks);
    metrics_long(f->mx, "fault_step", f->r->step);
    metrics_str(f->mx, "fault", what);
    metrics_end(f->mx);
    metrics_close(f->mx, 1);
}

/* The lead worker was lost and this worker is next in line (parameter-server
 * paradigms): it evaluates from now on, and continues the dead lead's
 * metrics file with a takeover event, so the run's record is not lost. */
static void take_lead(run_t *r, metrics_t *mx, const config_t *cfg, double t0)
{
    char err[512];
    r->lead = r->evaluates = 1;
    if (metrics_takeover(mx, cfg->metrics, t0, err, sizeof err) != 0)
        fprintf(stderr, "dsgd: %s; the run goes on without metrics\n", err);
    metrics_begin(mx, "takeover", now_s());
    metrics_long(mx, "step", r->step);
    metrics_long(mx, "worker", r->wrank);
    metrics_long(mx, "rank", r->comm->rank);
    metrics_end(mx);
    fprintf(stderr, "dsgd: the lead worker was lost; worker %d (rank %d) takes over the evaluations and the metrics at step %ld\n",
            r->wrank, r->comm->rank, r->step);
    fflush(stderr);
}

/* Evicted after a silence past --timeout (frozen, not dead): the servers
 * went on without this worker. It says so in one line and stops; a former
 * lead leaves the metrics file to the worker that took it over. */
static void leave_evicted(run_t *r, metrics_t *mx, const config_t *cfg)
{
    const comm_t *comm = r->comm;
    fprintf(stderr, "dsgd: worker %d (rank %d): evicted by the servers at step %ld after %.1f s of silence (--timeout %g); "
            "it stops training, the job goes on without it\n", r->wrank, comm->rank, comm->evicted_step,
            comm->evicted_silent_s, cfg->timeout);
    fflush(stderr);
    if (r->lead) {
        metrics_abandon(mx);
        r->lead = r->evaluates = 0;
    }
    r->left = 1;
}

/* What an evaluation's record says besides the accuracy, as of now (after
 * the paradigm handed out the model to evaluate, whose reply may carry its
 * figures). run_s: seconds since the common start; train_s: the lead's
 * training time so far. */
static void eval_meta(run_t *r, double train_loss, double sps, double run_s, double train_s, long samples, snap_meta_t *m)
{
    memset(m, 0, sizeof *m);
    m->step = r->step;
    m->samples = samples;
    m->time = now_s();
    m->run_s = run_s;
    m->train_s = train_s;
    m->train_loss = train_loss;
    m->sps = sps;
    m->lr = r->lr;
    sync_stat_t st[16];
    int n = r->ops->stats ? r->ops->stats(r, st, 16, 1) : 0;
    for (int i = 0; i < n && m->nstats < SNAP_STATS; i++) {
        if (st[i].raw) continue;
        snprintf(m->key[m->nstats], sizeof m->key[0], "%s", st[i].key);
        m->value[m->nstats++] = st[i].value;
    }
}

/* The eval event; offline: evaluated after the run, from a snapshot taken at m->time. */
static void eval_record(run_t *r, metrics_t *mx, const evaluator_t *ev, const snap_meta_t *m, int offline)
{
    metrics_begin(mx, "eval", m->time);
    metrics_long(mx, "step", m->step);
    metrics_double(mx, "epoch", (double)m->step / (double)r->steps_per_epoch);
    metrics_long(mx, "samples", m->samples);
    metrics_double(mx, "run_s", m->run_s);
    metrics_double(mx, "train_s", m->train_s);
    metrics_double(mx, "test_acc", ev->acc);
    metrics_double(mx, "test_loss", ev->loss);
    metrics_double(mx, "train_loss", m->train_loss);
    metrics_double(mx, "samples_per_s", m->sps);
    metrics_double(mx, "lr", m->lr);
    if (offline) metrics_long(mx, "offline", 1);
    for (int i = 0; i < m->nstats; i++) metrics_double(mx, m->key[i], m->value[i]);
    metrics_end(mx);
}

/* --eval-offline, during the run: keep the delivered model and go on. */
static void snapshot_take(run_t *r, metrics_t *mx, evaluator_t *ev, double train_loss, double sps, double run_s,
                          double train_s, long samples)
{
    float *state, *p = delivered_model(r, &state);
    snap_meta_t m;
    eval_meta(r, train_loss, sps, run_s, train_s, samples, &m);
    char err[512];
    if (snapshots_add(&ev->snaps, p, r->model->nparams, state, r->model->nstate, &m, err, sizeof err) != 0)
        run_abort(mx, "%s", err);
}

/* DSGD_TEST_BN_DUMP=PREFIX: every worker writes its state vector (batch-norm
 * running statistics) as raw floats to PREFIX.RANK after the final
 * evaluation, so that a test can compare the replicas' statistics. */
static void dump_state_for_tests(const run_t *r)
{
    const char *prefix = getenv("DSGD_TEST_BN_DUMP");
    if (!prefix || !r->model->nstate) return;
    char path[512];
    snprintf(path, sizeof path, "%s.%d", prefix, r->comm->rank);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(r->model->state, sizeof(float), r->model->nstate, f);
    fclose(f);
}

/* ---- preemption (comm.h, comm_preempt_arm): the loop stops at a step
 * every worker agrees on; the paradigm's final synchronization and the
 * checkpoint follow, and the metrics close with status "preempted", without
 * a final evaluation (finish_run: a launcher kills soon after it passes a
 * signal on); the process exits with PREEMPT_EXIT. Lockstep workers agree
 * every PREEMPT_EVERY steps (a one-integer all-reduce), so a signal is acted
 * on within that many steps;
 * asynchronous ones learn of another rank's signal from the paradigm's
 * stop announcement (the shards' replies); the lead looks every 50 ms for
 * a serving rank's notice (Sandblaster's shards and replicas). */
enum { PREEMPT_EVERY = 16, PREEMPT_EXIT = 143 };

/* Where the preemption came from, for the lead's lines. */
static const char *preempt_source(void)
{
    return comm_preempt_signal() ? comm_preempt_name() : "a signal to another rank of the job";
}

/* After step r->step: 1 if the loop stops for a preemption signal (every
 * worker of a lockstep paradigm returns the same). *probed: when the lead
 * last looked for a notice; *told: the paradigm's stop has been announced;
 * *waited: seconds in the decision's all-reduce, added. */
static int preempt_due(run_t *r, const bounds_t *b, double *probed, int *told, double *waited)
{
#ifdef DSGD_SIM
    (void)r; (void)b; (void)probed; (void)told; (void)waited;
    return 0;
#else
    comm_t *c = r->comm;
    if (!comm_preempt_signal() && c->stop_heard != COMM_STOP_PREEMPT && r->lead && c->size > 1 &&
        diverge_check_due(probed, now_s()) && comm_preempt_heard(c))
        c->stop_heard = COMM_STOP_PREEMPT;
    int f = comm_preempt_signal() != 0 || c->stop_heard == COMM_STOP_PREEMPT;
    comm_t *g = b->mode == STOP_AGREE && c->size > 1 ? c : b->mode == STOP_OWN_CLOCK && r->mp_size > 1 ? &r->mp_comm : NULL;
    if (g) {
        if (r->step % PREEMPT_EVERY) return 0;
        const double c0 = g->comm_s;
        comm_allreduce_int(g, &f, 1, MPI_MAX, g == c ? "the preemption decision all-reduce" : "the replica's preemption decision all-reduce");
        *waited += g->comm_s - c0;
    }
    /* an asynchronous paradigm's other workers learn of it from the shards */
    if (f && !*told && b->mode == STOP_OWN_CLOCK && r->ops->announce_stop) {
        r->ops->announce_stop(r, COMM_STOP_PREEMPT);
        *told = 1;
    }
    return f;
#endif
}

/* The step loop's bookkeeping: what it measures and when it reports. */
typedef struct loop {
    double t0;                   /* the run's start */
    int own_data;                /* the paradigm's step draws its samples (Sandblaster's coordinator) */
    long eval_every;             /* steps between evaluations (0: none by steps) */
    long start_step, samples_per_step;
    /* Where the training time goes: train_s = compute_s + step_comm_s +
     * update_s + the rest (the loop's bookkeeping). A step runs from its
     * start ts to the end of its stop decision te, and the next starts
     * there when nothing happened in between (t_carry); the communication
     * counters are read at the same points (comm_seconds), so every wait
     * is counted once. */
    double train_s, compute_s;   /* stepping (all of it); computing the batch's gradient */
    double step_comm_s;          /* in or waiting for communication within train_s (the final synchronization too) */
    double update_s;             /* the paradigm's step outside its communication (the optimizer update, averaging arithmetic) */
    double check_s;              /* of step_comm_s: the preemption decisions' all-reduces (the bounds' are in bounds_t) */
    double loss_sum, seg_t;      /* since the last evaluation: training loss, time */
    long loss_n, seg_samples;
    int tty, beat, leading;      /* a live line; heartbeats; this rank has led */
    double tty_last, beat_last;
    double t_carry;              /* the last step's end, when nothing happened after it (-1: read the clock) */
    double c_carry;              /* comm_seconds then */
    double t_stop;               /* when the rank left the loop, if it left at a step's end */
    int preempted;
    double preempt_probed;       /* the lead: when it last looked for another rank's preemption notice */
    int preempt_announced;       /* the paradigm's stop has been announced for a preemption */
    diverge_watch_t dw;
} loop_t;

/* The metrics record's start (a resumed run continues the record of the
 * run it resumes) and the run's header on stdout. */
static void open_record(run_t *r, metrics_t *mx, double t0)
{
    const config_t *cfg = r->cfg;
    comm_t *comm = r->comm;
    const int lead = r->lead;
    char err[512];
    int continued = *cfg->resume ? metrics_continue(mx, lead ? cfg->metrics : NULL, t0, r->step, err, sizeof err)
                                 : metrics_open(mx, lead ? cfg->metrics : NULL, t0, err, sizeof err);
    if (continued < 0) die("%s", err);
    if (lead && !cfg->quiet) {
        config_print(stdout, cfg, config_train_opts);
        print_header(r);
        fflush(stdout);
    }
    if (*cfg->resume && lead)   /* even with --quiet: where the run starts is part of its result */
        printf("resumed from step %ld of '%s'%s\n", r->step, cfg->resume,
               continued > 0 ? "; the metrics continue the resumed run's record" : "");
    if (continued > 0) {   /* a resume event, in place of the record's second config event */
        /* where the record stood at the step: its clocks and totals go on from there */
        const metrics_prior_t *p = &mx->prior;
        metrics_begin(mx, "resume", now_s());
        metrics_long(mx, "step", r->step);
        metrics_str(mx, "checkpoint", cfg->resume);
        metrics_long(mx, "segment", p->segment);
        metrics_double(mx, "prior_time", p->time);
        metrics_double(mx, "prior_run_s", p->run_s);
        metrics_double(mx, "prior_train_s", p->train_s);
        metrics_long(mx, "prior_samples", p->samples);
        metrics_str(mx, "prior_from", p->from);
    } else {
        metrics_begin(mx, "config", now_s());
    }
    if (mx->f) { fputs(",\"config\":{", mx->f); config_json(mx->f, cfg, config_train_opts); fputc('}', mx->f); }
    metrics_long(mx, "nparams", (long)r->model->full_nparams);
    /* FLOPs of one training sample's forward and backward (model_train_flops;
     * with --model-parallel, the lead's partition): with the batch and the
     * bytes a step sends, the run's computation per byte communicated */
    metrics_double(mx, "train_flops_per_sample", model_train_flops(r->model));
    /* which BLAS kernels ran, and why (util/blas.h) */
    char blas[256], cpu[256];
    blas_describe(blas, sizeof blas);
    blas_cpu(cpu, sizeof cpu);
    metrics_str(mx, "blas_core", blas_core());
    metrics_str(mx, "blas", blas);
    metrics_str(mx, "cpu", cpu);
    metrics_long(mx, "ranks", comm->size);
    metrics_long(mx, "workers", r->nworkers);
    metrics_long(mx, "replicas", r->replicas);
    metrics_long(mx, "model_parallel", r->mp_size);
    if (r->mp_size > 1) metrics_long(mx, "nparams_per_rank", (long)r->model->nparams);   /* the lead's partition */
    metrics_long(mx, "train_samples", r->train.n);
    metrics_long(mx, "test_samples", r->test.n);
    /* the idle policy's parameters on this (the lead's) host: comm_idle */
    metrics_double(mx, "wake_us", comm->wake_s * 1e6);
    metrics_double(mx, "poll_us", (comm->wait_spin ? 50e-6 : comm->poll_s) * 1e6);
    metrics_long(mx, "oversubscribed", comm->oversubscribed);
#ifdef DSGD_SIM
    metrics_str(mx, "clock", "simulated");   /* times are simulated seconds (dsgd-plot says so) */
    /* the simulated cluster: hosts, link, topology, compute scale, slow hosts, eager limit (scripts/dsgd-sim) */
    metrics_object(mx, "platform", getenv("DSGD_SIM_PLATFORM"));
#else
    metrics_str(mx, "clock", "real");
#endif
    metrics_end(mx);
}

static void loop_start(loop_t *L, run_t *r, double t0)
{
    const config_t *cfg = r->cfg;
    memset(L, 0, sizeof *L);
    L->t0 = t0;
    /* a clock schedule (--eval-every-s) replaces the per-epoch one */
    L->eval_every = cfg->eval_every > 0 ? cfg->eval_every : cfg->eval_every_s > 0 ? 0 : r->steps_per_epoch;
    L->own_data = r->ops->step_samples != NULL;
    L->start_step = r->step;
    L->samples_per_step = L->own_data ? r->ops->step_samples(r) : (long)r->it->nb * r->replicas;
    L->beat_last = now_s();
    L->tty = live_line(r);
    L->beat = r->lead && !cfg->quiet && !L->tty;
    L->leading = r->lead;
    L->t_carry = L->t_stop = -1;
    L->dw = (diverge_watch_t){ .since = -1 };
}

/* The groups this rank communicates in: its world, its replica and
 * data-parallel groups (--model-parallel), the paradigm's own; returns how
 * many of g's 4 it filled. */
static int comm_groups(const run_t *r, const comm_t *g[4])
{
    int n = 0;
    g[n++] = r->comm;
    if (r->mp_size > 1) { g[n++] = &r->mp_comm; g[n++] = &r->dp_comm; }
    if (r->own_comm) g[n++] = r->own_comm;
    return n;
}

/* Seconds this rank has spent in (or waiting for) communication, in every
 * group it has. */
static double comm_seconds(const run_t *r)
{
    const comm_t *g[4];
    double s = 0;
    for (int i = 0, n = comm_groups(r, g); i < n; i++) s += g[i]->comm_s;
    return s;
}

/* The next batch's loss and gradient, from ts (the step's start; cs:
 * comm_seconds then); returns when it ended, *cc: comm_seconds then. */
static double compute_gradient(run_t *r, faults_t *faults, loop_t *L, double ts, double cs, double *cc)
{
    batch_iter_next(r->it);
    augment_batch(&r->aug, r->it->x, r->it->nb, (uint64_t)r->cfg->seed, (uint64_t)r->replica, r->step);
    model_forward(r->model, r->it->x, r->it->nb);
    r->loss = model_loss(r->model, r->it->y, r->it->nb);
    model_backward(r->model, r->it->y, r->it->nb);
    if (faults->slowdown > 1.0) { double t = now_s(); faults_delay(faults, t - ts, t); }
    /* the batch, forward and backward (a --slowdown's delay included),
     * without the communication they started and waited for: bsp's
     * all-reduce during backward (blocking in the simulated build), a
     * model-parallel replica's activations and halos; and without the
     * preemption decision between the previous step's end and this one's */
    const double tc = now_s();
    *cc = comm_seconds(r);
    L->compute_s += tc - ts - (*cc - cs);
    return tc;
}

/* A loss past --diverge-loss (or not finite) here or, said by another
 * rank, at the lead: the run stops with status diverged. */
static void watch_divergence(run_t *r, metrics_t *mx, loop_t *L, const bounds_t *bd, double te)
{
    const config_t *cfg = r->cfg;
    if (!isfinite(r->loss) || r->loss > cfg->diverge_loss) {
        char why[160];
        snprintf(why, sizeof why, "the loss is %g (--diverge-loss %g)", (double)r->loss, cfg->diverge_loss);
        if (r->lead || bd->lead_rank == r->comm->rank) run_diverged(r, mx, "%s", why);
        diverge_notify(r, &L->dw, bd->lead_rank, why);
    }
    if (L->dw.since >= 0 && now_s() - L->dw.since > cfg->timeout + 5)
        run_diverged_at(r, mx, L->dw.note, "%s (the lead did not stop the job within --timeout + 5 s)", L->dw.note + strlen(L->dw.note) + 1);
    if (r->lead && r->comm->size > 1 && diverge_check_due(&L->dw.probed, te)) diverge_heard(r, mx);
}

/* An evaluation during the run: the training loss and speed since the last
 * one, the paradigm's model's test accuracy; returns the bounds' verdict. */
static int evaluate_during(run_t *r, metrics_t *mx, loop_t *L, bounds_t *bd, evaluator_t *ev)
{
    double tl = L->loss_sum / (double)L->loss_n, sps = L->seg_t > 0 ? L->seg_samples / L->seg_t : 0;
    const double at = mx->prior.run_s + bounds_now(bd), train_s = mx->prior.train_s + L->train_s;
    L->beat_last = now_s();
    if (r->ops->sync_bn) r->ops->sync_bn(r);
    if (r->ops->eval_prepare) r->ops->eval_prepare(r);
    const long samples = r->step * L->samples_per_step;
    if (r->evaluates && r->cfg->eval_offline) {
        snapshot_take(r, mx, ev, tl, sps, at, train_s, samples);
        if (L->beat) print_heartbeat(r, tl, sps, now_s() - L->t0);
    } else if (r->evaluates) {
        evaluate(r, ev, 1);
        ev->step = r->step;
        snap_meta_t m;
        eval_meta(r, tl, sps, at, train_s, samples, &m);
        print_progress(r, ev, &m, now_s() - L->t0);
        eval_record(r, mx, ev, &m, 0);
    }
    int stop = bounds_after_eval(bd, r, r->cfg->eval_offline ? NAN : ev->acc, at, train_s);
    L->loss_sum = 0; L->loss_n = 0; L->seg_t = 0; L->seg_samples = 0;
    return stop;
}

/* A checkpoint that could not be written (a full disk, say): the previous
 * one stays (ckpt_save replaces it only when the new one is whole), and the
 * record so far is kept, closed by a done event of status
 * "checkpoint_failed", so that a run resumed from the previous checkpoint
 * continues it. Then every rank stops. */
static void save_failed_record(const run_t *r, metrics_t *mx)
{
    if (!mx->f) return;
    done_begin(mx, r->step, "checkpoint_failed");
    metrics_str(mx, "error", r->err);
    metrics_end(mx);
    metrics_close(mx, 1);
}

static void __attribute__((noreturn)) run_save_failed(const run_t *r, metrics_t *mx)
{
    save_failed_record(r, mx);
    die("%s; the previous checkpoint, if any, is kept, and so is the metrics record", r->err);
}

/* The same when the parameter-server shard that writes the checkpoints
 * failed (it says so in the replies, COMM_STOP_SAVE_FAILED, and has
 * printed the job's one line): the lead keeps the record and stops the
 * job; the other workers go on until it does. */
static void servers_save_failed(run_t *r, metrics_t *mx)
{
    if (r->comm->stop_heard != COMM_STOP_SAVE_FAILED || !r->lead) return;
    snprintf(r->err, sizeof r->err, "server shard 0 could not write checkpoint '%s' (its line on stderr says why)", r->cfg->checkpoint);
    save_failed_record(r, mx);
    stop_job(1, r->comm->size);
}

/* A checkpoint the lead wrote, in the record: where the run stood when it
 * was taken, so that a run resumed from it continues the record's clocks
 * and totals from there (metrics_continue). */
static void checkpoint_record(const run_t *r, metrics_t *mx, const loop_t *L, const bounds_t *bd)
{
    metrics_begin(mx, "checkpoint", now_s());
    metrics_long(mx, "step", r->step);
    metrics_long(mx, "samples", mx->prior.samples + (r->step - L->start_step) * L->samples_per_step);
    metrics_double(mx, "run_s", mx->prior.run_s + bounds_now(bd));
    metrics_double(mx, "train_s", mx->prior.train_s + L->train_s);
    metrics_str(mx, "path", r->cfg->checkpoint);
    metrics_end(mx);
}

static void checkpoint_during(run_t *r, metrics_t *mx, const loop_t *L, const bounds_t *bd)
{
    ckpt_meta_t state = { .nextra = 0 };
    if (r->evaluates && !params_finite(r->model)) run_diverged(r, mx, "the parameters hold NaN or infinite values");
    if (r->ops->sync_bn) r->ops->sync_bn(r);
    if (r->ops->ckpt_state && r->ops->ckpt_state(r, &state) != 0) run_abort(mx, "%s", r->err);
    if (r->evaluates && save_checkpoint(r, &state) != 0) run_save_failed(r, mx);
    checkpoint_record(r, mx, L, bd);
}

/* Everything after a step that ended at te and began at ts (cs:
 * comm_seconds then): the bounds, preemption, divergence, progress,
 * evaluation and checkpoint schedules. Returns 1 when the loop stops. */
static int after_step(run_t *r, metrics_t *mx, loop_t *L, bounds_t *bd, evaluator_t *ev, double ts, double te, double cs)
{
    const config_t *cfg = r->cfg;
    int eval_due, stop = bounds_after_step(bd, r, ts, &te, &eval_due);
    const double ce = comm_seconds(r);   /* the step's end, its stop decision included */
    L->step_comm_s += ce - cs;
    double pw = 0;   /* the preemption decision: the next step's, if it starts at te */
    if (!stop && preempt_due(r, bd, &L->preempt_probed, &L->preempt_announced, &pw)) {
        stop = L->preempted = 1;
        if (r->lead)
            fprintf(stderr, "dsgd: %s: stopping after step %ld, saving what the run has%s; send it again to stop at once\n",
                    preempt_source(), r->step, *cfg->checkpoint ? " (checkpoint)" : "");
    }
    double dt = te - ts;
    L->train_s += dt;
    L->seg_t += dt;
    L->seg_samples += L->samples_per_step;
    L->loss_sum += r->loss;
    L->loss_n++;
    watch_divergence(r, mx, L, bd, te);
    servers_save_failed(r, mx);
    if (L->tty && now_s() - L->tty_last > 0.25) {
        L->tty_last = now_s();
        printf("\r\033[Kstep %ld/%ld  loss %.4f", r->step, r->total_steps, L->loss_sum / (double)L->loss_n);
        fflush(stdout);
    }
    /* a run that stops here is evaluated after its final synchronization */
    int periodic = L->eval_every > 0 && r->step % L->eval_every == 0 && r->step < r->total_steps;
    if (r->step >= r->total_steps) eval_due = 0;   /* the final evaluation follows: one record, not two */
    int idle_tail = 1;   /* nothing but bookkeeping after the step's end (te) */
    if (L->beat && te - L->beat_last >= cfg->progress_every && !periodic && !eval_due) {
        L->beat_last = te;
        idle_tail = 0;
        print_heartbeat(r, L->loss_sum / (double)L->loss_n, L->seg_t > 0 ? L->seg_samples / L->seg_t : 0, L->beat_last - L->t0);
    }
    if ((periodic || eval_due) && !stop) stop = evaluate_during(r, mx, L, bd, ev);
    if ((periodic || eval_due) && !stop) idle_tail = 0;
    if (cfg->checkpoint_every > 0 && r->step % cfg->checkpoint_every == 0 && !r->server_ckpt) {
        idle_tail = 0;
        checkpoint_during(r, mx, L, bd);
    }
    if (stop) {
        /* stopped by the decision at te: that is when the rank left */
        if (idle_tail) L->t_stop = te;
        return 1;
    }
    if (idle_tail && !L->tty) L->t_carry = te, L->c_carry = ce, L->check_s += pw;
    return 0;
}

/* The done event: the run's outcome, its traffic and its regime. */
static void record_done(run_t *r, metrics_t *mx, const loop_t *L, bounds_t *bd, const evaluator_t *ev,
                        const faults_t *faults)
{
    const long steps = r->step - L->start_step, samples = bounds_samples(bd, r, steps * L->samples_per_step);
    const metrics_prior_t *p = &mx->prior;
    done_begin(mx, r->step, L->preempted ? "preempted" : "ok");
    /* totals over the record (a resumed run's continue the resumed one's);
     * the rest of the event is this process's: its traffic and regime */
    metrics_long(mx, "samples", p->samples + samples);
    /* the lead's traffic in every group it has */
    const comm_t *g[4];
    uint64_t bytes = 0, msgs = 0, colls = 0;
    const double comm_s = comm_seconds(r);
    for (int i = 0, n = comm_groups(r, g); i < n; i++) {
        bytes += g[i]->bytes_sent; msgs += g[i]->msgs_sent; colls += g[i]->collectives;
    }
    metrics_long(mx, "bytes_sent", (long)bytes);
    metrics_long(mx, "msgs_sent", (long)msgs);
    metrics_long(mx, "collectives", (long)colls);
    metrics_double(mx, "comm_s", comm_s);
    /* of which within the training time, and of that the stop decisions */
    const double stop_check_s = bd->check_s + L->check_s;
    metrics_double(mx, "train_comm_s", L->step_comm_s);
    metrics_double(mx, "stop_check_s", stop_check_s);
    /* the regime: computing against communicating (or waiting for it), per
     * step of the lead; a paradigm whose step draws its own samples
     * (Sandblaster's coordinator) computes nothing here */
    if (!L->own_data && steps > 0) {
        metrics_double(mx, "compute_s", L->compute_s);
        metrics_double(mx, "compute_s_per_step", L->compute_s / (double)steps);
        metrics_double(mx, "comm_s_per_step", L->step_comm_s / (double)steps);
        if (L->step_comm_s > 0) metrics_double(mx, "compute_comm_ratio", L->compute_s / L->step_comm_s);
    }
    /* where the training time went, as shares of train_s that add up to 1 */
    if (steps > 0 && L->train_s > 0) {
        const double T = L->train_s;
        if (!L->own_data) metrics_double(mx, "compute_share", L->compute_s / T);
        metrics_double(mx, "comm_share", L->step_comm_s / T);
        metrics_double(mx, "stop_check_share", stop_check_s / T);
        metrics_double(mx, "update_share", L->update_s / T);
        metrics_double(mx, "other_share", (T - L->compute_s - L->step_comm_s - L->update_s) / T);
    }
    if (faults->transient && faults->steps > 0)   /* the lead's share of steps slowed by a transient schedule */
        metrics_double(mx, "slowed_share", (double)faults->slowed_steps / (double)faults->steps);
    if (r->mp_size > 1) {   /* of which within the replica: activations and input gradients */
        metrics_long(mx, "mp_bytes_sent", (long)r->mp_comm.bytes_sent);
        metrics_double(mx, "mp_comm_s", r->mp_comm.comm_s);
        if (r->model->spatial && steps > 0) {   /* an lc model's blocks: the halos, forward and backward */
            metrics_long(mx, "halo_bytes_per_step", (long)(r->mp->halo_bytes / (uint64_t)steps));
            metrics_double(mx, "halo_wait_share", L->train_s > 0 ? r->mp->halo_wait_s / L->train_s : 0.0);
        }
    }
    metrics_double(mx, "peak_rss_mib", peak_rss_mib());   /* the lead's */
    metrics_double(mx, "wall_s", p->time + now_s() - L->t0);
    metrics_double(mx, "train_s", p->train_s + L->train_s);
    if (p->segment > 1) {   /* this process's part of a resumed record */
        metrics_long(mx, "segment", p->segment);
        metrics_long(mx, "segment_steps", steps);
        metrics_long(mx, "segment_samples", samples);
        metrics_double(mx, "segment_wall_s", now_s() - L->t0);
        metrics_double(mx, "segment_train_s", L->train_s);
    }
    metrics_double(mx, "test_acc", ev->acc);
    metrics_double(mx, "test_loss", ev->loss);
    if (ev->step >= 0) metrics_long(mx, "eval_step", ev->step);   /* the evaluation test_acc is from */
    if (L->preempted) metrics_str(mx, "final_eval", "skipped: preempted (the checkpoint went first)");
    bounds_write_done(bd, r, mx);
    sync_stat_t st[16];
    int nst = r->ops->stats ? r->ops->stats(r, st, 16, 0) : 0;
    for (int i = 0; i < nst; i++) {
        if (st[i].raw) metrics_raw(mx, st[i].key, st[i].raw);
        else metrics_double(mx, st[i].key, st[i].value);
    }
    metrics_end(mx);
}

/* The lead's closing lines on stdout. */
static void print_done(run_t *r, const loop_t *L, const bounds_t *bd, const evaluator_t *ev)
{
    const config_t *cfg = r->cfg;
    const long steps = r->step - L->start_step;
    char extra[512];
    stats_text(r, extra, sizeof extra);
    if (L->tty) fputs("\r\033[K", stdout);
    const double wall = now_s() - L->t0;
    printf("done: test accuracy %.4f, test loss %.4f after %ld %s (%.2f epochs) in %.*f s (%.*f s training, %.0f samples/s)%s\n",
           ev->acc, ev->loss, r->step, counts_iterations(r) ? "iterations" : "steps",
           (double)r->step / (double)r->steps_per_epoch, time_decimals(wall), wall, time_decimals(L->train_s), L->train_s,
           L->train_s > 0 ? steps * L->samples_per_step / L->train_s : 0.0, extra);
    if (bd->why) printf("stopped early: %s\n", bd->why == BOUNDS_TIME ? "time limit reached" : "target accuracy reached");
    /* a preempted run saves instead of evaluating at the end */
    if (L->preempted && ev->step < 0) printf("(no evaluation before the preemption: the run was preempted before its first)\n");
    else if (L->preempted && ev->step != r->step) printf("(the accuracy above is the last evaluation's, at step %ld)\n", ev->step);
    if (L->preempted)
        printf("preempted (%s) at step %ld%s%s%s; exit status %d\n", preempt_source(), r->step,
               *cfg->checkpoint ? ": resume with --resume " : "", cfg->checkpoint, *cfg->checkpoint ? "" : " (no --checkpoint: nothing to resume from)",
               PREEMPT_EXIT);
    if (bd->reached) printf("time to target %.4f: %.2f s training, %.2f s since start (step %ld)\n", cfg->target_acc,
                            bd->ttt_train, bd->ttt_wall, bd->ttt_step);
    fflush(stdout);
}

/* --eval-offline, after the run: the snapshots in the order they were
 * taken, recorded with their times (t0: the process's start). */
static void evaluate_snapshots(run_t *r, metrics_t *mx, evaluator_t *ev, bounds_t *bd, double t0)
{
    snapshots_t *s = &ev->snaps;
    if (!s->n) return;
    float *buf = xalloc_floats(s->nparams + s->nstate);
    char err[512];
    for (long i = 0; i < s->n; i++) {
        const snap_meta_t *m = &s->meta[i];
        if (snapshots_read(s, i, buf, err, sizeof err) != 0) run_abort(mx, "%s", err);
        evaluate_model(r, ev, buf, s->nstate ? buf + s->nparams : NULL);
        print_progress(r, ev, m, m->time - t0);
        eval_record(r, mx, ev, m, 1);
        bounds_record_eval(bd, r, ev->acc, m->run_s, m->train_s, m->step);
    }
    free(buf);
    snapshots_free(s);
}

/* The loop has ended: the paradigm's state as the loop left it (a resumed
 * run goes on from there), its final synchronization, the final evaluation
 * and checkpoint. */
static void finish_run(run_t *r, metrics_t *mx, loop_t *L, bounds_t *bd, evaluator_t *ev)
{
    const config_t *cfg = r->cfg;
    ckpt_meta_t state = { .nextra = 0 };
    if (*cfg->checkpoint && !r->server_ckpt && r->ops->ckpt_state && r->ops->ckpt_state(r, &state) != 0) run_abort(mx, "%s", r->err);
    double tf = now_s();
    const double cf = comm_seconds(r);
    bd->stop_s = (L->t_stop >= 0 ? L->t_stop : tf) - bd->t_start;
    if (r->ops->finish) r->ops->finish(r);
    servers_save_failed(r, mx);
    /* a worker that woke past its time limit learns of its eviction only now */
    if (r->comm->evicted && !r->left) leave_evicted(r, mx, cfg);
    if (r->ops->sync_bn) r->ops->sync_bn(r);
    if (r->lead && !L->leading) take_lead(r, mx, cfg, L->t0);   /* the paradigm's finish found the lead dead */
    if (r->lead && r->comm->size > 1) diverge_heard(r, mx);   /* a worker that diverged near the end */
    L->train_s += now_s() - tf;
    L->step_comm_s += comm_seconds(r) - cf;
    bd->sync_done_s = bounds_now(bd);
    if (L->preempted) {
        /* the launcher may kill the ranks soon after it passed the signal on
         * (Open MPI's mpirun: 1 s): what the run has goes to disk first, and
         * the final evaluation is left out; the done event carries the last
         * evaluation's figures and its step (eval_step) */
        if (r->evaluates && *cfg->checkpoint && !r->server_ckpt) {
            if (save_checkpoint(r, &state) != 0) run_save_failed(r, mx);
            checkpoint_record(r, mx, L, bd);
        }
        return;
    }
    if (r->evaluates) {
        double tl = L->loss_n ? L->loss_sum / (double)L->loss_n : NAN, sps = L->seg_t > 0 ? L->seg_samples / L->seg_t : 0;
        bd->final_eval_s = bounds_now(bd);   /* (evaluating the snapshots does not delay it) */
        evaluate_snapshots(r, mx, ev, bd, L->t0);
        evaluate(r, ev, 0);   /* after finish the local model is the final one */
        ev->step = r->step;
        snap_meta_t m;
        const double at = mx->prior.run_s + bd->final_eval_s, train_s = mx->prior.train_s + L->train_s;
        eval_meta(r, tl, sps, at, train_s, r->step * L->samples_per_step, &m);
        print_progress(r, ev, &m, now_s() - L->t0);
        eval_record(r, mx, ev, &m, 0);
        bounds_record_eval(bd, r, ev->acc, at, train_s, r->step);
    }
    if (r->evaluates && *cfg->checkpoint && !r->server_ckpt) {
        if (save_checkpoint(r, &state) != 0) run_save_failed(r, mx);
        checkpoint_record(r, mx, L, bd);
    }
}

int train_main(const config_t *cfg, comm_t *comm)
{
    const double t0 = now_s();
    run_t run, *r = &run;
    ckpt_t resume;
    faults_t faults;
    outputs_lock_t locks = { .fd = { -1, -1 } };
    memset(&resume, 0, sizeof resume);
    cpu_compute_setup((int)cfg->threads, strcmp(cfg->denormals, "keep") != 0);
    setup(r, cfg, comm, &resume, &faults);
    comm_setup_check(comm, r->ops->init && r->ops->init(r) != 0, r->err);
    if (comm_setup_failed(comm, *cfg->resume && r->ops->resume && r->ops->resume(r, &resume) != 0, r->err)) {
        /* every rank is here: the paradigm's collective teardown can run */
        if (r->ops->destroy) r->ops->destroy(r);
        MPI_Finalize();
        exit(1);
    }
    ckpt_free(&resume);
    /* the last check: rank 0 locks the outputs for the run (outputs.h) */
    comm_setup_check(comm, comm->rank == 0 && outputs_lock(cfg, &locks, r->err, sizeof r->err) != 0, r->err);
    comm_preempt_arm();
    bounds_t bd;
    bounds_start(&bd, r);
    if (!r->is_worker) {   /* server / coordinator ranks */
        if (r->ops->serve(r) != 0) die("--sync %s: server failed: %s", cfg->sync, r->err);
        bounds_gather(&bd, r, 0, 0, 0);
        bounds_free(&bd);
        teardown(r);
        outputs_unlock(&locks);
        return 0;
    }
    metrics_t mx;
    open_record(r, &mx, t0);
    fault_rec_t fault = { .mx = &mx, .r = r };
    comm->on_fault = record_fault;
    comm->fault_ctx = &fault;
    evaluator_t ev = { .labels = xmalloc(sizeof(int32_t) * (size_t)(r->test.n ? r->test.n : 1)), .acc = NAN, .loss = NAN,
                       .step = -1 };
    for (long i = 0; i < r->test.n; i++) ev.labels[i] = r->test.y[i];
    if (cfg->eval_offline && r->evaluates && snapshots_open(&ev.snaps, r->err, sizeof r->err) != 0) run_abort(&mx, "%s", r->err);
    loop_t L;
    loop_start(&L, r, t0);

    while (r->step < r->total_steps) {
        comm->step = r->step;
        if (r->step == faults.fail_step && !L.own_data) {
            fprintf(stderr, "dsgd: worker %d (rank %d) exits at step %ld as --fail asked\n", r->wrank, comm->rank, r->step);
            fflush(stderr);
            _exit(3);  /* abrupt: no goodbye to the peers */
        }
        /* the clock is read once per step when nothing happens between
         * steps (see bounds_after_step on why that matters in simulation) */
        const double ts = L.t_carry >= 0 ? L.t_carry : now_s(), cs = L.t_carry >= 0 ? L.c_carry : comm_seconds(r);
        L.t_carry = -1;
        double cc = cs, tc = L.own_data ? ts : compute_gradient(r, &faults, &L, ts, cs, &cc);
        r->lr = lr_at(&r->sched, r->step, bd.sched_t);
        if (r->ops->step(r) != 0) run_abort(&mx, "--sync %s: step %ld failed: %s", cfg->sync, r->step, r->err);
        r->step++;
        if (!r->lead && r->ops->lead_lost && r->ops->lead_lost(r)) {
            take_lead(r, &mx, cfg, t0);
            L.beat = !cfg->quiet && !L.tty;
            L.leading = 1;
        }
        double te = now_s();
        if (comm->evicted) {   /* frozen past --timeout: the servers went on without this worker */
            leave_evicted(r, &mx, cfg);
            break;
        }
        L.update_s += te - tc - (comm_seconds(r) - cc);
        if (after_step(r, &mx, &L, &bd, &ev, ts, te, cs)) break;
    }

    finish_run(r, &mx, &L, &bd, &ev);
    dump_state_for_tests(r);
    const long steps = r->step - L.start_step;
    bounds_gather(&bd, r, steps, steps * (L.own_data ? L.samples_per_step : (long)r->it->nb), L.train_s);
    comm->on_fault = NULL;   /* from here on a fault is not the run's: it has ended */
    record_done(r, &mx, &L, &bd, &ev, &faults);
    if (metrics_close(&mx, 1) != 0) die("cannot write metrics file '%s': %s", cfg->metrics, strerror(errno));
    if (r->lead) print_done(r, &L, &bd, &ev);
    bounds_free(&bd);
    free(ev.labels);
    free(ev.x);
    snapshots_free(&ev.snaps);
    const int preempted = L.preempted;
    teardown(r);
    outputs_unlock(&locks);
    return preempted ? PREEMPT_EXIT : 0;
}

int eval_main(const config_t *cfg, comm_t *comm)
{
    char err[512];
    if (!*cfg->checkpoint) die("dsgd eval needs --checkpoint FILE");
    if (cfg->test_subset < 0) die("--test-subset must be >= 0");
    cpu_compute_setup((int)cfg->threads, strcmp(cfg->denormals, "keep") != 0);
    ckpt_t ck;
    if (ckpt_load(cfg->checkpoint, &ck, err, sizeof err) != 0) die("%s", err);
    run_t run, *r = &run;
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->comm = comm;
    if (load_data(r, cfg, DATA_PARTIAL) != 0) die("%s", r->err);
    if (model_spec_check(ck.meta.model, r->test.c, r->test.h, r->test.w, r->test.classes, err, sizeof err) != 0)
        die("checkpoint '%s' holds model '%s', which does not fit this data: %s", cfg->checkpoint, ck.meta.model, err);
    r->model = model_create(ck.meta.model, r->test.c, r->test.h, r->test.w, r->test.classes, EVAL_CHUNK);
    if (ckpt_restore(&ck, r->model, NULL, err, sizeof err) != 0) die("'%s': %s", cfg->checkpoint, err);
    evaluator_t ev = { .labels = xmalloc(sizeof(int32_t) * (size_t)(r->test.n ? r->test.n : 1)) };
    for (long i = 0; i < r->test.n; i++) ev.labels[i] = r->test.y[i];
    evaluate(r, &ev, 0);
    if (comm->rank == 0)
        printf("model %s, step %ld: test accuracy %.4f, test loss %.4f on %ld samples\n",
               ck.meta.model, ck.meta.step, ev.acc, ev.loss, r->test.n);
    free(ev.labels);
    free(ev.x);
    ckpt_free(&ck);
    teardown(r);
    return 0;
}
