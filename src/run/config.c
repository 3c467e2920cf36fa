#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

#define S(f) offsetof(config_t, f)

const opt_def_t config_train_opts[] = {
    { "model", OT_STR, S(model), "mlp", "model spec: logreg | mlp[:H1,H2,...][:tanh] (mlp = mlp:256,128) | lenet[:tanh] | resnet[:D,W] (resnet = resnet:20,16) | lc[:C1,C2,...][:k=K][:s=S][:p=P][:pool=Q] (locally connected; lc = lc:8,16:k=3:s=1:p=1:pool=2)" },
    { "data", OT_STR, S(data), "fashion-mnist", "fashion-mnist | mnist | synthetic[:N[,CxHxW]] (default 4096 images of 1x8x8) | DIR of IDX or CIFAR-10 binary files" },
    { "sync", OT_STR, S(sync), "none", "paradigm, one of those listed under \"paradigms\" at the end" },
    { "epochs", OT_LONG, S(epochs), "3", "training epochs (over the whole training set)" },
    { "steps", OT_LONG, S(steps), "0", "stop after this many steps (0: epochs decide)" },
    { "batch", OT_LONG, S(batch), "64", "minibatch size per worker" },
    { "lr", OT_DOUBLE, S(lr), "0.05", "learning rate" },
    { "lr-schedule", OT_STR, S(lr_schedule), "constant", "constant | step (x lr-gamma every lr-step-every steps) | cosine (half a cosine from lr to 0 over --epochs after the warm-up, or over --steps when they run longer; --steps may stop the run sooner)" },
    { "lr-step-every", OT_LONG, S(lr_step_every), "0", "steps between learning-rate decays (step schedule)" },
    { "lr-gamma", OT_DOUBLE, S(lr_gamma), "0.1", "decay factor of the step schedule" },
    { "lr-warmup", OT_LONG, S(lr_warmup), "0", "linear learning-rate warm-up steps" },
    { "lr-horizon", OT_STR, S(lr_horizon), "steps", "what the cosine schedule decays over: steps (--epochs, or --steps) | time (the --time-limit's seconds from the common start, simulated under SimGrid: a time-bounded run ends at rate 0; the ranks of a lockstep paradigm agree on the time after every step)" },
    { "optimizer", OT_STR, S(optimizer), "sgd", "sgd (with --momentum) | nesterov | adagrad" },
    { "momentum", OT_DOUBLE, S(momentum), "0", "momentum coefficient (0: plain SGD)" },
    { "weight-decay", OT_DOUBLE, S(weight_decay), "0", "L2 weight decay added to the gradient" },
    { "weight-decay-bn", OT_LONG, S(weight_decay_bn), "1", "1: weight decay applies to every parameter; 0: not to batch-normalization weights and biases, nor to any bias" },
    { "adagrad-eps", OT_DOUBLE, S(adagrad_eps), "1e-8", "Adagrad epsilon" },
    { "seed", OT_LONG, S(seed), "1", "seed for initialisation, shuffling and partitioning" },
    { "data-partial", OT_FLAG, S(data_partial), "0", "train on a CIFAR-10 directory that lacks some of data_batch_1.bin ... data_batch_5.bin (refused without it; the start-up lines say which batches are missing)" },
    { "partition", OT_STR, S(partition), "iid", "data partition across workers: iid | full | label-skew" },
    { "augment", OT_STR, S(augment), "none", "training-data augmentation: none | crop | flip | crop,flip (random crop of the zero-padded image by up to 2 pixels, 4 from 32x32; left-right flip)" },
    { "train-subset", OT_LONG, S(train_subset), "0", "use only the first N training samples (0: all)" },
    { "test-subset", OT_LONG, S(test_subset), "0", "evaluate on the first N test samples (0: all)" },
    { "eval-every", OT_LONG, S(eval_every), "0", "evaluate every N steps (0: at the end of every epoch)" },
    { "time-limit", OT_DOUBLE, S(time_limit), "0", "stop every worker this many seconds after the common start (simulated seconds under SimGrid; 0: no limit; --epochs/--steps still apply)" },
    { "target-acc", OT_DOUBLE, S(target_acc), "0", "stop at the first evaluation whose test accuracy reaches this (0: off)" },
    { "target-window", OT_LONG, S(target_window), "1", "--target-acc is reached when the mean test accuracy of the last N evaluations reaches it (1: one evaluation decides; N > 1 keeps a lucky one from deciding, and the time to target is that of the N-th)" },
    { "eval-every-s", OT_DOUBLE, S(eval_every_s), "0", "evaluate every this many seconds (0: off; replaces the per-epoch evaluation unless --eval-every is given)" },
    { "eval-offline", OT_FLAG, S(eval_offline), "0", "at each evaluation only take a snapshot of the model and go on; evaluate the snapshots after the run, with the times they were taken (evaluating then costs the workers nothing)" },
    { "metrics", OT_STR, S(metrics), "", "write JSON-lines metrics to this file" },
    { "checkpoint", OT_STR, S(checkpoint), "", "write a checkpoint here at the end (and every --checkpoint-every steps; parameter-server paradigms: written by the shards)" },
    { "checkpoint-every", OT_LONG, S(checkpoint_every), "0", "steps between checkpoints (0: only at the end)" },
    { "resume", OT_STR, S(resume), "", "continue the run saved in this checkpoint (what each --sync restores, and with how many workers: docs/checkpoints.md)" },
    { "threads", OT_LONG, S(threads), "0", "compute threads of each rank: its kernels (GEMMs, convolutions, batch normalization, the update) split over them, with the same results for every count (0: the cores the rank may use divided among the ranks on its host, at least 1; the simulated build: 1)" },
    { "denormals", OT_STR, S(denormals), "flush", "flush (subnormal floats become zero: fast) | keep (IEEE subnormals: exact, up to several times slower when training is noisy)" },
    { "blas", OT_STR, S(blas), "", "auto (OpenBLAS's best kernels for this CPU, where it fell back to older ones; by default unless OPENBLAS_CORETYPE is set) | keep (those OpenBLAS loaded) | NAME (its kernels NAME: Haswell, SkylakeX, ...)" },
    { "compute", OT_STR, S(compute), "full", "full | none (to calibrate a network: each step skips its forward and backward passes and hands the paradigm a zero gradient of the model's size, so a step takes only its communication and the paradigm's own arithmetic; the model does not learn; not for --model-parallel or --sync lbfgs/sandblaster)" },
    { "diverge-loss", OT_DOUBLE, S(diverge_loss), "100", "stop with exit status 3 when a step's loss exceeds this (or is not finite): the run diverged" },
    { "timeout", OT_DOUBLE, S(timeout), "60", "seconds a rank waits for a peer before declaring it dead" },
    { "wait", OT_STR, S(wait), "backoff", "how idle ranks wait for messages: backoff (poll for one measured wake-up time, none when ranks outnumber cores; then yield; then sleep: frees the core for ranks that compute) | spin (poll 50 us, then yield only: lowest latency on dedicated cores); collective waits never sleep" },
    { "ps-transport", OT_STR, S(ps_transport), "auto", "parameter server within a host: auto (a shard and the workers on its host pass gradients and parameters through shared memory: one copy each way, not two) | shm (the same as auto) | messages (MPI messages only); between hosts always messages" },
    { "slowdown", OT_STR, S(slowdown), "", "slow workers down: W=F[,W=F...] (worker W F times slower; W counts workers from 0, servers and coordinator excluded), FRAC:F (that fraction of workers), or transient:F:SLOW:FAST[:FRAC] (stragglers that come and go: each worker F times slower for random intervals of mean SLOW seconds, at full speed between them for a mean FAST seconds)" },
    { "fail", OT_STR, S(fail), "", "crash workers abruptly: W@S[,W@S...] (worker W exits at its step S; W counts workers from 0, servers and coordinator excluded); gossip also W@S:publishing (exits mid-publication), W@S:freeze (SIGSTOP between reading a peer and judging it); dump-state:PREFIX (tests: each worker's batch-norm statistics to PREFIX.RANK at the end)" },
    { "bucket-kb", OT_LONG, S(bucket_kb), "0", "bsp: fuse adjacent layers' gradients into all-reduces of at least this many KiB, each started when it is full (0: one all-reduce per layer, started as soon as its gradient is final)" },
    { "sync-bn", OT_FLAG, S(sync_bn), "0", "bsp: batch normalization over every replica's batch together (per-channel sums exchanged in each forward and backward pass), as one process with the total batch would; without it each replica normalizes its own batch" },
    { "period", OT_LONG, S(period), "8", "localsgd/fedavg: local steps H between parameter averages" },
    { "fedavg-fraction", OT_DOUBLE, S(fedavg_fraction), "1", "fedavg: fraction C of workers sampled each round" },
    { "delta", OT_DOUBLE, S(delta), "0.3", "selsync: synchronize when the smoothed relative gradient change >= delta" },
    { "window", OT_LONG, S(window), "25", "selsync: window W of the EWMAs (and warm-up steps that always sync)" },
    { "smoothing", OT_DOUBLE, S(smoothing), "0.01", "selsync: EWMA smoothing a" },
    { "aggregation", OT_STR, S(aggregation), "parameter", "selsync: what a sync averages: parameter | gradient" },
    { "servers", OT_LONG, S(servers), "1", "parameter server: server ranks (the first S ranks; the rest are workers; sandblaster: ranks 1..S, after the coordinator)" },
    { "staleness", OT_LONG, S(staleness), "3", "ssp: staleness bound s (0 = BSP)" },
    { "staleness-low", OT_LONG, S(staleness_low), "3", "dssp: lower staleness bound s_L" },
    { "staleness-high", OT_LONG, S(staleness_high), "15", "dssp: upper staleness bound s_U" },
    { "server-opt", OT_STR, S(server_opt), "", "parameter server: optimizer the shards apply: sgd | momentum | nesterov | adagrad (default: --optimizer)" },
    { "adagrad-lr", OT_DOUBLE, S(adagrad_lr), "0", "parameter server: fixed server learning rate (Downpour's Adagrad gamma; 0: the workers' --lr)" },
    { "fetch-every", OT_LONG, S(fetch_every), "1", "downpour: steps between parameter fetches (n_fetch)" },
    { "push-every", OT_LONG, S(push_every), "1", "downpour: steps between gradient pushes (n_push)" },
    { "warmup-steps", OT_LONG, S(warmup_steps), "0", "downpour: worker 0 trains this many steps alone first (warm start)" },
    { "tau", OT_LONG, S(tau), "4", "easgd: steps between elastic moves (tau)" },
    { "alpha", OT_DOUBLE, S(alpha), "0", "easgd: elastic rate alpha (0: 0.9/N)" },
    { "momentum-nesterov", OT_DOUBLE, S(momentum_nesterov), "0", "easgd: Nesterov momentum delta of EAMSGD (0: plain EASGD)" },
    { "easgd-mode", OT_STR, S(easgd_mode), "async", "easgd: async (center on the parameter server) | sync (collectives)" },
    { "gossip", OT_STR, S(gossip), "pull", "gossip: pull | push | round" },
    { "beta", OT_DOUBLE, S(beta), "0.5", "gossip: mixing weight of the peer's parameters" },
    { "model-parallel", OT_LONG, S(model_parallel), "1", "model parallelism: each replica spans M consecutive worker ranks, every dense/conv layer split by output units (with none, bsp, downpour)" },
    { "batch-total", OT_LONG, S(batch_total), "0", "lbfgs/sandblaster: samples per L-BFGS iteration (0: the whole training set)" },
    { "portion", OT_STR, S(portion), "auto", "lbfgs/sandblaster: samples per portion handed to a replica (auto: batch-total/(10 x replicas))" },
    { "push-portions", OT_LONG, S(push_portions), "4", "sandblaster: portions a replica sums before pushing to the shards" },
    { "lbfgs-history", OT_LONG, S(lbfgs_history), "10", "lbfgs/sandblaster: curvature pairs kept (m)" },
    { "line-search", OT_STR, S(line_search), "wolfe", "lbfgs/sandblaster: wolfe (weak Wolfe, bisection) | armijo (backtracking)" },
    { "no-backup-tasks", OT_FLAG, S(no_backup_tasks), "0", "sandblaster: never hand idle replicas duplicates of outstanding portions" },
    { "inject-alpha", OT_DOUBLE, S(inject_alpha), "0", "data injection: each batch adds ceil(alpha*C) classes the worker lacks (0: off; paper 0.25)" },
    { "inject-beta", OT_DOUBLE, S(inject_beta), "0.25", "data injection: floor(beta*B*N/C) samples of each injected class" },
    { "progress-every", OT_DOUBLE, S(progress_every), "5", "seconds between progress lines when stdout is not a terminal (under mpirun)" },
    { "quiet", OT_FLAG, S(quiet), "0", "print only errors and the final result" },
    { NULL, 0, 0, NULL, NULL }
};

