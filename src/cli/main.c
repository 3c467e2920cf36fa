/* dsgd — command-line entry: parse, validate, dispatch. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../comm/comm.h"
#include "../run/config.h"
#include "../sync/sync.h"
#include "../train/metrics.h"
#include "../train/train.h"
#include "../util/blas.h"
#include "../util/util.h"

#define DSGD_VERSION "0.1.0"

/* The paradigms as the registry has them: each one's name, what it does
 * and the options it takes. */
static void paradigms_help(FILE *f)
{
    fputs("\nparadigms (--sync):\n", f);
    for (int i = 0; i < sync_count(); i++) {
        const sync_ops_t *o = sync_at(i);
        fprintf(f, "  %-22s %s\n", o->name, o->help);
        if (!o->options) continue;
        fprintf(f, "  %-22s takes", "");
        for (const char *const *n = o->options; *n; n++) fprintf(f, " --%s", *n);
        fputc('\n', f);
    }
}

static void usage(FILE *f)
{
    fputs("dsgd " DSGD_VERSION " - distributed SGD under many synchronization paradigms\n\n"
          "usage:\n"
          "  dsgd train [flags]            train a model (under mpirun for distributed paradigms)\n"
          "  dsgd eval --checkpoint FILE   evaluate a checkpoint on a dataset's test split\n"
          "  dsgd --help | dsgd train --help | dsgd eval --help\n"
          "  dsgd version                  dsgd's version and the MPI library it runs on\n"
          "  dsgd status METRICS           how a run ended, from its metrics file; exits 0 only if it ended ok\n"
          "                                (143 preempted, 3 diverged, 1 another failure, 2 not ended)\n\n"
          "train flags:\n", f);
    config_help(f, config_train_opts);
    paradigms_help(f);
    fputs("\neval flags:\n", f);
    config_help(f, config_eval_opts);
}

/* The MPI library's own first line (MPICH's string goes on with its
 * configure options), so that users and scripts can tell which MPI, and
 * hence which launcher, the binary needs. */
static void print_version(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = 0;
    for (char *p = lib; *p; p++)
        if (*p == '\t') *p = ' ';
    char *s = lib;
    while (*s == ' ') s++;
    char blas[256], cpu[256];
    blas_describe(blas, sizeof blas);
    blas_cpu(cpu, sizeof cpu);
    printf("dsgd %s\nmpi: %s\nblas: OpenBLAS %s\ncpu: %s\n", DSGD_VERSION, *s ? s : "unknown", blas, cpu);
}

static int wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    return 0;
}

/* dsgd status METRICS: no MPI, so a batch script can run it anywhere. */
static int status_main(int argc, char **argv)
{
    if (argc != 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
        fprintf(argc == 3 ? stdout : stderr, "usage: dsgd status METRICS   (exit 0 only if the run ended with status ok)\n");
        return argc == 3 ? 0 : 1;
    }
    char line[1024];
    int rc = metrics_status(argv[2], line, sizeof line);
    fprintf(rc == 0 ? stdout : stderr, "%s%s\n", rc == 0 ? "" : "dsgd status: ", line);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "status")) return status_main(argc, argv);
#ifdef _OPENMP
    /* The kernels' threads (--threads, util/par.h) spin only briefly at a
     * join before they sleep. libgomp's default, a long spin, is fine on
     * idle cores but, where other processes share them, a spinning thread
     * loses its turn to the one it waits for: resnet:20,16 with 2 threads
     * on 2 busy cores ran at 59 samples/s spinning, 325 with 1000 spins
     * (1 thread: 346). libgomp reads GOMP_SPINCOUNT when it loads, before
     * main: hence a restart, the same process (execv), as blas_choose
     * does; a user's OMP_WAIT_POLICY or GOMP_SPINCOUNT stands. */
    if (!getenv("GOMP_SPINCOUNT") && !getenv("OMP_WAIT_POLICY")) {
        setenv("GOMP_SPINCOUNT", "1000", 1);
        execv("/proc/self/exe", argv);   /* on failure: go on with the default */
    }
#endif
    blas_choose(argc, argv);   /* may start this process again with other BLAS kernels */
    /* train and eval parse their flags before MPI starts: the paradigm's
     * messages decide how MPI is set up (comm_init); an error is reported
     * once MPI has said which rank leads */
    const int is_train = argc >= 2 && !strcmp(argv[1], "train");
    const int runs = is_train || (argc >= 2 && !strcmp(argv[1], "eval"));
    const opt_def_t *table = is_train ? config_train_opts : config_eval_opts;
    config_t cfg;
    char err[512] = "";
    const int helping = runs && wants_help(argc - 2, argv + 2);
    int parsed = -1;
    if (runs && !helping) {
        config_defaults(&cfg, table);
        parsed = config_parse(&cfg, table, argc - 2, argv + 2, err, sizeof err);
    }
    const sync_ops_t *ops = parsed == 0 ? sync_find(cfg.sync) : NULL;
    comm_t comm;
    comm_init(&comm, &argc, &argv, !is_train || (ops && ops->posted_receives));
    /* MPICH's launcher, told to keep a job whose rank died running
     * (-disable-auto-cleanup), signals the survivors with SIGUSR1, which
     * would kill them; dsgd finds dead peers itself, by timeouts. */
    struct sigaction usr1;
    if (sigaction(SIGUSR1, NULL, &usr1) == 0 && usr1.sa_handler == SIG_DFL) signal(SIGUSR1, SIG_IGN);
    int rc = 0;
    const int lead = comm.rank == 0;
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        if (lead) usage(stdout);
        rc = argc < 2 ? 2 : 0;
    } else if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        if (lead) print_version();
    } else if (runs) {
        if (helping) {
            if (lead) {
                printf("usage: dsgd %s [flags]\n\n", argv[1]);
                config_help(stdout, table);
                if (is_train) paradigms_help(stdout);
            }
        } else if (parsed != 0) {
            /* every rank parsed the same arguments: one line for the job */
            if (lead) fprintf(stderr, "dsgd: error: %s\n", err);
            rc = 1;
        } else {
            rc = is_train ? train_main(&cfg, &comm) : eval_main(&cfg, &comm);
        }
    } else {
        die("unknown command '%s'; commands: train, eval, status, version (see dsgd --help)", argv[1]);
    }
    comm_finalize(&comm);
    return rc;
}
