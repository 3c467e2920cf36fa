/* nn/conv_wino — the host side of the Winograd F(2x2, 3x3) form of the
 * flat path's 3x3 convolutions (its vector kernels: conv_wino.inc, through
 * conv_kernels.h's table): the transformed weights, the forward pass and
 * input gradient by groups of samples, and the weight gradient by fixed
 * pieces of the batch. The workspace's layout: conv_layout.c. */
#include <stdint.h>
#include <string.h>

#include "../util/par.h"
#include "conv_kernels.h"

/* U = G·g·Gᵀ for each 3x3 g of w(Cout, Cin, 3, 3): the Winograd form's
 * weights (conv_wino.inc), the halves exact. U's 16 blocks of Cin·Cout
 * hold the output channels by blocks of ro (the product's): block oc0's
 * values at oc0·Cin + ic·ro + r; the last Cout mod ro channels one at a
 * time (oc·Cin + ic). By blocks, each of its 16 rows written in order. */
void wino_weights(float *U, const float *w, int Cin, int Cout, int ro, int par)
{
    const int full = Cout / ro, nblk = full + Cout % ro;
    const long es = (long)Cin * Cout;
    PAR_FOR_IF(par && (long)Cin * Cout * 16 >= PAR_MIN_FLOATS)
    for (int bk = 0; bk < nblk; bk++) {
        const int oc0 = bk < full ? bk * ro : full * ro + (bk - full), n = bk < full ? ro : 1;
        /* 32 input channels at a time into r, then each of its 16 rows
         * stored at once: U's rows are 4 kB multiples apart at 32 and 64
         * channels, and one store to each in turn misses the L1 cache */
        for (int ic0 = 0; ic0 < Cin; ic0 += 32) {
            const int nc = Cin - ic0 < 32 ? Cin - ic0 : 32;
            float r[16][32 * WINO_RO_MAX];
            for (int c = 0; c < nc; c++)
                for (int o = 0; o < n; o++) {
                    const float *q = w + ((long)(oc0 + o) * Cin + ic0 + c) * 9;
                    float t[4][3];
                    for (int j = 0; j < 3; j++) {
                        t[0][j] = q[j];
                        t[1][j] = 0.5f * (q[j] + q[3 + j] + q[6 + j]);
                        t[2][j] = 0.5f * (q[j] - q[3 + j] + q[6 + j]);
                        t[3][j] = q[6 + j];
                    }
                    for (int i = 0; i < 4; i++) {
                        r[4 * i][c * n + o] = t[i][0];
                        r[4 * i + 1][c * n + o] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
                        r[4 * i + 2][c * n + o] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
                        r[4 * i + 3][c * n + o] = t[i][2];
                    }
                }
            for (int e = 0; e < 16; e++)
                memcpy(U + e * es + (long)oc0 * Cin + (long)ic0 * n, r[e], sizeof(float) * (size_t)(nc * n));
        }
    }
}

/* A flat 3x3 convolution in the Winograd form: out(B, Cout, OH, OW) (+ b)
 * from the padded planes x(B, Cin, HP, WP) and U (wino_weights), a group
 * of L->wg samples at a time to whichever thread is free, each in its
 * slot of work. Each tile's arithmetic is its own: the same bits on any
 * thread. Forward passes its moments; the input gradient swaps Cin and
 * Cout. */
void wino_conv(const conv_kernels_t *k, float *out, const float *x, float *work, const float *U,
                      const float *b, double *moments, int Cin, int Cout, const conv_geom_t *g,
                      const conv_layout_t *L, int par, int add)
{
    const long plane = L->HP * L->WP, OHW = (long)g->OH * g->OW, tiles = L->wtiles;
    const int ng = L->ng;
    PAR_FOR_SLOTS_IF(par && ng > 1)
    for (int q = 0; q < ng; q++) {
        float *V = (float *)(((uintptr_t)(work + (long)par_slot() * L->wslot) + 63) & ~(uintptr_t)63);
        float *Y = V + 16L * ((long)Cin * L->wps + FLAT_VEC);
        int nb;
        const int b0 = conv_wino_group(L, g->B, q, &nb);
        for (int s = 0; s < nb; s++)
            k->wino_input(V, L->wps, x + (long)(b0 + s) * Cin * plane, plane, Cin, g->OH, g->OW, L->WP, s * tiles);
        k->wino_product(Y, V, U, Cin, Cout, L->wps, nb * tiles);
        for (int s = 0; s < nb; s++) {
            k->wino_output(out + (long)(b0 + s) * Cout * OHW, Y, L->wps, Cout, g->OH, g->OW, s * tiles, b, add);
            conv_out_moments(moments, out, g, b0 + s);
        }
    }
}

