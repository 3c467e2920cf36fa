/* Minimal test harness: each TEST is a function; CHECK records a failure
 * with file:line and a message; main runs the tests and prints
 * "<binary>: N passed, M failed" which tests/run.sh adds up. */
#ifndef DSGD_TEST_H
#define DSGD_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct test_state { int failed_checks; int passed, failed; } test_state_t;
static test_state_t T;

#define CHECK(cond, ...) do {                                              \
        if (!(cond)) {                                                     \
            T.failed_checks++;                                             \
            printf("    FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

#define CHECK_NEAR(a, b, tol, what) do {                                   \
        double a_ = (a), b_ = (b);                                         \
        CHECK(fabs(a_ - b_) <= (tol), "%s: %.9g vs %.9g (tol %.3g)", (what), a_, b_, (double)(tol)); \
    } while (0)

#define RUN(fn) do {                                                       \
        int before_ = T.failed_checks;                                     \
        fn();                                                              \
        if (T.failed_checks == before_) { T.passed++; printf("ok   %s\n", #fn); } \
        else { T.failed++; printf("FAIL %s\n", #fn); }                     \
        fflush(stdout);                                                    \
    } while (0)

/* A test function fn that runs run_set(&set, isa) if this CPU runs the
 * instruction set isa ("x86-64-v3"), and says so otherwise: for the tests
 * that include a kernel file to reach each of its vector sets. */
#define TEST_KERNEL_SET(fn, run_set, set, isa)                             \
    static void fn(void)                                                   \
    {                                                                      \
        if (__builtin_cpu_supports(isa)) run_set(&(set), isa);             \
        else printf("    (no " isa " on this CPU: not run)\n");            \
    }

/* Unit tests do not initialise MPI: the layers below comm never need it,
 * and LeakSanitizer then sees only dsgd's own allocations. */
#define TEST_BEGIN(argc, argv) ((void)(argc), (void)(argv))
#define TEST_END(name) (printf("%s: %d passed, %d failed\n", (name), T.passed, T.failed), T.failed ? 1 : 0)

#endif