const opt_def_t config_eval_opts[] = {
    { "checkpoint", OT_STR, S(checkpoint), "", "checkpoint to evaluate (required)" },
    { "data", OT_STR, S(data), "fashion-mnist", "dataset whose test split is used" },
    { "test-subset", OT_LONG, S(test_subset), "0", "evaluate on the first N test samples (0: all)" },
    { "threads", OT_LONG, S(threads), "0", "compute threads (0: the cores this process may use)" },
    { "denormals", OT_STR, S(denormals), "flush", "flush | keep subnormal floats (see dsgd train --help)" },
    { "blas", OT_STR, S(blas), "", "auto | keep | NAME: OpenBLAS's kernels (see dsgd train --help)" },
    { NULL, 0, 0, NULL, NULL }
};

/* The accepted range of every numeric option (of both tables), checked as
 * the value is parsed. open_lo/open_hi: the bound itself is excluded.
 * Step counts stay below 1e12 so step arithmetic (x batch, x epochs) cannot
 * overflow a long. */
typedef struct opt_range { const char *name; double lo, hi; int open_lo, open_hi; } opt_range_t;
#define BIG 1e12
/* sorted by name (bisection; a row out of order fails test_config) */
static const opt_range_t ranges[] = {
    { "adagrad-eps", 0, 1, 1, 0 },       { "adagrad-lr", 0, 1e6, 0, 0 },
    { "alpha", 0, 1, 0, 1 },             { "batch", 1, 1e6, 0, 0 },
    { "batch-total", 0, 1e9, 0, 0 },     { "beta", 0, 1, 1, 0 },
    { "bucket-kb", 0, 1e9, 0, 0 },
    { "checkpoint-every", 0, BIG, 0, 0 }, { "delta", 0, 1e6, 0, 0 },
    { "diverge-loss", 0, 1e30, 1, 0 },
    { "epochs", 0, 1e6, 0, 0 },          { "eval-every", 0, BIG, 0, 0 },
    { "eval-every-s", 0, 1e9, 0, 0 },
    { "fedavg-fraction", 0, 1, 1, 0 },   { "fetch-every", 1, 1e9, 0, 0 },
    { "inject-alpha", 0, 1, 0, 0 },      { "inject-beta", 0, 1e6, 0, 0 },
    { "lbfgs-history", 1, 1000, 0, 0 },  { "lr", 0, 1e6, 1, 0 },
    { "lr-gamma", 0, 1e6, 1, 0 },        { "lr-step-every", 0, BIG, 0, 0 },
    { "lr-warmup", 0, BIG, 0, 0 },       { "model-parallel", 1, 1024, 0, 0 },
    { "momentum", 0, 1, 0, 1 },          { "momentum-nesterov", 0, 1, 0, 1 },
    { "period", 1, 1e9, 0, 0 },          { "progress-every", 0, 1e9, 0, 0 },
    { "push-every", 1, 1e9, 0, 0 },
    { "push-portions", 1, 1e9, 0, 0 },   { "seed", 0, 9.2e18, 0, 0 },
    { "servers", 1, 1e6, 0, 0 },         { "smoothing", 0, 1, 0, 1 },
    { "staleness", 0, 1e9, 0, 0 },       { "staleness-high", 0, 1e9, 0, 0 },
    { "staleness-low", 0, 1e9, 0, 0 },   { "steps", 0, BIG, 0, 0 },
    { "target-acc", 0, 1, 0, 0 },        { "target-window", 1, 1e6, 0, 0 },
    { "tau", 1, 1e9, 0, 0 },             { "test-subset", 0, 1e9, 0, 0 },
    { "threads", 0, 256, 0, 0 },         { "time-limit", 0, 1e9, 0, 0 },
    { "timeout", 0.5, 1e6, 0, 0 },       /* below: a busy core's scheduling delay reads as a death */
    { "train-subset", 0, 1e9, 0, 0 },    { "warmup-steps", 0, BIG, 0, 0 },
    { "weight-decay", 0, 1e6, 0, 0 },    { "weight-decay-bn", 0, 1, 0, 0 },
    { "window", 1, 1e9, 0, 0 },
};
#undef BIG