/* The Winograd form's weight gradient (conv_wino.inc) from the padded
 * output gradient D and input P: per group of samples (as forward's), its
 * input transformed as forward does (V), its output gradient transposed
 * (output channels in the lanes) and transformed (Z), and their products
 * summed over the tiles into dU (16, C, OCp). The batch's groups are cut
 * into L->np pieces whatever T (conv_layout.c), each summing its groups
 * in order into a dU of its own, which are then added in piece order: the
 * same bits on any number of threads. dw = Gᵀ·dU·G. */
void wino_weight_grad(const conv_kernels_t *k, float *dw, const float *D, const float *P, float *acc,
                             float *work, const conv_geom_t *g, const conv_layout_t *L, int par)
{
    const long plane = L->HP * L->WP, OCp = L->OCp, dplane = plane;
    const long tiles = L->wtiles, n2 = L->wn2;
    const int ng = L->ng, npc = L->np;
    const long usz = 16L * g->C * OCp;
    float *dU = (float *)(((uintptr_t)acc + 63) & ~(uintptr_t)63);
    PAR_FOR_SLOTS_IF(par && npc > 1)
    for (int pc = 0; pc < npc; pc++) {
        float *V = (float *)(((uintptr_t)(work + (long)par_slot() * L->wslot) + 63) & ~(uintptr_t)63);
        float *Z = V + 16L * ((long)g->C * L->wps + FLAT_VEC), *dT = V + L->wdt;
        const int q1 = (int)par_cut(ng, npc, pc + 1, 1);
        for (int q = (int)par_cut(ng, npc, pc, 1); q < q1; q++) {
            int nb;
            const int b0 = conv_wino_group(L, g->B, q, &nb);
            for (int s = 0; s < nb; s++) {
                const float *Db = D + (long)(b0 + s) * g->OC * dplane + g->pad * L->WP + g->pad;
                float *Tb = dT + (long)s * n2 * OCp;
                k->dt_transpose(Tb, OCp, Db, dplane, g->OC, n2);
                k->wino_dz(Z, L->wzs, Tb, (int)OCp, g->OH, g->OW, L->WP, s * tiles);
                k->wino_input(V, L->wps, P + (long)(b0 + s) * g->C * plane, plane, g->C, g->OH, g->OW, L->WP,
                              s * tiles);
            }
            k->wino_dw_product(dU + pc * usz, V, L->wps, Z, L->wzs, g->C, (int)OCp, nb * tiles,
                               q > (int)par_cut(ng, npc, pc, 1));
        }
    }
    /* dw[oc][ic] = Gᵀ·(Σ over the pieces of dU[·][ic][oc])·G */
    PAR_FOR_IF(par && (long)g->C * g->OC * 16 * npc >= PAR_MIN_FLOATS)
    for (int ic = 0; ic < g->C; ic++)
        for (int o0 = 0; o0 < g->OC; o0 += 64) {   /* 64 output channels at a time, in the lanes */
            const int no = g->OC - o0 < 64 ? g->OC - o0 : 64;
            float u[16][64], t[4][3][64], r[9][64];
            for (int e = 0; e < 16; e++) {
                const float *p = dU + ((long)e * g->C + ic) * OCp + o0;
                for (int o = 0; o < no; o++) u[e][o] = p[o];
                for (int pc = 1; pc < npc; pc++)
                    for (int o = 0; o < no; o++) u[e][o] += p[pc * usz + o];
            }
            for (int i = 0; i < 4; i++)   /* dU·G */
                for (int o = 0; o < no; o++) {
                    t[i][0][o] = u[4 * i][o] + 0.5f * (u[4 * i + 1][o] + u[4 * i + 2][o]);
                    t[i][1][o] = 0.5f * (u[4 * i + 1][o] - u[4 * i + 2][o]);
                    t[i][2][o] = 0.5f * (u[4 * i + 1][o] + u[4 * i + 2][o]) + u[4 * i + 3][o];
                }
            for (int l = 0; l < 3; l++)   /* Gᵀ·(dU·G) */
                for (int o = 0; o < no; o++) {
                    r[l][o] = t[0][l][o] + 0.5f * (t[1][l][o] + t[2][l][o]);
                    r[3 + l][o] = 0.5f * (t[1][l][o] - t[2][l][o]);
                    r[6 + l][o] = 0.5f * (t[1][l][o] + t[2][l][o]) + t[3][l][o];
                }
            for (int o = 0; o < no; o++)
                for (int j = 0; j < 9; j++) dw[((long)(o0 + o) * g->C + ic) * 9 + j] = r[j][o];
        }
}
