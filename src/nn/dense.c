/* nn/dense — a dense layer: forward out = inp · wᵀ + b (B, OUT), a sum
 * over IN; backward dw = doutᵀ · inp (OUT, IN), a sum over the batch, and
 * dinp = dout · w (B, IN), a sum over OUT.
 *
 * Forward runs on dsgd's own vector tiles (dense_kernels.inc): a tile of
 * DENSE_ROWS output features × a vector-width multiple of the batch is
 * summed in registers, each output element from zero in the order of IN,
 * so an element's bits depend only on the shapes and the instruction set,
 * never on which thread computed its tile: any --threads gives the same
 * bits, however the tiles are shared out. Its operands both run along IN
 * (wᵀ), which a GEMM must pack; here the input is transposed instead
 * (B·IN floats, the smaller operand at the batch sizes of SGD) so that the
 * batch becomes the columns, and the (OUT, B) result is transposed back
 * with the bias added, both through a workspace of dense_ws_size floats.
 * Against OpenBLAS's SkylakeX sgemm in fixed pieces (as backward's below),
 * the mlp's first layer's forward went from 268-291 µs to 158-171
 * (docs/design.md, "The dense layer's own tiles"). The tiles are compiled three times on
 * x86-64 with GCC, like conv.c's vector loops: for x86-64-v4 (AVX-512:
 * tiles 6 × 64), -v3 (AVX2 + FMA: 6 × 16) and the baseline (6 × 8, no
 * FMA); the widest the CPU runs is picked at run time.
 *
 * Above a batch of 64, forward goes by strips of 64 samples, each in a
 * workspace block of its own (forward_strips, forward_owned). A ReLU
 * after the layer can be applied in the output transpose, and a ReLU
 * below it taken back in the input gradient as each tile is stored
 * (nn/passes.c decides), with relu_forward's and relu_backward's bits.
 *
 * Backward also runs on tiles at the mlp's sizes (backward_on_tiles);
 * there the weight gradient's tiles go through the batch in stretches, so
 * that their operand stays in L1. The backward products of larger layers
 * are OpenBLAS's sgemm, cut into pieces of whole output columns that are
 * the same for every --threads (util/par.h): an output element is always
 * computed by the same one-thread sgemm call. They cut IN, the columns
 * of dw and dinp (each piece packs
 * all of dout, the smaller B·OUT, and its columns of inp or w); the sum
 * over the batch inside dw's elements is the GEMM's K, never cut. Below
 * DENSE_PIECE_MACS per piece, or columns narrower than DENSE_PIECE_COLS,
 * fewer pieces.
 */
#include "layers.h"

#include <cblas.h>
#include <string.h>

#include "../util/par.h"

enum { DENSE_ROWS = 6, DENSE_KC = 64, DENSE_STRIP = 64 };

typedef struct dense_kernels {
    int tw;   /* columns per tile */
    /* a tile of ≤ DENSE_ROWS rows, ≤ tw columns */
    void (*tile)(float *c, long cs, const float *p, long pr, long pk, const float *q, long qs, int K, int rows,
                 int more, int cols);
    void (*transpose)(float *d, long dld, const float *s, long sld, int n, int c0, int c1, const float *bias,
                      int relu);
} dense_kernels_t;

#define KCAT2(a, b) a##_##b
#define KCAT(a, b) KCAT2(a, b)

#define KVB 16
#define KFN(name) KCAT(name, base)
#define KATTR
#define KNV 2
#include "dense_kernels.inc"
#undef KVB
#undef KFN
#undef KATTR
#undef KNV

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DENSE_X86_SETS 1
#define KVB 32
#define KFN(name) KCAT(name, v3)
#define KATTR __attribute__((target("arch=x86-64-v3"), optimize("fp-contract=fast")))
#define KNV 2
#include "dense_kernels.inc"
#undef KVB
#undef KFN
#undef KATTR
#undef KNV
#define KVB 64
#define KFN(name) KCAT(name, v4)
#define KATTR __attribute__((target("arch=x86-64-v4"), optimize("fp-contract=fast")))
#define KNV 4
#include "dense_kernels.inc"
#undef KVB
#undef KFN
#undef KATTR
#undef KNV
#endif

/* The widest set this CPU runs. */
static const dense_kernels_t *dense_kernels(void)
{
#ifdef DENSE_X86_SETS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return &dense_kernels_v4;
    if (__builtin_cpu_supports("x86-64-v3")) return &dense_kernels_v3;
#endif
    return &dense_kernels_base;
}

/* the workspace's row length for a batch of B: whole 64-byte lines */
static long dense_ld(int B) { return ((long)B + 15) / 16 * 16; }

