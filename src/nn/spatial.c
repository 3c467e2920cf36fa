/* nn/spatial — spatial model parallelism of lc models (docs/algorithms.md
 * §11, "Spatial blocks").
 *
 * The M partitions of a replica form a Gy×Gx grid. Each locally connected
 * layer's pooled output is cut into Gy row bands and Gx column bands, and
 * partition q = py·Gx + px computes the output positions of cell (py, px)
 * — the cell times the pooling, so pooling never straddles two blocks —
 * with the weights of those positions alone. The activation and pooling
 * above it then act on positions the partition owns, and the next layer's
 * input block is that pooled cell.
 *
 * A position's receptive field reaches past the block it belongs to by up
 * to k − 1 − pad rows and columns (less the stride's gaps), so each layer
 * but the first (whose input, the image, every partition holds) needs a
 * halo: the rectangles of its neighbours' input blocks that its fields
 * read. For every pair of partitions the exchange is the intersection of
 * one's input block with the other's field region (diagonal neighbours
 * included), so it holds for any stride, padding and grid. Forward: post
 * the halo, compute the interior (positions whose fields lie in the
 * partition's own block), wait, compute the border. Backward: compute the
 * border's input gradient first, post what fell on the neighbours' blocks,
 * compute the interior, wait, add what the neighbours sent.
 *
 * Activations keep the whole layer's shape on every partition (each fills
 * only its block and halo): the buffers are a layer's output, far smaller
 * than its weights.
 *
 * The dense classifier on top is split by its inputs, not its outputs:
 * partition q holds the weight columns of the features of its own block
 * (and partition 0 the bias), computes the logits' share of its features,
 * and the replica sums the shares (an all-reduce of B × classes floats).
 * Backward needs no message: the logits' gradient is the same everywhere,
 * and each partition's input gradient is its own block's. Splitting by
 * output units instead would gather the whole top activation on every
 * partition each step, traffic that grows with M and is larger than all
 * the halos together. */
#include "plan.h"
#include "spatial.h"

#include <stdio.h>
#include <stdlib.h>
#include <cblas.h>
#include <string.h>

#include "../util/util.h"

typedef struct lc_split {
    lc_rect_t own;            /* input positions this partition owns (the whole input for the first layer) */
    lc_rect_t inner;          /* positions of blk whose fields lie in own (empty: y0 == y1) */
    int n;                    /* partitions it exchanges halos with */
    int *peer;
    lc_rect_t *send, *recv;   /* input rectangles sent to and received from peer[j] */
    long *nsend, *nrecv;      /* floats per sample */
    float **sbuf, **rbuf;     /* (max_batch · n…) packed */
    long *sB, *rB;            /* (n) floats of the current batch */
} lc_split_t;

struct spatial {
    int M, me;
    lc_split_t *lay;          /* (nlayers); n = 0 and no buffers for the others */
    lc_rect_t *in, *out;      /* (nlayers) an activation's or pooling's input and output block */
    int top;                  /* the classifier's input layer (the flatten's), or -1 */
    lc_rect_t *gown;          /* (M) each partition's block of the top layer's output */
    float *gloc, *gdx;        /* (max_batch, own features) the block packed, and its gradient */
};

static long area(lc_rect_t r) { return r.y1 > r.y0 && r.x1 > r.x0 ? (long)(r.y1 - r.y0) * (r.x1 - r.x0) : 0; }

static lc_rect_t meet(lc_rect_t a, lc_rect_t b)
{
    lc_rect_t r = { a.y0 > b.y0 ? a.y0 : b.y0, a.y1 < b.y1 ? a.y1 : b.y1,
                    a.x0 > b.x0 ? a.x0 : b.x0, a.x1 < b.x1 ? a.x1 : b.x1 };
    if (r.y1 < r.y0) r.y1 = r.y0;
    if (r.x1 < r.x0) r.x1 = r.x0;
    return r;
}

void spatial_grid(int M, int *gy, int *gx)
{
    int y = 1;
    for (int d = 1; d * d <= M; d++)
        if (M % d == 0) y = d;
    *gy = y;
    *gx = M / y;
}

/* The pooling that follows lc layer i (1: none) and the layer whose output
 * ends its stage (the pool, else the activation, else the layer itself). */
