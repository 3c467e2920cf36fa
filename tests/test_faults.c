/* --slowdown's schedules: the static forms pick the workers they name, and
 * a transient schedule slows a worker for the share of time its means say,
 * in intervals of the means it was given, the same way every time. */
#include <math.h>
#include <string.h>

#include "run/faults.h"
#include "test.h"

static void test_static(void)
{
    faults_t f;
    char err[256];
    CHECK(faults_parse(&f, "2=4", "", 2, 4, 1, err, sizeof err) == 0, "W=F parses: %s", err);
    CHECK(f.slowdown == 4 && faults_factor(&f, 0) == 4 && faults_factor(&f, 1e6) == 4, "worker 2 is 4x slower, always");
    CHECK(faults_parse(&f, "2=4", "", 1, 4, 1, err, sizeof err) == 0 && faults_factor(&f, 5) == 1, "worker 1 is not");
    CHECK(faults_parse(&f, "0.5:3", "", 1, 4, 1, err, sizeof err) == 0 && f.slowdown == 1, "FRAC:F: the first half is not slowed");
    CHECK(faults_parse(&f, "0.5:3", "", 2, 4, 1, err, sizeof err) == 0 && f.slowdown == 3, "FRAC:F: the last half is");
}

static void test_refused(void)
{
    faults_t f;
    char err[256];
    const char *bad[] = { "transient:4:2", "transient:0.5:2:6", "transient:4:0:6", "transient:4:2:-1",
                          "transient:4:2:6:0", "transient:4:2:6:1.5", "transient:4:2:6:1:9", "transient:x:2:6",
                          "transient:", "transient:4:nan:6" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(faults_parse(&f, bad[i], "", 0, 4, 1, err, sizeof err) != 0, "'%s' is refused", bad[i]);
        CHECK(strstr(err, "--slowdown") && strstr(err, "transient:F:SLOW:FAST"), "'%s': the error names the form: %s",
              bad[i], err);
    }
}

/* Walks worker w's schedule from clock 0 to tmax in steps of dt: the share of
 * time slowed, and the mean length of slowed and of full-speed intervals. */
static void walk(uint64_t seed, int w, double tmax, double dt, double *share, double *mslow, double *mfast)
{
    faults_t f;
    char err[256];
    CHECK(faults_parse(&f, "transient:4:1:3", "", w, 8, seed, err, sizeof err) == 0, "transient parses: %s", err);
    CHECK(f.slowdown == 4 && f.transient, "every worker is transient without FRAC");
    long slowed = 0, n = 0, runs[2] = { 0, 0 };
    double len[2] = { 0, 0 }, start = 0;
    int prev = -1;
    for (double t = 0; t < tmax; t += dt, n++) {
        double F = faults_factor(&f, t);
        CHECK(F == 1 || F == 4, "the factor is 1 or F, not %g", F);
        int s = F > 1;
        slowed += s;
        if (s != prev) {
            if (prev >= 0 && start > 0) { len[prev] += t - start; runs[prev]++; }   /* whole intervals only */
            if (prev >= 0) start = t;
            prev = s;
        }
    }
    *share = (double)slowed / (double)n;
    *mslow = runs[1] ? len[1] / (double)runs[1] : 0;
    *mfast = runs[0] ? len[0] / (double)runs[0] : 0;
}

static void test_transient(void)
{
    double share, ms, mf;
    walk(7, 3, 20000, 0.01, &share, &ms, &mf);
    CHECK(fabs(share - 0.25) < 0.03, "slowed a quarter of the time (SLOW 1, FAST 3): %.3f", share);
    CHECK(fabs(ms - 1.0) < 0.1, "slowed intervals last 1 s on average: %.3f", ms);
    CHECK(fabs(mf - 3.0) < 0.3, "full-speed intervals last 3 s on average: %.3f", mf);
    double s2, ms2, mf2;
    walk(7, 3, 20000, 0.01, &s2, &ms2, &mf2);
    CHECK(s2 == share && ms2 == ms && mf2 == mf, "the same seed and worker draw the same schedule");
    walk(7, 4, 20000, 0.01, &s2, &ms2, &mf2);
    CHECK(s2 != share, "another worker draws a schedule of its own");
    walk(8, 3, 20000, 0.01, &s2, &ms2, &mf2);
    CHECK(s2 != share, "another seed draws another schedule");
    /* the stationary start: across workers, about a quarter begin slowed */
    int begun = 0;
    for (int w = 0; w < 400; w++) {
        faults_t f;
        char err[256];
        CHECK(faults_parse(&f, "transient:4:1:3", "", w % 8, 8, 100 + (uint64_t)w, err, sizeof err) == 0, "parses");
        begun += faults_factor(&f, 10.0) > 1;
    }
    CHECK(begun > 60 && begun < 140, "about a quarter of the workers start slowed: %d of 400", begun);
    /* FRAC: only the last ⌈FRAC·N⌉ workers are ever slowed */
    faults_t f;
    char err[256];
    CHECK(faults_parse(&f, "transient:4:1:3:0.25", "", 5, 8, 1, err, sizeof err) == 0, "FRAC parses");
    int ever = 0;
    for (double t = 0; t < 100; t += 0.1) ever |= faults_factor(&f, t) > 1;
    CHECK(!ever, "worker 5 of 8 is outside the last quarter: never slowed");
    CHECK(faults_parse(&f, "transient:4:1:3:0.25", "", 6, 8, 1, err, sizeof err) == 0, "FRAC parses");
    ever = 0;
    for (double t = 0; t < 100; t += 0.1) ever |= faults_factor(&f, t) > 1;
    CHECK(ever, "worker 6 of 8 is inside: slowed at some time in 100 s");
}

/* --fail's kinds: each names its worker and step, and asks nothing of the others */
static void test_fail(void)
{
    faults_t f;
    char err[256];
    CHECK(faults_parse(&f, "", "1@20,2@30:publishing,2@40:freeze,dump-state:/tmp/x/bn", 2, 4, 1, err, sizeof err) == 0,
          "the kinds mix in one list: %s", err);
    CHECK(f.fail_step == -1, "worker 2 does not exit at step 20");
    CHECK(faults_should_die_publishing(&f, 30) && !faults_should_die_publishing(&f, 29), "it dies publishing step 30");
    CHECK(!faults_should_freeze(&f, 39) && faults_should_freeze(&f, 40) && !faults_should_freeze(&f, 40),
          "it freezes at step 40, once");
    CHECK(!strcmp(f.dump_prefix, "/tmp/x/bn"), "dump-state keeps its prefix: '%s'", f.dump_prefix);
    CHECK(faults_parse(&f, "", "1@20,2@30:publishing", 1, 4, 1, err, sizeof err) == 0 && f.fail_step == 20 &&
          !faults_should_die_publishing(&f, 30) && !f.dump_prefix[0], "worker 1 exits at step 20, and only that");
    const char *bad[] = { "1@", "4@2", "1@2:later", "1@-1", "dump-state:", "x" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        CHECK(faults_parse(&f, "", bad[i], 0, 4, 1, err, sizeof err) != 0 && strstr(err, "--fail") && strstr(err, "W@S"),
              "--fail '%s' is refused naming the form: %s", bad[i], err);
    }
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_static);
    RUN(test_refused);
    RUN(test_transient);
    RUN(test_fail);
    return TEST_END("test_faults");
}
