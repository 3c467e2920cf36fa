/* nn/conv_layout — a convolution's geometry and workspace layout
 * (conv_layout.h; conv.c's kernels work in it).
 *
 * col workspace, conv_col_size(g) floats:
 *   [ padded input (B, C, HP, WP) | col_b (C·KH·KW, OH·OW) | acc | wt ]
 * The padded input (conv_pad_size floats) is what forward leaves for
 * backward; the _ws entry points take it and the rest ("work", which
 * nothing keeps between calls) as two buffers, so that layers can keep
 * their own padded inputs and share one work area.
 * On the flat path col_b's room holds forward's output planes (OC, FS)
 * instead, and in backward the batch's padded output gradient
 * (B, OC, HP, WP), which its producer may write there itself
 * (conv2d_dout_padded), and one sample's input-gradient planes (C, FS); wt holds
 * the flipped, transposed weights. acc is the weight-gradient accumulator:
 * (OC, KH·KW + 1, TW) lanes on the direct path (the extra tap is the
 * bias), (C·KH·KW, OC) on the im2col path; on the flat path with 3x3
 * taps the sums (C, 9, OCp) and a chunk's transposed output gradient
 * (chunk, OH·WP, OCp), OCp = OC rounded up to 16. With 3x3 taps col_b's
 * room holds instead, per slot, the Winograd form's transformed input and outputs
 * of a group of samples (16 rows of C and 4 of OC, wps floats each; the
 * input gradient swaps C and OC), and wt is followed by the transformed
 * weights (16, C, OC). The Winograd weight gradient's slot holds a group's
 * transformed input V (16, C, wps), the transformed output gradient Z
 * (16, wps, OCp) and the group's output gradient transposed (from offset
 * wdt), and acc its sums dU (16, C, OCp) for each of np pieces of the
 * batch. A 1x1 convolution at
 * a stride above 1 without padding keeps its input subsampled instead of
 * padded, (B, C, OH, OW): the only values it reads, and its im2col.
 */
#include "conv_layout.h"

#include <stddef.h>

#include "../util/par.h"

/* The pieces a weight gradient summed over the batch is cut into, each
 * piece's sums its own and added in piece order (the same pieces whatever
 * --threads): of `units` (samples or groups), per floats of sums each.
 * More pieces than threads, so that the thread that finishes first waits
 * less for the last piece (on 2 threads a step spent ~5% of its time in
 * the ragged ends of 4 pieces); but each piece's sums are written out and
 * read back: a 64-channel Winograd weight gradient in 16 pieces (4 MB of
 * sums) took 15% longer on one thread than in 4 or 8. At most 8, and no
 * more than fit 1M floats of sums unless that is fewer than PAR_SLOTS. */
static int wgrad_pieces(long units, long per)
{
    long n = (1L << 20) / (per > 0 ? per : 1);
    n = n > 8 ? 8 : n < PAR_SLOTS ? PAR_SLOTS : n;
    return units < n ? (int)(units > 0 ? units : 1) : (int)n;
}

int conv_geom_init(conv_geom_t *g)
{
    if (g->stride < 1 || g->KH < 1 || g->KW < 1 || g->pad < 0) return -1;
    int eh = g->H + 2 * g->pad - g->KH, ew = g->W + 2 * g->pad - g->KW;
    if (eh < 0 || ew < 0) return -1;
    g->OH = eh / g->stride + 1;
    g->OW = ew / g->stride + 1;
    return 0;
}



static long round_up(long x, long m) { return (x + m - 1) / m * m; }
static long max_l(long a, long b) { return a > b ? a : b; }