static int stage(const layer_t *L, int n, int i, int *end)
{
    int j = i + 1;
    while (j < n && (L[j].kind == LAYER_RELU || L[j].kind == LAYER_TANH)) j++;
    if (j < n && L[j].kind == LAYER_MAXPOOL) { *end = j; return L[j].k; }
    *end = j - 1;
    return 1;
}

lc_rect_t spatial_block(const layer_t *L, int n, int i, int q, int M)
{
    int gy, gx, end;
    spatial_grid(M, &gy, &gx);
    const int Q = stage(L, n, i, &end), py = q / gx, px = q % gx;
    const int OH = L[i].out_h, OW = L[i].out_w, PH = OH / Q, PW = OW / Q;
    lc_rect_t b;
    b.y0 = (int)((long)PH * py / gy) * Q;
    b.y1 = py == gy - 1 ? OH : (int)((long)PH * (py + 1) / gy) * Q;
    b.x0 = (int)((long)PW * px / gx) * Q;
    b.x1 = px == gx - 1 ? OW : (int)((long)PW * (px + 1) / gx) * Q;
    return b;
}

/* Partition q's block of the output of lc layer i's stage (after pooling). */
static lc_rect_t stage_block(const layer_t *L, int n, int i, int q, int M)
{
    int end;
    const int Q = stage(L, n, i, &end);
    const lc_rect_t b = spatial_block(L, n, i, q, M);
    return (lc_rect_t){ b.y0 / Q, b.y1 / Q, b.x0 / Q, b.x1 / Q };
}

int spatial_classifier(const layer_t *L, int n, int i)
{
    return L[i].kind == LAYER_DENSE && i > 0 && L[i - 1].kind == LAYER_FLATTEN;
}

/* Partition q's block of the output of layer t (the classifier's input):
 * the stage block of the last lc layer at or below t. */
static lc_rect_t top_block(const layer_t *L, int n, int t, int q, int M)
{
    int lc = -1;
    for (int j = 0; j <= t; j++)
        if (L[j].kind == LAYER_LC) lc = j;
    return stage_block(L, n, lc, q, M);
}

void spatial_cut_classifier(model_t *m, int i)
{
    layer_t *l = &m->layers[i];
    const layer_t *t = &m->layers[i - 2];   /* the flatten's input */
    const lc_rect_t b = top_block(m->layers, m->nlayers, i - 2, m->part.index, m->part.count);
    l->blk = b;
    l->w_len = (size_t)l->out_c * (size_t)t->out_c * (size_t)area(b);
    l->b_len = m->part.index == 0 ? (size_t)l->out_c : 0;
}

size_t spatial_classifier_nparams(const model_t *m, int i, int q)
{
    const layer_t *l = &m->layers[i], *t = &m->layers[i - 2];
    const lc_rect_t b = top_block(m->layers, m->nlayers, i - 2, q, m->part.count);
    return (size_t)l->out_c * ((size_t)t->out_c * (size_t)area(b) + (q == 0 ? 1 : 0));
}

/* The lc layer below lc layer i, or -1 if i reads the model input. */
static int lc_below(const layer_t *L, int i)
{
    for (int j = i - 1; j >= 0; j--)
        if (L[j].kind == LAYER_LC) return j;
    return -1;
}

static lc_rect_t own_input(const layer_t *L, int n, int i, int q, int M)
{
    const int b = lc_below(L, i);
    if (b < 0) return (lc_rect_t){ 0, L[i].in_h, 0, L[i].in_w };
    return stage_block(L, n, b, q, M);
}

/* The input positions the fields of block b read (clipped to the input). */
static lc_rect_t field(const layer_t *l, lc_rect_t b)
{
    lc_rect_t r = { b.y0 * l->stride - l->pad, (b.y1 - 1) * l->stride - l->pad + l->k,
                    b.x0 * l->stride - l->pad, (b.x1 - 1) * l->stride - l->pad + l->k };
    return meet(r, (lc_rect_t){ 0, l->in_h, 0, l->in_w });
}

