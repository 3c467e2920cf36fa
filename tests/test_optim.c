/* Optimizer updates on small vectors against values worked out by hand
 * (w = [1, -2], g = [0.5, 0.25], lr = 0.1), and the learning-rate schedules. */
#include <limits.h>
#include <string.h>

#include "optim/optim.h"
#include "test.h"

static const float G[2] = { 0.5f, 0.25f };

static void run(opt_kind_t kind, float mu, float wd, int steps, float *w)
{
    optim_cfg_t c = { .kind = kind, .momentum = mu, .weight_decay = wd, .eps = 1e-8f };
    optim_t *o = optim_create(&c, 2);
    w[0] = 1.0f; w[1] = -2.0f;
    for (int s = 0; s < steps; s++) optim_step(o, w, G, 0, 2, 0.1f);
    optim_free(o);
}

static void test_sgd(void)
{
    float w[2];
    run(OPT_SGD, 0, 0, 1, w);
    CHECK_NEAR(w[0], 0.95, 1e-6, "w0"); CHECK_NEAR(w[1], -2.025, 1e-6, "w1");
    run(OPT_SGD, 0, 0.1f, 1, w);   /* g' = g + 0.1 w = [0.6, 0.05] */
    CHECK_NEAR(w[0], 0.94, 1e-6, "wd w0"); CHECK_NEAR(w[1], -2.005, 1e-6, "wd w1");
}

static void test_momentum(void)
{
    float w[2];
    run(OPT_SGD, 0.9f, 0, 2, w);   /* v = g, then v = 1.9 g */
    CHECK_NEAR(w[0], 1.0 - 0.1 * 0.5 - 0.1 * 0.95, 1e-6, "w0");
    CHECK_NEAR(w[1], -2.0 - 0.1 * 0.25 - 0.1 * 0.475, 1e-6, "w1");
}

static void test_nesterov(void)
{
    float w[2];
    run(OPT_NESTEROV, 0.9f, 0, 2, w);  /* w -= lr (g + μ v) with v = g, then v = 1.9 g */
    CHECK_NEAR(w[0], 1.0 - 0.1 * (0.5 + 0.45) - 0.1 * (0.5 + 0.855), 1e-6, "w0");
    CHECK_NEAR(w[1], -2.0 - 0.1 * (0.25 + 0.225) - 0.1 * (0.25 + 0.4275), 1e-6, "w1");
}

static void test_adagrad(void)
{
    float w[2];
    run(OPT_ADAGRAD, 0, 0, 2, w);  /* G = g², then 2g²: steps lr·g/|g| and lr·g/(√2|g|) */
    CHECK_NEAR(w[0], 1.0 - 0.1 - 0.1 / sqrt(2.0), 1e-6, "w0");
    CHECK_NEAR(w[1], -2.0 - 0.1 - 0.1 / sqrt(2.0), 1e-6, "w1");
}

static void test_span(void)
{
    optim_cfg_t c = { .kind = OPT_SGD, .momentum = 0.9f };
    optim_t *o = optim_create(&c, 2);
    float w[2] = { 1.0f, -2.0f };
    optim_step(o, w, G, 1, 1, 0.1f);
    CHECK(w[0] == 1.0f, "update leaked outside the span: w0 = %g", (double)w[0]);
    CHECK_NEAR(w[1], -2.025, 1e-6, "w1");
    CHECK(o->velocity[0] == 0.0f, "velocity outside the span changed");
    optim_free(o);
}

static void test_schedules(void)
{
    lr_sched_t s = { .kind = LR_CONSTANT, .base = 0.1f, .warmup = 4 };
    CHECK_NEAR(lr_at(&s, 0, 0), 0.025, 1e-7, "warm-up step 0");
    CHECK_NEAR(lr_at(&s, 2, 0), 0.075, 1e-7, "warm-up step 2");
    CHECK_NEAR(lr_at(&s, 3, 0), 0.1, 1e-7, "warm-up end");
    CHECK_NEAR(lr_at(&s, 1000, 0), 0.1, 1e-7, "constant");
    lr_sched_t d = { .kind = LR_STEP, .base = 0.1f, .step_every = 10, .gamma = 0.5f };
    CHECK_NEAR(lr_at(&d, 9, 0), 0.1, 1e-7, "before first decay");
    CHECK_NEAR(lr_at(&d, 10, 0), 0.05, 1e-7, "first decay");
    CHECK_NEAR(lr_at(&d, 25, 0), 0.025, 1e-7, "second decay");
    opt_kind_t k;
    CHECK(optim_kind_parse("adam", &k) != 0, "unknown optimizer accepted");
}