/* forward_tiles's (IN + OUT) rows of dense_ld(B) floats, or
 * forward_strips's blocks of (IN + OUT) × DENSE_STRIP floats per strip:
 * the second, which is never less */
long dense_ws_size(int B, int IN, int OUT)
{
    return ((long)IN + OUT) * (((long)B + DENSE_STRIP - 1) / DENSE_STRIP * DENSE_STRIP);
}

/* Below this many multiply-adds a product runs on the calling thread. */
enum { DENSE_PAR_MACS = 1 << 18 };

/* c = m > 0 ? c : 0, as relu_backward */
static void relu_mask(float *c, const float *m, long n)
{
    for (long j = 0; j < n; j++) {
        const float v = c[j];
        c[j] = m[j] > 0.0f ? v : 0.0f;
    }
}

/* A product as tiles: c (rows × cols, row stride cs) from p's rows and q's
 * columns as in dense_kernels.inc. The tiles go column-major, so that a
 * tile column of q is reused by every row block while in cache; prod_run
 * runs tiles [t0, t1) of prod_tiles. */
typedef struct dense_prod {
    float *c;
    long cs;
    const float *p;
    long pr, pk;
    const float *q;
    long qs;
    int K, rows, cols;
    int kc;   /* terms per stretch of the sum (prod_run) */
    const float *mask;   /* if not NULL, laid out as c: c = mask > 0 ? c : 0 once summed */
} dense_prod_t;

static long prod_row_blocks(const dense_prod_t *d) { return (d->rows + DENSE_ROWS - 1) / DENSE_ROWS; }

static long prod_tiles(const dense_kernels_t *k, const dense_prod_t *d)
{
    return prod_row_blocks(d) * ((d->cols + k->tw - 1) / k->tw);
}

/* Tiles [t0, t1) of a product. The tiles of one column go through the
 * sum in stretches of d->kc terms, all of them one stretch, then all the
 * next, so that a stretch of q's tile column (DENSE_KC × 64 floats with
 * AVX-512) stays in L1 while every row block uses it. The weight gradient
 * takes stretches (its q, the input, is batch × 64 floats of a tile
 * column: 64 kB at batch 256, more than L1); forward and the input
 * gradient do not: their p rows, read a stretch at a time across all the
 * row blocks, would then be read at a stride (batch 256: forward 716-766 →
 * 822-854 µs, the weight gradient 805-822 → 712-785). */
static void prod_run(const dense_kernels_t *k, const dense_prod_t *d, long t0, long t1)
{
    const long nrb = prod_row_blocks(d);
    for (long ta = t0, tb; ta < t1; ta = tb) {
        const long col = ta / nrb;
        tb = (col + 1) * nrb < t1 ? (col + 1) * nrb : t1;
        const int j0 = (int)col * k->tw, cols = d->cols - j0 < k->tw ? d->cols - j0 : k->tw;
        for (int k0 = 0; k0 < d->K; k0 += d->kc) {
            const int kn = d->K - k0 < d->kc ? d->K - k0 : d->kc;
            for (long t = ta; t < tb; t++) {
                const int r0 = (int)(t % nrb) * DENSE_ROWS;
                const int rows = d->rows - r0 < DENSE_ROWS ? d->rows - r0 : DENSE_ROWS;
                k->tile(d->c + (long)r0 * d->cs + j0, d->cs, d->p + (long)r0 * d->pr + (long)k0 * d->pk, d->pr,
                        d->pk, d->q + (long)k0 * d->qs + j0, d->qs, kn, rows, k0 > 0, cols);
            }
        }
        if (d->mask) /* the tiles just summed, still in L1 */
            for (long t = ta; t < tb; t++) {
                const int r0 = (int)(t % nrb) * DENSE_ROWS;
                const int rows = d->rows - r0 < DENSE_ROWS ? d->rows - r0 : DENSE_ROWS;
                for (int r = r0; r < r0 + rows; r++)
                    relu_mask(d->c + (long)r * d->cs + j0, d->mask + (long)r * d->cs + j0, cols);
            }
    }
}

/* The tiles of row blocks [r0, r1) of a product, every column, as
 * prod_run goes through them (column by column, each stretch of the sum
 * for all the blocks): the rows [r0, r1) · DENSE_ROWS of c. */
static void prod_rows(const dense_kernels_t *k, const dense_prod_t *d, long r0, long r1)
{
    const long nrb = prod_row_blocks(d);
    for (long col = 0; col * k->tw < d->cols; col++) prod_run(k, d, col * nrb + r0, col * nrb + r1);
}