int spatial_check(const layer_t *L, int n, int M, const char *spec, char *err, size_t errlen)
{
    int gy, gx, end;
    spatial_grid(M, &gy, &gx);
    for (int i = 0; i < n; i++) {
        if (L[i].kind != LAYER_LC) continue;
        const int Q = stage(L, n, i, &end), PH = L[i].out_h / Q, PW = L[i].out_w / Q;
        if (PH < gy || PW < gx) {
            snprintf(err, errlen, "--model-parallel %d: its %dx%d grid of blocks does not tile layer %d of '%s' (%dx%d positions%s); use a smaller --model-parallel or a larger image",
                     M, gy, gx, i + 1, spec, PH, PW, Q > 1 ? " after pooling" : "");
            return -1;
        }
    }
    return 0;
}

void spatial_cut(model_t *m, int i)
{
    layer_t *l = &m->layers[i];
    const lc_rect_t b = spatial_block(m->layers, m->nlayers, i, m->part.index, m->part.count);
    const size_t per = l->w_len / ((size_t)l->out_h * (size_t)l->out_w);   /* one position's bank */
    l->blk = b;
    l->w_len = per * (size_t)area(b);
    l->b_len = (size_t)l->out_c * (size_t)area(b);
}

/* The positions of b whose fields lie in own, padding aside: an interval
 * of rows times an interval of columns (empty: y0 == y1). */
static lc_rect_t interior(const layer_t *l, lc_rect_t b, lc_rect_t own)
{
    lc_rect_t r = { b.y0, b.y0, b.x0, b.x0 };
    int y0 = -1, y1 = -1, x0 = -1, x1 = -1;
    for (int y = b.y0; y < b.y1; y++) {
        const lc_rect_t f = field(l, (lc_rect_t){ y, y + 1, b.x0, b.x0 + 1 });
        if (f.y0 >= own.y0 && f.y1 <= own.y1) { if (y0 < 0) y0 = y; y1 = y + 1; }
    }
    for (int x = b.x0; x < b.x1; x++) {
        const lc_rect_t f = field(l, (lc_rect_t){ b.y0, b.y0 + 1, x, x + 1 });
        if (f.x0 >= own.x0 && f.x1 <= own.x1) { if (x0 < 0) x0 = x; x1 = x + 1; }
    }
    if (y0 >= 0 && x0 >= 0) r = (lc_rect_t){ y0, y1, x0, x1 };
    return r;
}

void spatial_setup(model_t *m)
{
    const int M = m->part.count, me = m->part.index, n = m->nlayers, B = m->max_batch;
    const layer_t *L = m->layers;
    struct spatial *s = xcalloc(1, sizeof *s);
    s->M = M;
    s->me = me;
    s->lay = xcalloc((size_t)n, sizeof *s->lay);
    s->top = -1;
    s->in = xcalloc((size_t)n, sizeof(lc_rect_t));
    s->out = xcalloc((size_t)n, sizeof(lc_rect_t));
    for (int i = 0; i < n; i++) {
        if (L[i].kind == LAYER_FLATTEN && i > 0) s->top = i - 1;
        if (L[i].kind != LAYER_LC) continue;
        int end;
        stage(L, n, i, &end);
        for (int j = i + 1; j <= end; j++) {   /* its activation and pooling act on its block */
            s->in[j] = L[i].blk;
            s->out[j] = L[j].kind == LAYER_MAXPOOL ? stage_block(L, n, i, me, M) : L[i].blk;
        }
        lc_split_t *z = &s->lay[i];
        z->own = own_input(L, n, i, me, M);
        z->inner = interior(&L[i], L[i].blk, z->own);
        if (lc_below(L, i) < 0) continue;   /* the image: every partition has all of it */
        z->peer = xcalloc((size_t)M, sizeof(int));
        z->send = xcalloc((size_t)M, sizeof(lc_rect_t));
        z->recv = xcalloc((size_t)M, sizeof(lc_rect_t));
        z->nsend = xcalloc((size_t)M, sizeof(long));
        z->nrecv = xcalloc((size_t)M, sizeof(long));
        z->sB = xcalloc((size_t)M, sizeof(long));
        z->rB = xcalloc((size_t)M, sizeof(long));
        z->sbuf = xcalloc((size_t)M, sizeof(float *));
        z->rbuf = xcalloc((size_t)M, sizeof(float *));
        const lc_rect_t need = field(&L[i], L[i].blk);
        for (int q = 0; q < M; q++) {
            if (q == me) continue;
            const lc_rect_t oq = own_input(L, n, i, q, M);
            const lc_rect_t nq = field(&L[i], spatial_block(L, n, i, q, M));
            const lc_rect_t snd = meet(z->own, nq), rcv = meet(oq, need);
            if (!area(snd) && !area(rcv)) continue;
            const int j = z->n++;
            z->peer[j] = q;
            z->send[j] = snd;
            z->recv[j] = rcv;
            z->nsend[j] = (long)L[i].in_c * area(snd);
            z->nrecv[j] = (long)L[i].in_c * area(rcv);
            z->sbuf[j] = xalloc_floats((size_t)B * (size_t)z->nsend[j]);
            z->rbuf[j] = xalloc_floats((size_t)B * (size_t)z->nrecv[j]);
        }
    }
    if (s->top >= 0) {
        const layer_t *t = &L[s->top];
        s->gown = xcalloc((size_t)M, sizeof(lc_rect_t));
        for (int q = 0; q < M; q++) s->gown[q] = top_block(L, n, s->top, q, M);
        s->gloc = xalloc_floats((size_t)B * (size_t)t->out_c * (size_t)area(s->gown[me]));
        s->gdx = xalloc_floats((size_t)B * (size_t)t->out_c * (size_t)area(s->gown[me]));
    }
    m->spatial = s;
}

