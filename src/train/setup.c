#include "setup.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/par.h"
#include "../util/util.h"
#include "evaluate.h"
#include "outputs.h"
#include "parallel.h"

/* flags: dataset_load's (dsgd eval reads only the test split, so a
 * partial training set does not matter to it) */
int load_data(run_t *r, const config_t *cfg, int flags)
{
    if (dataset_load(cfg->data, flags, &r->train, &r->test, r->err, sizeof r->err) != 0) return -1;
    dataset_truncate(&r->train, cfg->train_subset);
    dataset_truncate(&r->test, cfg->test_subset);
    return 0;
}

#define FAIL(...) do { snprintf(r->err, sizeof r->err, __VA_ARGS__); return -1; } while (0)

/* Called on every rank of the lead's replica (they assemble a partitioned
 * model); the lead writes. */
int save_checkpoint(run_t *r, const ckpt_meta_t *state)
{
    const config_t *cfg = r->cfg;
    const model_t *m;
    const optim_t *o;
    par_assemble(r, &m, &o);
    if (!r->lead) return 0;
    if (r->ops->recalibrate_bn && r->model->nstate) sync_bn_recalibrate(r, r->model->params);
    ckpt_meta_t meta = { .extra = state->extra, .nextra = state->nextra, .params = state->params, .state = state->state };
    sync_ckpt_meta(r, &meta, r->step, r->opt->cfg.kind);
    snprintf(meta.sync_state, sizeof meta.sync_state, "%s", state->sync_state);
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
    if (!strcmp(cfg->compute, "none") && r->ops->step_samples)
        FAIL("--compute none: --sync %s computes its own passes (its portions and line search); drop --compute none", cfg->sync);
    if (cfg->sync_bn && !r->ops->takes_sync_bn)
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
    /* each span of the update on the thread that computed its gradient */
    const int T = par_threads();
    r->owners = xmalloc(sizeof(size_t) * 3 * (size_t)(T + 1) * (size_t)r->model->nlayers);
    r->opt->cfg.owners = r->owners;
    r->opt->cfg.nowners = model_owner_spans(r->model, r->it->nb, T, r->owners, (T + 1) * r->model->nlayers);
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
void setup(run_t *r, const config_t *cfg, comm_t *comm, ckpt_t *resume, faults_t *faults)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->comm = comm;
    r->faults = faults;
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

void teardown(run_t *r)
{
    if (r->ops && r->ops->destroy) r->ops->destroy(r);
    par_free(r);
    batch_iter_free(r->it);
    augment_free(&r->aug);
    free(r->nodecay);
    free(r->owners);
    free(r->part);
    optim_free(r->opt);
    model_free(r->model);
    dataset_free(&r->train);
    dataset_free(&r->test);
}