conv_layout_t conv_layout(const conv_geom_t *g)
{
    conv_layout_t L;
    const long s = g->stride, KK = (long)g->KH * g->KW;
    L.direct = g->C == 1;
    /* stride 1 and "same" padding: the input gradient is then the same
     * convolution of the padded output gradient, on planes as wide */
    L.flat = !L.direct && s == 1 && 2 * g->pad == g->KH - 1 && 2 * g->pad == g->KW - 1;
    /* flat: rows W + pad wide, the pad zeros left of each row serving also
     * as the right neighbours of the row above (a tap at column W + j of
     * one row reads column j < pad of the next); half the columns computed
     * and dropped that W + 2·pad would cost (7×7: 8 of 9, not 7 of 9) */
    L.WP = g->W + (L.flat ? 1L : 2L) * g->pad;
    L.HP = g->H + 2L * g->pad;
    /* a 1x1 convolution at a stride above 1 without padding reads one
     * input value in s² (ResNet's shortcuts): the padded copy keeps those
     * alone, which is already its im2col (and a quarter of a copy) */
    L.sub = !L.direct && KK == 1 && g->pad == 0 && s > 1;
    if (L.sub) {
        L.HP = g->OH;
        L.WP = g->OW;
    }
    if (L.direct) {
        /* wide and tall enough for the last tile's reads */
        L.WP = max_l(L.WP, (round_up(g->OW, NT_MAX * TW) - 1) * s + g->KW);
        L.HP = max_l(L.HP, (round_up(g->OH, RB) - 1) * s + g->KH);
    }
    /* the slack after each buffer takes the vector loops' overrun: reads
     * past a row's end, and stores that the next row overwrites */
    const long slack = L.slack = TW + g->KW + g->pad + (L.flat ? FLAT_BLOCK : 0);
    const long plane = L.HP * L.WP;
    L.FS = round_up((long)g->OH * L.WP, FLAT_VEC);
    L.n_pad = (long)g->B * g->C * plane + slack;
    /* one sample's im2col per workspace slot (one per thread, at most
     * PAR_SLOTS); the im2col path's weight gradient cuts the batch into np
     * pieces, each with its sums in acc */
    L.n_col = PAR_SLOTS * ((long)g->C * KK * g->OH * g->OW + slack);
    L.np = wgrad_pieces(g->B, (long)g->C * KK * g->OC);
    /* flat 3x3: the Winograd form. A group of samples holds about 128
     * tiles (2x2 outputs), the lanes of its products, and at most 4
     * samples: at 7x7 (16 tiles a sample) 4 samples' 64 tiles run as fast
     * on one thread as 8 samples' 128, and a batch has twice the groups to
     * share among threads (2, 32 tiles, was slower); a slot holds a
     * group's transformed input (16, C, wps) and outputs (4, OC, wps),
     * C and OC the larger of the two (the input gradient swaps them),
     * in place of the planes below */
    L.wino = L.flat && g->KH == 3 && g->KW == 3;
    L.OCp = round_up(g->OC, 16);   /* the output channels as the flat 3x3 sums hold them */
    L.wg = L.ng = 0;
    L.wps = L.wslot = L.wzs = L.wdt = L.wtiles = L.wn2 = 0;
    if (L.wino) {
        const long tiles = L.wtiles = (long)((g->OH + 1) / 2) * ((g->OW + 1) / 2), most = g->B < 4 ? g->B : 4,
                   wg = 128 / tiles;
        L.wg = wg < 1 ? 1 : wg > most ? (int)most : (int)wg;
        L.ng = (g->B + L.wg - 1) / L.wg;
        L.wps = round_up(L.wg * tiles, FLAT_VEC) + FLAT_VEC;
        L.wslot = 20 * (max_l(g->C, g->OC) * L.wps + FLAT_VEC) + FLAT_VEC;
        /* the weight gradient's: V (16, C, wps), Z (16, wps, OCp) and the
         * group's output gradient transposed, (wg, 2·th·WP, OCp) */
        L.wzs = L.wps * L.OCp + FLAT_VEC;
        L.wdt = 16 * ((long)g->C * L.wps + FLAT_VEC) + 16 * L.wzs;
        L.wn2 = (long)((g->OH + 1) / 2) * 2 * L.WP;
        L.wslot = max_l(L.wslot, L.wdt + L.wg * L.wn2 * L.OCp + FLAT_VEC);
    }
    /* flat path, no im2col: forward's output planes (OC, FS) per piece; in
     * backward the padded output gradient of the batch (B, OC, HP, WP) and
     * one sample's input-gradient planes (C, FS) per piece */
    if (L.flat)
        L.n_col = max_l(PAR_SLOTS * (L.wino ? L.wslot : (long)g->OC * L.FS),
                        (long)g->B * g->OC * plane + slack + PAR_SLOTS * (L.wino ? L.wslot : (long)g->C * L.FS));
    /* + TW: room to align the direct path's vectors; im2col: a piece's
     * weight-gradient sums each */
    L.n_acc = L.direct ? (long)g->OC * (KK + 1) * TW + TW : L.flat ? 0 : L.np * (long)g->C * KK * g->OC;
    /* flat 3x3: the weight gradient's sums dwt (C, 9, OCp), and the
     * transposed output gradient of a chunk of samples (dchunk, OH·WP, OCp):
     * with the chunk's inputs, about 1 MB, to stay in cache across tiles.
     * Reserved whatever the kernel set, though only AVX-512's uses it: a
     * layout, and so a model's workspace, must not depend on the CPU */
    L.dchunk = 0;
    if (L.wino) {   /* the flat path's 3x3 layers */
        const long per = ((long)g->OH * L.WP * L.OCp + (long)g->C * plane) * (long)sizeof(float);
        const long fit = (1L << 20) / per;
        L.dchunk = fit < 1 ? 1 : fit > g->B ? g->B : (int)fit;
        L.n_acc = (long)g->C * 9 * L.OCp + (long)L.dchunk * g->OH * L.WP * L.OCp;
        /* or the Winograd form's sums dU (16, C, OCp), one per piece of the
         * batch's groups */
        L.np = wgrad_pieces(L.ng, 16L * g->C * L.OCp);
        L.n_acc = max_l(L.n_acc, L.np * 16L * g->C * L.OCp + FLAT_VEC);
    }
    /* the flipped, transposed weights; the Winograd form's transformed
     * weights (16, C, OC) after them */
    L.n_wt = L.flat ? (long)g->C * KK * g->OC + (L.wino ? 16L * g->C * g->OC : 0) : 0;
    return L;
}

long conv_col_size(const conv_geom_t *g)
{
    conv_layout_t L = conv_layout(g);
    return L.n_pad + L.n_col + L.n_acc + L.n_wt;
}

long conv_pad_size(const conv_geom_t *g) { return conv_layout(g).n_pad; }

int conv2d_in_padded(plane_pad_t *pp, const conv_geom_t *g)
{
    const conv_layout_t L = conv_layout(g);
    if (L.sub) return 0;   /* it keeps its input subsampled, not padded */
    *pp = (plane_pad_t){ .H = g->H, .W = g->W, .pad = g->pad, .HP = L.HP, .WP = L.WP };
    return 1;
}

float *conv2d_dout_padded(plane_pad_t *pp, float *work, const conv_geom_t *g)
{
    const conv_layout_t L = conv_layout(g);
    if (!L.flat) return NULL;
    /* the flat path's output gradient: padded as its input, OH = H, OW = W */
    *pp = (plane_pad_t){ .H = g->OH, .W = g->OW, .pad = g->pad, .HP = L.HP, .WP = L.WP };
    return work;
}
