#include "faults.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/util.h"

int faults_parse(faults_t *f, const char *slowdown, const char *fail, int wrank, int nworkers,
                 char *err, size_t errlen)
{
    f->slowdown = 1.0;
    f->fail_step = -1;
    char buf[512];
    if (*slowdown) {
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
        for (char *s = buf, *tok; (tok = strsep(&s, ",")) != NULL;) {
            char *at = strchr(tok, '@');
            long rank, step;
            if (!at || (*at = 0, parse_long(tok, &rank)) || parse_long(at + 1, &step) || step < 0 ||
                rank < 0 || rank >= nworkers) {
                snprintf(err, errlen, "bad --fail '%s'; want W@S with worker index 0 <= W < %d and step S >= 0, e.g. %d@50",
                         fail, nworkers, nworkers - 1);
                return -1;
            }
            if (rank == wrank) f->fail_step = step;
        }
    }
    return 0;
}

void faults_delay(const faults_t *f, double compute_s)
{
    if (f->slowdown <= 1.0 || compute_s <= 0) return;
    double d = (f->slowdown - 1.0) * compute_s;
    struct timespec ts = { .tv_sec = (time_t)d, .tv_nsec = (long)((d - floor(d)) * 1e9) };
    nanosleep(&ts, NULL);
}