void spatial_free(model_t *m)
{
    struct spatial *s = m->spatial;
    if (!s) return;
    for (int i = 0; i < m->nlayers; i++) {
        lc_split_t *z = &s->lay[i];
        for (int j = 0; j < z->n; j++) { free(z->sbuf[j]); free(z->rbuf[j]); }
        free(z->peer); free(z->send); free(z->recv); free(z->nsend); free(z->nrecv);
        free(z->sB); free(z->rB); free(z->sbuf); free(z->rbuf);
    }
    free(s->lay); free(s->in); free(s->out); free(s->gown); free(s->gloc); free(s->gdx);
    free(s);
    m->spatial = NULL;
}

/* (B, C, H, W) rectangle r of x, packed as (B, C, rows, cols), or unpacked
 * back (add: added to what is there). */
static void pack(float *dst, const float *x, int B, int C, int H, int W, lc_rect_t r)
{
    const int rw = r.x1 - r.x0;
    for (long bc = 0; bc < (long)B * C; bc++)
        for (int y = r.y0; y < r.y1; y++, dst += rw)
            memcpy(dst, x + (bc * H + y) * W + r.x0, sizeof(float) * (size_t)rw);
}

static void unpack(float *x, const float *src, int B, int C, int H, int W, lc_rect_t r, int add)
{
    const int rw = r.x1 - r.x0;
    for (long bc = 0; bc < (long)B * C; bc++)
        for (int y = r.y0; y < r.y1; y++, src += rw) {
            float *d = x + (bc * H + y) * W + r.x0;
            if (add) for (int k = 0; k < rw; k++) d[k] += src[k];
            else memcpy(d, src, sizeof(float) * (size_t)rw);
        }
}

static void zero(float *x, int B, int C, int H, int W, lc_rect_t r)
{
    for (long bc = 0; bc < (long)B * C; bc++)
        for (int y = r.y0; y < r.y1; y++) memset(x + (bc * H + y) * W + r.x0, 0, sizeof(float) * (size_t)(r.x1 - r.x0));
}

static conv_geom_t geom(const layer_t *l, int B) { return layer_geom(l, B, l->out_c); }

/* The up to four rectangles of b outside its interior r. */
static int border(lc_rect_t b, lc_rect_t r, lc_rect_t *out)
{
    if (!area(r)) { out[0] = b; return 1; }
    int n = 0;
    out[n++] = (lc_rect_t){ b.y0, r.y0, b.x0, b.x1 };
    out[n++] = (lc_rect_t){ r.y1, b.y1, b.x0, b.x1 };
    out[n++] = (lc_rect_t){ r.y0, r.y1, b.x0, r.x0 };
    out[n++] = (lc_rect_t){ r.y0, r.y1, r.x1, b.x1 };
    return n;
}