static int range_cmp(const void *key, const void *g) { return strcmp(key, ((const opt_range_t *)g)->name); }

static const opt_range_t *find_range(const char *name)
{
    return bsearch(name, ranges, sizeof ranges / sizeof ranges[0], sizeof ranges[0], range_cmp);
}

int config_range_known(const char *name) { return find_range(name) != NULL; }

static const opt_def_t *find_opt(const opt_def_t *t, const char *name, size_t len)
{
    for (; t->name; t++)
        if (strlen(t->name) == len && !strncmp(t->name, name, len)) return t;
    return NULL;
}

static int check_range(const opt_def_t *o, double v, const char *text, char *err, size_t errlen)
{
    const opt_range_t *g = find_range(o->name);
    if (!g) { snprintf(err, errlen, "--%s has no range (a defect: add it to config.c)", o->name); return -1; }
    if ((g->open_lo ? v > g->lo : v >= g->lo) && (g->open_hi ? v < g->hi : v <= g->hi)) return 0;
    if (o->type == OT_LONG && g->lo == 1)
        snprintf(err, errlen, "--%s must be a positive integer up to %.0f (got %s)", o->name, g->hi, text);
    else if (g->lo == 0 && g->open_lo)
        snprintf(err, errlen, "--%s must be positive and at most %g (got %s)", o->name, g->hi, text);
    else
        snprintf(err, errlen, "--%s must be in %c%g, %g%c (got %s)", o->name, g->open_lo ? '(' : '[', g->lo, g->hi,
                 g->open_hi ? ')' : ']', text);
    return -1;
}