/* Backward runs on the tiles where they were measured faster: layers up
 * to 1024 inputs and 256 outputs (the mlp's; in its step, even the 128 →
 * 10 classifier: its sgemm calls cost 35 µs more there than the tiles).
 * Larger layers go to the BLAS: the tiles do not pack their operands, and
 * at 1000 × 500 and 2048 × 2048 both gradients ran slower than
 * OpenBLAS's (the input gradient of the 2048 × 2048 layer 3x: its
 * operands' rows, 8 kB apart, share cache sets). The choice depends on
 * the shapes only. */
static int backward_on_tiles(int IN, int OUT) { return IN <= 1024 && OUT <= 256; }

/* the BLAS's pieces (above) */
enum { DENSE_PIECE_COLS = 64, DENSE_PIECE_MACS = 1 << 19 };

static int dense_pieces(long cols, long macs)
{
    long n = cols / DENSE_PIECE_COLS, m = macs / DENSE_PIECE_MACS;
    if (m < n) n = m;
    return n < 1 ? 1 : n > PAR_SLOTS ? PAR_SLOTS : (int)n;
}

/* Forward on the tiles of a given kernel set (tests run every set the CPU
 * has, at any size). */
static void forward_tiles(const dense_kernels_t *k, float *out, float *ws, const float *inp, const float *w,
                          const float *b, int B, int IN, int OUT, int relu)
{
    const long ld = dense_ld(B);
    float *inT = ws, *outT = ws + (long)IN * ld;
    const int par = (long)B * IN * OUT >= DENSE_PAR_MACS;

    /* inT[i][s] = inp[s][i], by pieces of inT's rows */
    const int npi = par ? par_pieces(IN / 16) : 1;
    PAR_FOR_IF(npi > 1)
    for (int p = 0; p < npi; p++)
        k->transpose(inT, ld, inp, IN, B, (int)par_cut(IN, npi, p, 16), (int)par_cut(IN, npi, p + 1, 16), NULL, 0);

    /* outT (OUT, B) = w · inT */
    const dense_prod_t d = { outT, ld, w, IN, 1, inT, ld, IN, OUT, B, IN, NULL };
    const long nt = prod_tiles(k, &d);
    const int np = par ? par_pieces(nt) : 1;
    PAR_FOR_DYN_IF(np > 1)
    for (int p = 0; p < np; p++) prod_run(k, &d, par_cut(nt, np, p, 1), par_cut(nt, np, p + 1, 1));

    /* out[s][o] = outT[o][s] + b[o] (and the ReLU), by pieces of the batch */
    const int npo = par ? par_pieces(B / 16) : 1;
    PAR_FOR_IF(npo > 1)
    for (int p = 0; p < npo; p++)
        k->transpose(out, OUT, outT, ld, OUT, (int)par_cut(B, npo, p, 16), (int)par_cut(B, npo, p + 1, 16), b, relu);
}

/* Forward by strips of DENSE_STRIP samples, for batches of more than one
 * strip: a piece transposes its strip's inputs, computes every output
 * feature of the strip's samples on the tiles and transposes them back,
 * in one parallel region, through a workspace block of its own
 * (DENSE_STRIP × (IN + OUT) floats, rows DENSE_STRIP long). The same tiles
 * in the same order, so the same bits as forward_tiles. Why: with two
 * threads, forward_tiles's three regions wrote interleaved 64-float
 * stretches of shared workspace rows, and each thread ran its share 1.3x
 * (the tiles) to 2x (the transposes) slower than a process computing the
 * same share alone; in blocks of their own, batch 256, 256 → 128: 114-121
 * µs one thread, 62-67 two (docs/design.md, "What a second thread
 * gets"). With more than one thread, forward_owned does the same with
 * each thread's rows kept from step to step. */
static void forward_strips(const dense_kernels_t *k, float *out, float *ws, const float *inp, const float *w,
                           const float *b, int B, int IN, int OUT, int relu)
{
    const int ns = (B + DENSE_STRIP - 1) / DENSE_STRIP;
    const int par = (long)B * IN * OUT >= DENSE_PAR_MACS;
    PAR_FOR_DYN_IF(par && ns > 1)
    for (int p = 0; p < ns; p++) {
        const int j0 = p * DENSE_STRIP, n = B - j0 < DENSE_STRIP ? B - j0 : DENSE_STRIP;
        float *inS = ws + (long)p * DENSE_STRIP * (IN + OUT), *outS = inS + (long)DENSE_STRIP * IN;
        k->transpose(inS, DENSE_STRIP, inp + (long)j0 * IN, IN, n, 0, IN, NULL, 0);
        const dense_prod_t d = { outS, DENSE_STRIP, w, IN, 1, inS, DENSE_STRIP, IN, OUT, n, IN, NULL };
        prod_run(k, &d, 0, prod_tiles(k, &d));
        k->transpose(out + (long)j0 * OUT, OUT, outS, DENSE_STRIP, OUT, 0, n, b, relu);
    }
}

