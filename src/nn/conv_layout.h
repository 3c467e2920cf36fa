/* nn/conv_layout — a convolution's workspace: which path computes it
 * (direct, flat, im2col) and where each of its buffers lies (conv.c's
 * kernels use it; conv_layout.c computes it). Internal to nn. */
#ifndef DSGD_CONV_LAYOUT_H
#define DSGD_CONV_LAYOUT_H

#include "layers.h"

enum { TW = 16, RB = 4, NT_MAX = 2 };   /* direct path: tile columns, block rows, tiles per block */
/* flat path: a tile's positions (FNV·VL: 64, 16 or 8), the most any set
 * reads past a plane; a plane's positions rounded up to a multiple of every
 * set's vector (16, 8 or 4 floats), its last ones in narrower tiles */
enum { FLAT_BLOCK = 64, FLAT_VEC = 16 };

typedef struct conv_layout {
    long HP, WP;          /* padded input plane */
    long n_pad, n_col, n_acc, n_wt;
    long FS;              /* flat path: floats per output plane, OH·WP rounded up to FLAT_VEC */
    long slack;           /* floats after a buffer for the vector loops' overrun */
    long OCp;             /* flat 3x3 weight gradient: output channels rounded up to a vector */
    int dchunk;           /* and the samples whose transposed output gradient it holds at once */
    int direct, flat;
    int wino;             /* flat 3x3: forward and input gradient in the Winograd form (conv_wino.inc) */
    int wg;               /* and the samples it transforms together (a group) */
    int ng;               /* the groups in the batch, ceil(B / wg); group q holds samples [q·wg, min(B, q·wg + wg)) */
    long wtiles;          /* a sample's tiles (2x2 outputs) */
    long wn2;             /* the positions of a plane row-padded to WP that a sample's tiles read, 2·ceil(OH/2)·WP */
    long wps;             /* floats per row of a group's transformed input or outputs */
    long wslot;           /* floats of a slot's transformed input and outputs, with room to align them */
    int np;               /* the pieces a weight gradient summed over the batch is cut into (im2col, Winograd) */
    long wzs, wdt;        /* weight gradient: floats between Z's blocks; the transposed output gradient's offset */
    int sub;              /* 1x1 taps, no padding, stride above 1: P holds the input subsampled (its im2col) */
} conv_layout_t;

/* g's path and workspace layout: a function of the shapes alone, never of
 * the CPU or --threads, so that a model's workspace is the same everywhere */
conv_layout_t conv_layout(const conv_geom_t *g);

/* Winograd group q of a batch of B: its first sample, and in *nb its size */
static inline int conv_wino_group(const conv_layout_t *L, int B, int q, int *nb)
{
    const int b0 = q * L->wg;
    *nb = B - b0 < L->wg ? B - b0 : L->wg;
    return b0;
}

#endif