/* The out-of-place step (what a parameter-server shard does while a reply
 * is reading its buffer) gives the in-place step's bits, for every
 * optimizer, and leaves its source alone. */
static void test_step_into(void)
{
    enum { N = 1000 };
    static const opt_kind_t kinds[] = { OPT_SGD, OPT_SGD, OPT_NESTEROV, OPT_ADAGRAD };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        optim_cfg_t c = { .kind = kinds[k], .momentum = k == 0 ? 0.0f : 0.9f, .weight_decay = 1e-3f, .eps = 1e-8f };
        optim_t *a = optim_create(&c, N), *b = optim_create(&c, N);
        float w1[N], w2[N], src[N], g[N];
        for (int i = 0; i < N; i++) w1[i] = w2[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        for (int s = 0; s < 5; s++) {
            for (int i = 0; i < N; i++) g[i] = (float)(((i + s) * 53) % 97) / 40.0f - 1.2f;
            optim_step_scaled(a, w1, g, 0.5f, 100, 800, 0.05f);
            memcpy(src, w2, sizeof src);
            optim_step_into(b, w2, src, g, 0.5f, 100, 800, 0.05f);   /* only [100, 900) is written */
            for (int i = 100; i < 900; i++) src[i] = w2[i];
            CHECK(!memcmp(src, w2, sizeof src), "kind %zu step %d: out of place wrote outside its span", k, s);
        }
        CHECK(!memcmp(w1, w2, sizeof w1), "kind %zu: out-of-place bits differ from in-place", k);
        optim_free(a);
        optim_free(b);
    }
}

/* The streaming variant (a parameter server's shared pool): the same bits
 * as optim_step_into, over several of its chunks, from a start that is not
 * 16-byte aligned, and nothing written outside the span. */
static void test_step_into_stream(void)
{
    enum { N = 5000, OFF = 3, CNT = 4500 };
    static const opt_kind_t kinds[] = { OPT_SGD, OPT_SGD, OPT_NESTEROV, OPT_ADAGRAD };
    static float w1[N], w2[N], src[N], g[N];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        optim_cfg_t c = { .kind = kinds[k], .momentum = k == 0 ? 0.0f : 0.9f, .weight_decay = 1e-3f, .eps = 1e-8f };
        optim_t *a = optim_create(&c, N), *b = optim_create(&c, N);
        for (int i = 0; i < N; i++) w1[i] = w2[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        for (int s = 0; s < 4; s++) {
            for (int i = 0; i < N; i++) g[i] = (float)(((i + s) * 53) % 97) / 40.0f - 1.2f;
            memcpy(src, w1, sizeof src);
            optim_step_into(a, w1, src, g, 0.5f, OFF, CNT, 0.05f);
            memcpy(src, w2, sizeof src);
            optim_step_into_stream(b, w2, src, g, 0.5f, OFF, CNT, 0.05f);
            for (int i = OFF; i < OFF + CNT; i++) src[i] = w2[i];
            CHECK(!memcmp(src, w2, sizeof src), "kind %zu step %d: streaming wrote outside its span", k, s);
        }
        CHECK(!memcmp(w1, w2, sizeof w1), "kind %zu: streaming bits differ from optim_step_into", k);
        optim_free(a);
        optim_free(b);
    }
}

/* Cosine: base after the warm-up, half of it halfway, 0 from the end on;
 * the warm-up ramps as for the other schedules. */
static void test_cosine(void)
{
    lr_sched_t s = { .kind = LR_COSINE, .base = 0.4f, .warmup = 10, .total = 110 };
    CHECK_NEAR(lr_at(&s, 0, 0), 0.04, 1e-7, "warm-up start");
    CHECK_NEAR(lr_at(&s, 10, 0), 0.4, 1e-7, "after warm-up");
    CHECK_NEAR(lr_at(&s, 60, 0), 0.2, 1e-6, "halfway");
    CHECK_NEAR(lr_at(&s, 85, 0), 0.4 * 0.5 * (1 + cos(M_PI * 0.75)), 1e-6, "three quarters");
    CHECK(lr_at(&s, 110, 0) == 0.0f && lr_at(&s, 500, 0) == 0.0f, "0 from the end on (%g)", (double)lr_at(&s, 500, 0));
    lr_sched_kind_t k;
    CHECK(lr_sched_parse("cosine", &k) == 0 && k == LR_COSINE, "cosine parses");
    /* over time (--lr-horizon time): the seconds decide, not the steps */
    lr_sched_t t = { .kind = LR_COSINE, .base = 0.4f, .warmup = 10, .total = 110, .horizon_s = 20 };
    CHECK_NEAR(lr_at(&t, 0, 0), 0.04, 1e-7, "time: warm-up start");
    CHECK_NEAR(lr_at(&t, 5, 15), 0.24, 1e-6, "time: the warm-up ramps by steps, as over steps");
    CHECK_NEAR(lr_at(&t, 1000, 10), 0.2, 1e-6, "time: halfway in seconds, whatever the step");
    CHECK_NEAR(lr_at(&t, 60, 5), 0.4 * 0.5 * (1 + cos(M_PI * 0.25)), 1e-6, "time: a quarter");
    CHECK(lr_at(&t, 20, 20) == 0.0f && lr_at(&t, 20, 25) == 0.0f, "time: 0 from the limit on");
}

