#include "faults.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../util/util.h"

/* transient:F:SLOW:FAST[:FRAC]; returns 0, or -1 with err */
static int parse_transient(faults_t *f, const char *spec, int wrank, int nworkers, uint64_t seed,
                           char *err, size_t errlen)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec + strlen("transient:"));
    double v[4] = { 0, 0, 0, 1.0 };
    int k = 0;
    for (char *s = buf, *tok; (tok = strsep(&s, ":")) != NULL;) {
        if (k == 4 || parse_double(tok, &v[k])) { k = -1; break; }
        k++;
    }
    if (k < 3 || v[0] < 1 || !(v[1] > 0) || !(v[2] > 0) || v[1] > 1e9 || v[2] > 1e9 || !(v[3] > 0) || v[3] > 1) {
        snprintf(err, errlen, "bad --slowdown '%s'; want transient:F:SLOW:FAST[:FRAC] with F >= 1, mean intervals "
                 "SLOW, FAST > 0 seconds and 0 < FRAC <= 1, e.g. transient:4:2:6", spec);
        return -1;
    }
    int n = (int)ceil(v[3] * nworkers - 1e-9);
    if (wrank >= nworkers - n) f->slowdown = v[0];
    f->transient = 1;
    f->slow_s = v[1];
    f->fast_s = v[2];
    f->next_switch = -1;
    rng_seed(&f->rng, seed, 0x7a5e0000u + (uint64_t)wrank);   /* a stream of its own per worker */
    return 0;
}

/* one item of --fail: W@S[:publishing|:freeze] or dump-state:PREFIX */
static int parse_fail(faults_t *f, char *tok, const char *fail, int wrank, int nworkers, char *err, size_t errlen)
{
    if (strncmp(tok, "dump-state:", 11) == 0 && tok[11]) {
        snprintf(f->dump_prefix, sizeof f->dump_prefix, "%s", tok + 11);
        return 0;
    }
    char *at = strchr(tok, '@'), *how = at ? strchr(at, ':') : NULL;
    long rank, step;
    if (how) *how++ = 0;
    if (!at || (*at = 0, parse_long(tok, &rank)) || parse_long(at + 1, &step) || step < 0 || rank < 0 ||
        rank >= nworkers || (how && strcmp(how, "publishing") && strcmp(how, "freeze"))) {
        snprintf(err, errlen, "bad --fail '%s'; want W@S with worker index 0 <= W < %d and step S >= 0, e.g. %d@50 "
                 "(gossip also W@S:publishing, W@S:freeze)", fail, nworkers, nworkers - 1);
        return -1;
    }
    if (rank != wrank) return 0;
    if (!how) f->fail_step = step;
    else if (!strcmp(how, "publishing")) f->publishing_step = step;
    else f->freeze_step = step;
    return 0;
}

int faults_parse(faults_t *f, const char *slowdown, const char *fail, int wrank, int nworkers,
                 uint64_t seed, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->slowdown = 1.0;
    f->fail_step = f->publishing_step = f->freeze_step = -1;
    char buf[512];
    if (strncmp(slowdown, "transient:", 10) == 0) {
        if (parse_transient(f, slowdown, wrank, nworkers, seed, err, errlen) != 0) return -1;
    } else if (*slowdown) {
        snprintf(buf, sizeof buf, "%s", slowdown);
        char *colon = strchr(buf, ':');
        if (colon) {
            *colon = 0;
            double frac, fac;
            if (parse_double(buf, &frac) || parse_double(colon + 1, &fac) || frac <= 0 || frac > 1 || fac < 1) {
                snprintf(err, errlen, "bad --slowdown '%s'; want FRAC:F with 0 < FRAC <= 1 and F >= 1, e.g. 0.25:4", slowdown);
                return -1;
            }
            int k = (int)ceil(frac * nworkers - 1e-9);
            if (wrank >= nworkers - k) f->slowdown = fac;
        } else {
            for (char *s = buf, *tok; (tok = strsep(&s, ",")) != NULL;) {
                char *eq = strchr(tok, '=');
                long rank;
                double fac;
                if (!eq || (*eq = 0, parse_long(tok, &rank)) || parse_double(eq + 1, &fac) || fac < 1 ||
                    rank < 0 || rank >= nworkers) {
                    snprintf(err, errlen, "bad --slowdown '%s'; want W=F with worker index 0 <= W < %d and F >= 1, e.g. %d=4",
                             slowdown, nworkers, nworkers - 1);
                    return -1;
                }
                if (rank == wrank) f->slowdown = fac;
            }
        }
    }
    if (*fail) {
        snprintf(buf, sizeof buf, "%s", fail);
        for (char *s = buf, *tok; (tok = strsep(&s, ",")) != NULL;)
            if (parse_fail(f, tok, fail, wrank, nworkers, err, errlen) != 0) return -1;
    }
    return 0;
}

/* an exponential interval of the given mean */
static double interval(rng_t *r, double mean)
{
    return -mean * log1p(-rng_uniform(r));   /* 1 − u in (0, 1] */
}

double faults_factor(faults_t *f, double now)
{
    if (!f->transient || f->slowdown <= 1.0) return f->slowdown;
    if (f->next_switch < 0) {   /* start in the stationary state */
        f->slowed = rng_uniform(&f->rng) < f->slow_s / (f->slow_s + f->fast_s);
        f->next_switch = now + interval(&f->rng, f->slowed ? f->slow_s : f->fast_s);
    }
    while (now >= f->next_switch) {
        f->slowed = !f->slowed;
        f->next_switch += interval(&f->rng, f->slowed ? f->slow_s : f->fast_s);
    }
    return f->slowed ? f->slowdown : 1.0;
}

void faults_delay(faults_t *f, double compute_s, double now)
{
    double F = faults_factor(f, now);
    f->steps++;
    if (F <= 1.0 || compute_s <= 0) return;
    f->slowed_steps++;
    double d = (F - 1.0) * compute_s;
    struct timespec ts = { .tv_sec = (time_t)d, .tv_nsec = (long)((d - floor(d)) * 1e9) };
    nanosleep(&ts, NULL);
}

void faults_exit_if_due(const faults_t *f, long step, const char *who, int index, int rank, const char *when)
{
    if (step != f->fail_step) return;
    fprintf(stderr, "dsgd: %s %d (rank %d) exits %s %ld as --fail asked\n", who, index, rank, when, step);
    fflush(stderr);
    _exit(3);   /* abrupt: no goodbye to the peers */
}

int faults_should_die_publishing(const faults_t *f, long step) { return step == f->publishing_step; }

int faults_should_freeze(faults_t *f, long step)
{
    if (step != f->freeze_step) return 0;
    f->freeze_step = -1;
    return 1;
}

void faults_dump_state(const faults_t *f, int rank, const float *state, size_t n)
{
    if (!f->dump_prefix[0] || !n) return;
    char path[300];
    snprintf(path, sizeof path, "%s.%d", f->dump_prefix, rank);
    FILE *out = fopen(path, "wb");
    if (!out) return;
    fwrite(state, sizeof(float), n, out);
    fclose(out);
}