/* The one parser of option values: strict decimal syntax, then the range. */
static int set_opt(config_t *c, const opt_def_t *o, const char *v, char *err, size_t errlen)
{
    char *base = (char *)c;
    long l;
    double d;
    switch (o->type) {
    case OT_STR: *(const char **)(base + o->offset) = v; return 0;
    case OT_FLAG: *(int *)(base + o->offset) = 1; return 0;
    case OT_LONG:
        if (parse_long(v, &l) != 0) {
            snprintf(err, errlen, "--%s wants a decimal integer, got '%s'", o->name, v);
            return -1;
        }
        if (check_range(o, (double)l, v, err, errlen) != 0) return -1;
        *(long *)(base + o->offset) = l;
        return 0;
    case OT_DOUBLE:
        if (parse_double(v, &d) != 0) {
            snprintf(err, errlen, "--%s wants a decimal number, got '%s'", o->name, v);
            return -1;
        }
        if (check_range(o, d, v, err, errlen) != 0) return -1;
        *(double *)(base + o->offset) = d;
        return 0;
    }
    return -1;
}

void config_defaults(config_t *c, const opt_def_t *table)
{
    char err[256];
    memset(c, 0, sizeof *c);
    /* every option of every table gets a value, so validation sees defaults */
    for (const opt_def_t *o = config_train_opts; o->name; o++)
        if (o->type != OT_FLAG && set_opt(c, o, o->def, err, sizeof err) != 0) die("default of %s", err);
    for (const opt_def_t *o = table; o->name; o++)
        if (o->type != OT_FLAG && set_opt(c, o, o->def, err, sizeof err) != 0) die("default of %s", err);
}