/* The cosine schedule spans --epochs (a run --steps stops sooner follows
 * it), never less than the run: with --epochs 0 it was 0 steps long and
 * every step trained at rate 0, and steps past --epochs' trained at 0. */
static void test_cosine_length(void)
{
    CHECK(lr_sched_length(3, 100, 50) == 300, "--epochs 3 --steps 50: %ld", lr_sched_length(3, 100, 50));
    CHECK(lr_sched_length(3, 100, 300) == 300, "--epochs 3: %ld", lr_sched_length(3, 100, 300));
    CHECK(lr_sched_length(0, 100, 40) == 40, "--epochs 0 --steps 40: %ld", lr_sched_length(0, 100, 40));
    CHECK(lr_sched_length(1, 100, 1000) == 1000, "--epochs 1 --steps 1000: %ld", lr_sched_length(1, 100, 1000));
    CHECK(lr_sched_length(LONG_MAX / 2, 4, 7) == 7, "an overflowing product: %ld", lr_sched_length(LONG_MAX / 2, 4, 7));
    lr_sched_t s = { .kind = LR_COSINE, .base = 0.4f, .total = lr_sched_length(0, 100, 40) };
    for (long t = 0; t < 40; t++) CHECK(lr_at(&s, t, 0) > 0, "--epochs 0 --steps 40: rate 0 at step %ld", t);
    CHECK_NEAR(lr_at(&s, 20, 0), 0.2, 1e-6, "--epochs 0 --steps 40: half the rate halfway");
    s.warmup = 10;
    s.total = lr_sched_length(0, 100, 8);   /* a warm-up longer than the run still ramps */
    CHECK_NEAR(lr_at(&s, 7, 0), 0.32, 1e-6, "--lr-warmup 10 --steps 8: step 7");
}

/* --weight-decay-bn 0: the nodecay spans get plain SGD, the rest decays;
 * a shard's optimizer (base = its first key) reads the spans shifted. */
static void test_nodecay(void)
{
    const size_t spans[4] = { 2, 3, 8, 1 };   /* [2, 5) and [8, 9) */
    optim_cfg_t c = { .kind = OPT_SGD, .weight_decay = 0.5f, .nodecay = spans, .nnodecay = 2 };
    optim_t *o = optim_create(&c, 10);
    float w[10], g[10] = { 0 };
    for (int i = 0; i < 10; i++) w[i] = 1.0f;
    optim_step(o, w, g, 0, 10, 0.1f);
    for (int i = 0; i < 10; i++) {
        int skip = (i >= 2 && i < 5) || i == 8;
        CHECK_NEAR(w[i], skip ? 1.0 : 1.0 - 0.1 * 0.5, 1e-7, skip ? "no decay in a span" : "decay outside");
    }
    /* a slice [6, 10) of the whole vector: its index 2 is the whole one's 8 */
    optim_t *sh = optim_create(&c, 4);
    sh->base = 6;
    float v[4] = { 1, 1, 1, 1 }, z[4] = { 0 };
    optim_step(sh, v, z, 1, 3, 0.1f);   /* keys 7, 8, 9 */
    CHECK_NEAR(v[0], 1.0, 0, "outside the stepped span");
    CHECK_NEAR(v[1], 0.95, 1e-7, "key 7 decays");
    CHECK_NEAR(v[2], 1.0, 1e-7, "key 8 is in a nodecay span");
    CHECK_NEAR(v[3], 0.95, 1e-7, "key 9 decays");
    optim_free(o);
    optim_free(sh);
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    RUN(test_sgd);
    RUN(test_momentum);
    RUN(test_nesterov);
    RUN(test_adagrad);
    RUN(test_span);
    RUN(test_schedules);
    RUN(test_step_into);
    RUN(test_step_into_stream);
    RUN(test_cosine);
    RUN(test_cosine_length);
    RUN(test_nodecay);
    return TEST_END("test_optim");
}