void spatial_lc_forward(model_t *m, int i, float *inp, int B)
{
    const lc_split_t *z = &m->spatial->lay[i];
    const layer_t *l = &m->layers[i];
    const conv_geom_t g = geom(l, B);
    float *col = m->col + m->col_off[i];
    const float *w = m->params + l->w_off, *b = m->params + l->b_off;
    if (z->n) {
        for (int j = 0; j < z->n; j++) {
            pack(z->sbuf[j], inp, B, l->in_c, l->in_h, l->in_w, z->send[j]);
            z->sB[j] = (long)B * z->nsend[j];
            z->rB[j] = (long)B * z->nrecv[j];
        }
        m->part.halo_start(m->part.ctx, z->n, z->peer, z->sbuf, z->sB, z->rbuf, z->rB);
    }
    lc_forward_rect(l->out, col, inp, w, b, &g, l->blk, z->inner);
    if (z->n) {
        m->part.halo_wait(m->part.ctx);
        for (int j = 0; j < z->n; j++) unpack(inp, z->rbuf[j], B, l->in_c, l->in_h, l->in_w, z->recv[j], 0);
    }
    lc_rect_t rest[4];
    const int nr = border(l->blk, z->inner, rest);
    for (int k = 0; k < nr; k++)
        if (area(rest[k])) lc_forward_rect(l->out, col, inp, w, b, &g, l->blk, rest[k]);
}

void spatial_lc_backward(model_t *m, int i, float *dinp, const float *inp, int B)
{
    const lc_split_t *z = &m->spatial->lay[i];
    const layer_t *l = &m->layers[i];
    const conv_geom_t g = geom(l, B);
    float *col = m->col + m->col_off[i];
    float *dw = m->grads + l->w_off, *db = m->grads + l->b_off;
    const float *w = m->params + l->w_off;
    if (dinp) {   /* where this block's gradient goes: its fields, and its own input block */
        zero(dinp, B, l->in_c, l->in_h, l->in_w, field(l, l->blk));
        zero(dinp, B, l->in_c, l->in_h, l->in_w, z->own);
    }
    lc_rect_t rest[4];
    const int nr = border(l->blk, z->inner, rest);
    for (int k = 0; k < nr; k++)
        if (area(rest[k])) lc_backward_rect(dinp, dw, db, col, l->dout, inp, w, &g, l->blk, rest[k]);
    const int halo = dinp && z->n;
    if (halo) {
        /* the gradients of the neighbours' positions go back to them: the
         * forward pass's messages reversed */
        for (int j = 0; j < z->n; j++) pack(z->rbuf[j], dinp, B, l->in_c, l->in_h, l->in_w, z->recv[j]);
        m->part.halo_start(m->part.ctx, z->n, z->peer, z->rbuf, z->rB, z->sbuf, z->sB);
    }
    if (area(z->inner)) lc_backward_rect(dinp, dw, db, col, l->dout, inp, w, &g, l->blk, z->inner);
    if (halo) {
        m->part.halo_wait(m->part.ctx);
        for (int j = 0; j < z->n; j++) unpack(dinp, z->sbuf[j], B, l->in_c, l->in_h, l->in_w, z->send[j], 1);
    }
}

void spatial_dense_forward(model_t *m, int i, const float *inp, int B)
{
    struct spatial *s = m->spatial;
    layer_t *l = &m->layers[i];
    const layer_t *t = &m->layers[s->top];
    const lc_rect_t own = s->gown[s->me];
    const int F = t->out_c * (int)area(own), K = l->out_c;
    pack(s->gloc, inp, B, t->out_c, t->out_h, t->out_w, own);
    if (F > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, K, F, 1.0f, s->gloc, F, m->params + l->w_off, F,
                    0.0f, l->out, K);
    else
        memset(l->out, 0, sizeof(float) * (size_t)B * (size_t)K);
    if (l->b_len)   /* partition 0 holds the bias */
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++) l->out[(long)b * K + k] += m->params[l->b_off + (size_t)k];
    m->part.sum(m->part.ctx, l->out, (long)B * K);
}