int config_parse(config_t *c, const opt_def_t *table, int argc, char **argv, char *err, size_t errlen)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            snprintf(err, errlen, "unexpected argument '%s'; flags look like --name value (see --help)", a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def_t *o = find_opt(table, name, len);
        if (!o) {
            snprintf(err, errlen, "unknown flag --%.*s (see --help for the list)", (int)len, name);
            return -1;
        }
        const char *v;
        if (o->type == OT_FLAG) {
            if (eq) { snprintf(err, errlen, "--%s takes no value", o->name); return -1; }
            v = "1";
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) { snprintf(err, errlen, "--%s needs a value", o->name); return -1; }
            v = argv[++i];
        }
        if (set_opt(c, o, v, err, errlen) != 0) return -1;
    }
    return 0;
}

int config_validate(const config_t *c, char *err, size_t errlen)
{
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
    /* each numeric option's own range is checked as it is parsed (the table
     * above); here, what one option's range cannot say */
    if (c->epochs == 0 && c->steps <= 0) BAD("--epochs must be positive (got %ld), or give --steps", c->epochs);
    if (strcmp(c->denormals, "flush") && strcmp(c->denormals, "keep"))
        BAD("unknown --denormals '%s'; choose flush or keep", c->denormals);
    if (strcmp(c->compute, "full") && strcmp(c->compute, "none"))
        BAD("unknown --compute '%s'; choose full or none", c->compute);
    if (!strcmp(c->compute, "none") && c->model_parallel > 1)
        BAD("--compute none skips the passes that carry --model-parallel's activations; drop one of them");
    if (strcmp(c->ps_transport, "auto") && strcmp(c->ps_transport, "shm") && strcmp(c->ps_transport, "messages"))
        BAD("unknown --ps-transport '%s'; choose auto, shm or messages", c->ps_transport);
    if (strcmp(c->wait, "backoff") && strcmp(c->wait, "spin"))
        BAD("unknown --wait '%s'; choose backoff or spin", c->wait);
    if (c->eval_offline && c->target_acc > 0)
        BAD("--eval-offline evaluates after the run, so it cannot stop at --target-acc; bound the run by --steps, --epochs "
            "or --time-limit (the metrics still give the time to any accuracy)");
    if (c->checkpoint_every > 0 && !*c->checkpoint) BAD("--checkpoint-every needs --checkpoint FILE");
    if (strcmp(c->lr_horizon, "steps") && strcmp(c->lr_horizon, "time"))
        BAD("unknown --lr-horizon '%s'; choose steps or time", c->lr_horizon);
    if (!strcmp(c->lr_horizon, "time") && (strcmp(c->lr_schedule, "cosine") || c->time_limit <= 0))
        BAD("--lr-horizon time decays a cosine schedule over the time limit: it needs --lr-schedule cosine and --time-limit S");
    if (c->target_window > 1 && c->target_acc <= 0) BAD("--target-window needs --target-acc A");
    if (strcmp(c->aggregation, "parameter") && strcmp(c->aggregation, "gradient"))
        BAD("unknown --aggregation '%s'; choose parameter or gradient", c->aggregation);
    if (strcmp(c->line_search, "wolfe") && strcmp(c->line_search, "armijo"))
        BAD("unknown --line-search '%s'; choose wolfe or armijo", c->line_search);
    if (strcmp(c->portion, "auto")) {
        long p;
        if (parse_long(c->portion, &p) != 0 || p < 1) BAD("--portion must be a positive number of samples or auto (got '%s')", c->portion);
    }
    if (*c->metrics && *c->checkpoint && !strcmp(c->metrics, c->checkpoint))
        BAD("--metrics and --checkpoint name the same file '%s'", c->metrics);
    return 0;
#undef BAD
}

