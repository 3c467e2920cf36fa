/* run/config — the run configuration and the one table of options that
 * drives parsing, --help (with defaults), the printed effective
 * configuration and the "config" metrics event. Adding a flag is one row. */
#ifndef DSGD_CONFIG_H
#define DSGD_CONFIG_H

#include <stddef.h>
#include <stdio.h>

typedef struct config {
    const char *model, *data, *sync, *optimizer, *lr_schedule, *partition;
    const char *metrics, *checkpoint, *resume;
    const char *slowdown, *fail, *aggregation, *server_opt;
    const char *denormals;             /* flush | keep */
    const char *compute;               /* full | none (forward and backward skipped: train.c) */
    const char *blas;                  /* "" | auto | keep | an OpenBLAS core: taken before MPI starts (util/blas.h) */
    const char *ps_transport;          /* auto | messages: the parameter server within a host (ps/shm.h) */
    const char *wait;                  /* backoff | spin: idle polling (comm_idle) */
    const char *augment;               /* none | crop | flip | crop,flip */
    long weight_decay_bn;              /* 0: no weight decay on batch-norm parameters and biases */
    long epochs, steps, batch, seed, train_subset, test_subset;
    long eval_every, checkpoint_every, lr_step_every, lr_warmup, threads;
    double lr, momentum, weight_decay, adagrad_eps, lr_gamma;
    double timeout;
    double diverge_loss;               /* a step's loss above this is divergence */
    double time_limit, target_acc, eval_every_s;   /* bounded runs (bounds.h) */
    long target_window;                /* --target-acc: over the mean of this many evaluations */
    const char *lr_horizon;            /* steps | time: what a cosine schedule decays over */
    int eval_offline;                  /* snapshots during the run, evaluated after it */
    int data_partial;                  /* accept a CIFAR-10 directory without all its training batches */
    long bucket_kb;                    /* bsp: all-reduce buckets (0: per layer) */
    int sync_bn;                       /* bsp: batch normalization over all replicas' batches */
    long period, window;               /* localsgd H; selsync W */
    double fedavg_fraction, delta, smoothing;
    double inject_alpha, inject_beta;  /* SelSync's non-IID data injection */
    long servers, staleness, staleness_low, staleness_high;  /* parameter server */
    long fetch_every, push_every, warmup_steps;               /* Downpour */
    double adagrad_lr;
    const char *easgd_mode, *gossip;                          /* EASGD, gossip */
    long tau;
    long model_parallel;                                      /* M ranks per replica */
    double alpha, momentum_nesterov, beta;
    long batch_total, push_portions, lbfgs_history;           /* L-BFGS, Sandblaster */
    const char *portion, *line_search;
    int no_backup_tasks;
    double progress_every;             /* seconds between plain progress lines */
    int quiet;
} config_t;

typedef enum opt_type { OT_STR, OT_LONG, OT_DOUBLE, OT_FLAG } opt_type_t;

typedef struct opt_def {
    const char *name;      /* without the leading "--" */
    opt_type_t type;
    size_t offset;         /* into config_t */
    const char *def;       /* default, as text */
    const char *help;
} opt_def_t;

extern const opt_def_t config_train_opts[];
extern const opt_def_t config_eval_opts[];

void config_defaults(config_t *c, const opt_def_t *table);
/* Parse argv[0..argc) as --name value / --name=value / --flag. On error
 * writes a one-line message to err and returns -1. */
int config_parse(config_t *c, const opt_def_t *table, int argc, char **argv, char *err, size_t errlen);
/* Whether a numeric option has an accepted range (every one must). */
int config_range_known(const char *name);
/* What no single option's range says (an option that needs another, names
 * of choices, two outputs on one file); -1 with a message on error. Each
 * numeric option's range is checked once, as config_parse reads it. */
int config_validate(const config_t *c, char *err, size_t errlen);
void config_help(FILE *f, const opt_def_t *table);
/* "name=value\n" for every option: what ranks compare at start-up. */
char *config_describe(const config_t *c, const opt_def_t *table);
/* "name=value ..." for the start-up print: what the run uses (model, data,
 * sync, batch, lr, and the paradigm's own options, named in owned from
 * its registry row) and every option changed from its default; the
 * metrics "config" event has them all. */
void config_print(FILE *f, const config_t *c, const opt_def_t *table, const char *const *owned);
/* The configuration as the members of a JSON object (no braces). */
void config_json(FILE *f, const config_t *c, const opt_def_t *table);

#endif