void spatial_dense_backward(model_t *m, int i, float *dinp, int B)
{
    struct spatial *s = m->spatial;
    layer_t *l = &m->layers[i];
    const layer_t *t = &m->layers[s->top];
    const lc_rect_t own = s->gown[s->me];
    const int F = t->out_c * (int)area(own), K = l->out_c;
    const float *d = l->dout;   /* (B, K): the same on every partition */
    if (F > 0) {
        /* dW(K, F) = dᵀ · X_own; dX_own(B, F) = d · W */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, F, B, 1.0f, d, K, s->gloc, F, 0.0f,
                    m->grads + l->w_off, F);
        if (dinp) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, F, K, 1.0f, d, K, m->params + l->w_off, F,
                        0.0f, s->gdx, F);
            unpack(dinp, s->gdx, B, t->out_c, t->out_h, t->out_w, own, 0);
        }
    }
    if (l->b_len)
        for (int k = 0; k < K; k++) {
            float g = 0;
            for (int b = 0; b < B; b++) g += d[(long)b * K + k];
            m->grads[l->b_off + (size_t)k] = g;
        }
}

void spatial_act(model_t *m, int i, const float *inp, float *dinp, int B)
{
    const layer_t *l = &m->layers[i];
    const lc_rect_t r = m->spatial->in[i];
    const int rw = r.x1 - r.x0, relu = l->kind == LAYER_RELU;
    for (long bc = 0; bc < (long)B * l->out_c; bc++)
        for (int y = r.y0; y < r.y1; y++) {
            const long o = (bc * l->out_h + y) * l->out_w + r.x0;
            if (!dinp && relu) relu_forward(l->out + o, inp + o, rw);
            else if (!dinp) tanh_forward(l->out + o, inp + o, rw);
            else if (relu) relu_backward(dinp + o, l->dout + o, l->out + o, rw);
            else tanh_backward(dinp + o, l->dout + o, l->out + o, rw);
        }
}

/* Max pooling (stride = window, no padding, as lc models build it) over
 * this partition's block; relu: a ReLU fused before it. The same
 * first-wins choice and +0 for a non-positive maximum as the whole-layer
 * kernels. */
void spatial_pool_forward(model_t *m, int i, const float *inp, int B, int relu)
{
    const layer_t *l = &m->layers[i];
    const lc_rect_t r = m->spatial->out[i];
    const int Q = l->k, H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
    for (long bc = 0; bc < (long)B * l->out_c; bc++) {
        const float *x = inp + bc * H * W;
        for (int y = r.y0; y < r.y1; y++)
            for (int xx = r.x0; xx < r.x1; xx++) {
                int32_t bi = (int32_t)((y * Q) * W + xx * Q);
                float best = x[bi];
                for (int ki = 0; ki < Q; ki++)
                    for (int kj = 0; kj < Q; kj++) {
                        const int32_t at = (int32_t)((y * Q + ki) * W + xx * Q + kj);
                        if (x[at] > best) { best = x[at]; bi = at; }
                    }
                const long o = (bc * OH + y) * OW + xx;
                l->out[o] = relu ? (best > 0.0f ? best : 0.0f) : best;
                l->argmax[o] = (int32_t)(bc * H * W) + bi;
            }
    }
}

void spatial_pool_backward(model_t *m, int i, float *dinp, int B, int relu)
{
    const layer_t *l = &m->layers[i];
    const lc_rect_t r = m->spatial->out[i], in = m->spatial->in[i];
    const int H = l->in_h, W = l->in_w, OH = l->out_h, OW = l->out_w;
    for (long bc = 0; bc < (long)B * l->out_c; bc++) {
        for (int y = in.y0; y < in.y1; y++)   /* the block, rows and columns the pooling drops included */
            memset(dinp + (bc * H + y) * W + in.x0, 0, sizeof(float) * (size_t)(in.x1 - in.x0));
        for (int y = r.y0; y < r.y1; y++)
            for (int xx = r.x0; xx < r.x1; xx++) {
                const long o = (bc * OH + y) * OW + xx;
                const float d = 0.0f + l->dout[o];
                dinp[l->argmax[o]] = relu && !(l->out[o] > 0.0f) ? 0.0f : d;
            }
    }
}