static void help_line(FILE *f, const opt_def_t *t, const char *help)
{
    char head[64];
    snprintf(head, sizeof head, "--%s%s", t->name,
             t->type == OT_FLAG ? "" : t->type == OT_STR ? " S" : t->type == OT_LONG ? " N" : " X");
    if (t->type == OT_FLAG || !*t->def)
        fprintf(f, "  %-22s %s\n", head, help);
    else
        fprintf(f, "  %-22s %s (default: %s)\n", head, help, t->def);
}

/* dsgd train --help lists the flags by group. A paradigm's flags are those
 * whose help names an owner before ':' ("localsgd/fedavg: ..."), listed
 * under that owner in table order; the other groups are named here. A flag
 * named in no group is a general one. */
static const char *const help_groups[][12] = {
    { "general", "model", "sync", NULL },
    { "data", "data", "data-partial", "partition", "train-subset", "test-subset", "inject-alpha", "inject-beta", NULL },
    { "how long, and when to evaluate", "epochs", "steps", "time-limit", "target-acc", "target-window", "eval-every", "eval-every-s", "eval-offline", NULL },
    { "stragglers and faults", "slowdown", "fail", "timeout", "wait", NULL },
    { "output", "metrics", "checkpoint", "checkpoint-every", "resume", "progress-every", "quiet", NULL },
};
#define N_HELP_GROUPS (int)(sizeof help_groups / sizeof help_groups[0])