/* Threads own rows. With more than one thread, a layer large enough to
 * share (DENSE_PAR_MACS) gives thread t of T the rows [dense_owner_row(t),
 * dense_owner_row(t + 1)) of its weights in forward (above a batch of 64)
 * and of its weight gradient in backward, every step the same; the
 * optimizer's update gives it the same rows (model_owner_spans, optim.h),
 * so that a row's weights, gradient and velocity stay in that thread's
 * core's cache through the step. Without that (each region's pieces to
 * whichever thread was free), the mlp's update at batch 256 took 140-160
 * µs on two threads against 84 on one, its lines in the other core's
 * cache (docs/design.md, "What a second thread gets"). The tiles are the
 * same, so are the bits. */
long dense_owner_row(int B, int IN, int OUT, int T, int t)
{
    if (!backward_on_tiles(IN, OUT)) return -1;
    const long nrb = (OUT + DENSE_ROWS - 1) / DENSE_ROWS;
    if (T < 2 || nrb < T || (long)B * IN * OUT < DENSE_PAR_MACS) return t > 0 ? OUT : 0;
    const long r = par_cut(nrb, T, t, 1) * DENSE_ROWS;
    return r < OUT ? r : OUT;
}

/* T threads share the layer's rows (then thread 1's start inside them) */
static int rows_owned(int B, int IN, int OUT, int T)
{
    const long r = dense_owner_row(B, IN, OUT, T, 1);
    return r > 0 && r < OUT;
}

int dense_bias_owner(int B, int IN, int OUT, int T) { return rows_owned(B, IN, OUT, T) ? T - 1 : 0; }

/* Forward with rows owned: each thread transposes its strips of the
 * input (each strip its own workspace block, as forward_strips), then,
 * after a barrier, computes its rows for every strip, then, after another,
 * transposes its strips back: one region. */
static void forward_owned(const dense_kernels_t *k, float *out, float *ws, const float *inp, const float *w,
                          const float *b, int B, int IN, int OUT, int relu)
{
    const int ns = (B + DENSE_STRIP - 1) / DENSE_STRIP;
    PAR_REGION_IF(1)
    {
        const int T = par_team_size(), t = par_team_index();
        PAR_FOR_STATIC
        for (int p = 0; p < ns; p++) {
            const int j0 = p * DENSE_STRIP, n = B - j0 < DENSE_STRIP ? B - j0 : DENSE_STRIP;
            k->transpose(ws + (long)p * DENSE_STRIP * (IN + OUT), DENSE_STRIP, inp + (long)j0 * IN, IN, n, 0, IN,
                         NULL, 0);
        }   /* (the loop ends in a barrier) */
        const long r0 = dense_owner_row(B, IN, OUT, T, t), r1 = dense_owner_row(B, IN, OUT, T, t + 1);
        for (int p = 0; p < ns && r1 > r0; p++) {
            const int j0 = p * DENSE_STRIP, n = B - j0 < DENSE_STRIP ? B - j0 : DENSE_STRIP;
            float *inS = ws + (long)p * DENSE_STRIP * (IN + OUT), *outS = inS + (long)DENSE_STRIP * IN;
            const dense_prod_t d = { outS, DENSE_STRIP, w, IN, 1, inS, DENSE_STRIP, IN, OUT, n, IN, NULL };
            prod_rows(k, &d, r0 / DENSE_ROWS, (r1 + DENSE_ROWS - 1) / DENSE_ROWS);
        }
        PAR_BARRIER
        PAR_FOR_STATIC
        for (int p = 0; p < ns; p++) {
            const int j0 = p * DENSE_STRIP, n = B - j0 < DENSE_STRIP ? B - j0 : DENSE_STRIP;
            const float *outS = ws + (long)p * DENSE_STRIP * (IN + OUT) + (long)DENSE_STRIP * IN;
            k->transpose(out + (long)j0 * OUT, OUT, outS, DENSE_STRIP, OUT, 0, n, b, relu);
        }
    }
}

