/* nn/dense — a dense layer's three products, on dsgd's own vector tiles.
 *
 *   forward   out = inp · wᵀ + b         (B, OUT), a sum over IN
 *   backward  dw  = doutᵀ · inp          (OUT, IN), a sum over the batch
 *             dinp = dout · w            (B, IN), a sum over OUT
 *
 * All three are one tile product (dense_kernels.inc): a tile of
 * DENSE_ROWS output rows × a vector-width multiple of columns is summed in
 * registers, each output element from zero in the order of its terms. So
 * an element's bits depend only on the shapes and the instruction set,
 * never on which thread computed its tile or how the tiles were shared
 * out: any --threads gives the same bits.
 *
 * Why not the BLAS: these are small GEMMs (the mlp's are 64 × 256 × 784
 * and smaller) and one of them, forward's, has both operands running
 * along K. OpenBLAS packs both operands on every call; cut into per-thread
 * pieces with fixed boundaries (which --threads-independent bits need),
 * each piece packs all of the shared operand again. On an Intel AVX-512
 * core these tiles ran the mlp's first layer 1.4-1.6x faster than
 * OpenBLAS's SkylakeX sgemm in those pieces (docs/design.md, "The dense
 * layer's own tiles").
 *
 * Forward transposes inp (B·IN floats, the smaller operand at the batch
 * sizes of SGD) so that its columns are the batch, computes outᵀ tile by
 * tile, and transposes that back adding the bias; both transposes go
 * through a workspace of dense_ws_size floats. Backward reads its
 * operands where they are: dw's rows broadcast dout's columns, dinp's
 * rows dout's rows, and both load rows of inp or w as the columns.
 *
 * The tiles are compiled three times on x86-64 with GCC, like conv.c's
 * vector loops: for x86-64-v4 (AVX-512: tiles 6 × 64), -v3 (AVX2 + FMA:
 * 6 × 16) and the baseline (6 × 8, no FMA); the widest the CPU runs is
 * picked at run time.
 */
#include "layers.h"

#include <string.h>

#include "../util/par.h"

enum { DENSE_ROWS = 6 };

typedef struct dense_kernels {
    int tw;   /* columns per tile */
    /* a tile of ≤ DENSE_ROWS rows, ≤ tw columns */
    void (*tile)(float *c, long cs, const float *p, long pr, long pk, const float *q, long qs, int K, int rows,
                 int more, int cols);
    void (*transpose)(float *d, long dld, const float *s, long sld, int n, int c0, int c1, const float *bias);
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

long dense_ws_size(int B, int IN, int OUT) { return ((long)IN + OUT) * dense_ld(B); }

/* Below this many multiply-adds a product runs on the calling thread. */
enum { DENSE_PAR_MACS = 1 << 18 };

/* One product as tiles: c (rows × cols, row stride cs) from p's rows and
 * q's columns as in dense_kernels.inc. The tiles go column-major, so that
 * a tile column of q is reused by every row block while in cache;
 * prod_run runs tiles [t0, t1) of prod_tiles. */
typedef struct dense_prod {
    float *c;
    long cs;
    const float *p;
    long pr, pk;
    const float *q;
    long qs;
    int K, rows, cols;
    int kc;   /* terms per stretch of the sum (prod_run) */
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
enum { DENSE_KC = 64 };

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
    }
}

/* The entry points with a given kernel set (tests run every set the CPU has). */
static void dense_forward_with(const dense_kernels_t *k, float *out, float *ws, const float *inp, const float *w,
                               const float *b, int B, int IN, int OUT)
{
    const long ld = dense_ld(B);
    float *inT = ws, *outT = ws + (long)IN * ld;
    const int par = (long)B * IN * OUT >= DENSE_PAR_MACS;

    /* inT[i][s] = inp[s][i], by pieces of inT's rows */
    const int npi = par ? par_pieces(IN / 16) : 1;
    PAR_FOR_IF(npi > 1)
    for (int p = 0; p < npi; p++)
        k->transpose(inT, ld, inp, IN, B, (int)par_cut(IN, npi, p, 16), (int)par_cut(IN, npi, p + 1, 16), NULL);

    /* outT (OUT, B) = w · inT */
    const dense_prod_t d = { outT, ld, w, IN, 1, inT, ld, IN, OUT, B, IN };
    const long nt = prod_tiles(k, &d);
    const int np = par ? par_pieces(nt) : 1;
    PAR_FOR_DYN_IF(np > 1)
    for (int p = 0; p < np; p++) prod_run(k, &d, par_cut(nt, np, p, 1), par_cut(nt, np, p + 1, 1));

    /* out[s][o] = outT[o][s] + b[o], by pieces of the batch */
    const int npo = par ? par_pieces(B / 16) : 1;
    PAR_FOR_IF(npo > 1)
    for (int p = 0; p < npo; p++)
        k->transpose(out, OUT, outT, ld, OUT, (int)par_cut(B, npo, p, 16), (int)par_cut(B, npo, p + 1, 16), b);
}

static void dense_backward_with(const dense_kernels_t *k, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, int B, int IN, int OUT)
{
    /* dw (OUT, IN) = doutᵀ · inp: a row o broadcasts dout's column o */
    const dense_prod_t dW = { dw, IN, dout, 1, OUT, inp, IN, B, OUT, IN, DENSE_KC };
    /* dinp (B, IN) = dout · w */
    const dense_prod_t dX = { dinp, IN, dout, OUT, 1, w, IN, OUT, B, IN, OUT };
    const long nw = prod_tiles(k, &dW), nx = dinp ? prod_tiles(k, &dX) : 0;
    const int par = (long)B * IN * OUT >= DENSE_PAR_MACS;
    const int npw = par ? par_pieces(nw) : 1, npx = par && nx ? par_pieces(nx) : nx ? 1 : 0;
    PAR_FOR_DYN_IF(npw + npx > 1)
    for (int p = 0; p < npw + npx + 1; p++) {
        if (p == npw + npx) {   /* db: each feature's sum over the batch, in sample order */
            memset(db, 0, sizeof(float) * (size_t)OUT);
            for (int i = 0; i < B; i++) {
                const float *r = dout + (long)i * OUT;
                for (int o = 0; o < OUT; o++) db[o] += r[o];
            }
        } else if (p < npw) {
            prod_run(k, &dW, par_cut(nw, npw, p, 1), par_cut(nw, npw, p + 1, 1));
        } else {
            const int q = p - npw;
            prod_run(k, &dX, par_cut(nx, npx, q, 1), par_cut(nx, npx, q + 1, 1));
        }
    }
}

void dense_forward(float *out, float *ws, const float *inp, const float *w, const float *b, int B, int IN, int OUT)
{
    dense_forward_with(dense_kernels(), out, ws, inp, w, b, B, IN, OUT);
}

void dense_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w, int B,
                    int IN, int OUT)
{
    dense_backward_with(dense_kernels(), dinp, dw, db, dout, inp, w, B, IN, OUT);
}