static int help_group(const opt_def_t *t)
{
    for (int g = 0; g < N_HELP_GROUPS; g++)
        for (int i = 1; help_groups[g][i]; i++)
            if (!strcmp(help_groups[g][i], t->name)) return g;
    /* a flag whose owner is about the data ("training-data augmentation: ...") is a data flag */
    size_t n = strspn(t->help, "abcdefghijklmnopqrstuvwxyz/- ");
    if (t->help[n] == ':' && memmem(t->help, n, "data", 4)) return 1;
    return -1;
}

/* the owner of a paradigm's flag: the help text before ':' (length), or 0 */
static size_t help_owner(const opt_def_t *t)
{
    size_t n = strspn(t->help, "abcdefghijklmnopqrstuvwxyz/- ");
    return t->help[n] == ':' && help_group(t) < 0 ? n : 0;
}

void config_help(FILE *f, const opt_def_t *t)
{
    if (t != config_train_opts) {
        for (; t->name; t++) help_line(f, t, t->help);
        return;
    }
    for (int g = 0; g < N_HELP_GROUPS; g++) {
        fprintf(f, "%s%s:\n", g ? "\n" : "", help_groups[g][0]);
        for (const opt_def_t *o = t; o->name; o++)
            if (help_group(o) == g) help_line(f, o, o->help);
        if (g == 0)
            for (const opt_def_t *o = t; o->name; o++)
                if (help_group(o) < 0 && !help_owner(o)) help_line(f, o, o->help);
        if (g == 1)
            fputs("  a --data DIR holds train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and\n"
                  "  t10k-labels-idx1-ubyte (each may end in .gz; MNIST's IDX format), or CIFAR-10's binary version:\n"
                  "  data_batch_1.bin ... data_batch_5.bin and test_batch.bin (all five training batches, unless --data-partial)\n", f);
    }
    /* the paradigms, each owner once, in the order its first flag appears */
    fputs("\nthe flags below belong to the paradigms named; the others ignore them\n", f);
    for (const opt_def_t *o = t; o->name; o++) {
        size_t n = help_owner(o);
        if (!n) continue;
        const opt_def_t *p = t;
        while (p != o && !(help_owner(p) == n && !strncmp(p->help, o->help, n))) p++;
        if (p != o) continue;
        fprintf(f, "\n%.*s:\n", (int)n, o->help);
        for (p = o; p->name; p++)
            if (help_owner(p) == n && !strncmp(p->help, o->help, n)) help_line(f, p, p->help + n + 1 + (p->help[n + 1] == ' '));
    }
}