void dense_forward(float *out, float *ws, const float *inp, const float *w, const float *b, int B, int IN, int OUT,
                   int relu)
{
    const dense_kernels_t *k = dense_kernels();
    if (B <= DENSE_STRIP) forward_tiles(k, out, ws, inp, w, b, B, IN, OUT, relu);
    else if (rows_owned(B, IN, OUT, par_threads())) forward_owned(k, out, ws, inp, w, b, B, IN, OUT, relu);
    else forward_strips(k, out, ws, inp, w, b, B, IN, OUT, relu);
}

/* db: each feature's sum over the batch, in sample order */
static void bias_grad(float *db, const float *dout, int B, int OUT)
{
    memset(db, 0, sizeof(float) * (size_t)OUT);
    for (int i = 0; i < B; i++) {
        const float *r = dout + (long)i * OUT;
        for (int o = 0; o < OUT; o++) db[o] += r[o];
    }
}

/* Backward on the tiles of a given kernel set (tests run every set). */
static void backward_tiles(const dense_kernels_t *k, float *dinp, float *dw, float *db, const float *dout,
                           const float *inp, const float *w, int B, int IN, int OUT, int relu_in)
{
    /* dw (OUT, IN) = doutᵀ · inp: a row o broadcasts dout's column o */
    const dense_prod_t dW = { dw, IN, dout, 1, OUT, inp, IN, B, OUT, IN, DENSE_KC, NULL };
    /* dinp (B, IN) = dout · w (through the ReLU whose output inp is) */
    const dense_prod_t dX = { dinp, IN, dout, OUT, 1, w, IN, OUT, B, IN, OUT, relu_in ? inp : NULL };
    const int T = par_threads();
    if (rows_owned(B, IN, OUT, T)) {   /* (dense_owner_row) */
        const long nx = prod_row_blocks(&dX);
        PAR_FOR_IF(1)
        for (int t = 0; t < T; t++) {
            const long r0 = dense_owner_row(B, IN, OUT, T, t), r1 = dense_owner_row(B, IN, OUT, T, t + 1);
            if (r1 > r0) prod_rows(k, &dW, r0 / DENSE_ROWS, (r1 + DENSE_ROWS - 1) / DENSE_ROWS);
            /* the input gradient's samples in the other order: where the
             * rows do not divide evenly, the thread with fewer weight rows
             * gets more samples */
            if (dinp) prod_rows(k, &dX, par_cut(nx, T, T - 1 - t, 1), par_cut(nx, T, T - t, 1));
            if (t == dense_bias_owner(B, IN, OUT, T)) bias_grad(db, dout, B, OUT);
        }
        return;
    }
    const long nw = prod_tiles(k, &dW), nx = dinp ? prod_tiles(k, &dX) : 0;
    const int par = (long)B * IN * OUT >= DENSE_PAR_MACS;
    const int npw = par ? par_pieces(nw) : 1, npx = par && nx ? par_pieces(nx) : nx ? 1 : 0;
    PAR_FOR_DYN_IF(npw + npx > 1)
    for (int p = 0; p < npw + npx + 1; p++) {
        if (p == npw + npx) bias_grad(db, dout, B, OUT);
        else if (p < npw) prod_run(k, &dW, par_cut(nw, npw, p, 1), par_cut(nw, npw, p + 1, 1));
        else prod_run(k, &dX, par_cut(nx, npx, p - npw, 1), par_cut(nx, npx, p - npw + 1, 1));
    }
}

void dense_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w, int B,
                    int IN, int OUT, int relu_in)
{
    if (backward_on_tiles(IN, OUT)) {
        backward_tiles(dense_kernels(), dinp, dw, db, dout, inp, w, B, IN, OUT, relu_in);
        return;
    }
    const int np = dense_pieces(IN, (long)B * IN * OUT);
    PAR_FOR_DYN_IF(np > 1)
    for (int p = 0; p < np + 1; p++) {
        if (p == np) {
            bias_grad(db, dout, B, OUT);
            continue;
        }
        const int i0 = (int)par_cut(IN, np, p, 16), i1 = (int)par_cut(IN, np, p + 1, 16);
        if (i1 <= i0) continue;
        /* dw[:, i0:i1] = doutᵀ · inp[:, i0:i1] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, i1 - i0, B,
                    1.0f, dout, OUT, inp + i0, IN, 0.0f, dw + i0, IN);
        if (dinp) { /* dinp[:, i0:i1] = dout · w[:, i0:i1] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, i1 - i0, OUT,
                        1.0f, dout, OUT, w + i0, IN, 0.0f, dinp + i0, IN);
            if (relu_in)
                for (int s = 0; s < B; s++) relu_mask(dinp + (long)s * IN + i0, inp + (long)s * IN + i0, i1 - i0);
        }
    }
}