static void print_value(FILE *f, const config_t *c, const opt_def_t *o, int json)
{
    const char *base = (const char *)c;
    switch (o->type) {
    case OT_STR: {
        const char *s = *(const char *const *)(base + o->offset);
        if (!json) { fputs(*s ? s : "-", f); break; }
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
            else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
            else fputc(*s, f);
        }
        fputc('"', f);
        break;
    }
    case OT_LONG: fprintf(f, "%ld", *(const long *)(base + o->offset)); break;
    case OT_DOUBLE: fprintf(f, "%.9g", *(const double *)(base + o->offset)); break;
    case OT_FLAG: fputs(*(const int *)(base + o->offset) ? "true" : "false", f); break;
    }
}

char *config_describe(const config_t *c, const opt_def_t *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die("out of memory describing the configuration");
    for (; t->name; t++) {
        fprintf(f, "%s=", t->name);
        print_value(f, c, t, 0);
        fputc('\n', f);
    }
    fclose(f);
    return buf;
}

static int named(const char *const *names, const char *name)
{
    for (; names && *names; names++)
        if (!strcmp(*names, name)) return 1;
    return 0;
}

static int opt_is_default(const config_t *c, const config_t *d, const opt_def_t *o)
{
    const char *a = (const char *)c + o->offset, *b = (const char *)d + o->offset;
    switch (o->type) {
    case OT_STR: return !strcmp(*(const char *const *)a, *(const char *const *)b);
    case OT_LONG: return *(const long *)a == *(const long *)b;
    case OT_DOUBLE: return *(const double *)a == *(const double *)b;
    case OT_FLAG: return *(const int *)a == *(const int *)b;
    }
    return 0;
}

void config_print(FILE *f, const config_t *c, const opt_def_t *t, const char *const *owned)
{
    static const char *const always[] = { "model", "data", "sync", "batch", "lr", NULL };
    config_t d;
    config_defaults(&d, t);
    int col = 0;
    fputs("config:", f);
    for (; t->name; t++) {
        int show = !opt_is_default(c, &d, t) || named(owned, t->name) || named(always, t->name) ||
                   (!strcmp(t->name, "epochs") && c->steps <= 0);
        if (!show) continue;
        int len = (int)strlen(t->name) + 12;
        if (col + len > 100) { fputs("\n       ", f); col = 0; }
        fprintf(f, " %s=", t->name);
        print_value(f, c, t, 0);
        col += len;
    }
    fputc('\n', f);
}

void config_json(FILE *f, const config_t *c, const opt_def_t *t)
{
    for (int first = 1; t->name; t++, first = 0) {
        fprintf(f, "%s\"%s\":", first ? "" : ",", t->name);
        print_value(f, c, t, 1);
    }
}
