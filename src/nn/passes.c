/* nn/passes — the forward and backward passes of every model (model.c
 * calls them): layer i reads the output of layer src (the model input if
 * src < 0), the layer below it in a sequential model, any earlier one in a
 * residual network, and a residual add reads a second one (src2).
 *
 * The backward pass visits layers from the top. An output that feeds two
 * layers (a residual block's input: its first convolution and its
 * shortcut) gets the first reader's input gradient written into its dout
 * and the second's added from a scratch buffer. No layer below the lowest
 * one with parameters gets an input gradient.
 *
 * Fusions: a ReLU that a max pooling reads (sequential models) is applied
 * by the pool, in both passes; a convolution that a batch normalization
 * reads takes its output planes' moments while they are in cache, and the
 * normalization's input gradient goes straight into the convolution's
 * padded output gradient.
 */
#include <string.h>

#include "../util/par.h"
#include "../util/util.h"
#include "layers.h"
#include "plan.h"
#include "spatial.h"

static const float BN_EPS = 1e-5f;

int passes_relu_fused(const model_t *m, int i)
{
    return !m->graph && i + 1 < m->nlayers && m->layers[i].kind == LAYER_RELU && m->layers[i + 1].kind == LAYER_MAXPOOL;
}

int passes_relu_in_dense(const model_t *m, int i)
{
    return !m->graph && m->part.count == 1 && i > 0 && m->layers[i].kind == LAYER_RELU &&
           m->layers[i - 1].kind == LAYER_DENSE && m->layers[i].src == i - 1 && !passes_relu_fused(m, i);
}

int passes_first_param(const model_t *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].w_len) return i;
    return m->nlayers;
}

static const float *input_of(const model_t *m, int src) { return src < 0 ? m->input : m->layers[src].out; }

static long in_size(const layer_t *l) { return (long)l->in_c * l->in_h * l->in_w; }

/* ---- forward ---- */

/* What one layer's forward pass leaves for the next ones. */
typedef struct fwd_state {
    int moments_of;   /* the layer whose output planes' moments m->bn_moments holds, or -1 */
    int in_padded;    /* the convolution whose input is already in its padded workspace, or -1 */
    int add_fused;    /* the residual add that the normalization below has computed, or -1 */
} fwd_state_t;

/* Returns the layer whose output planes' moments m->bn_moments now holds
 * (i, if a batch normalization in training reads it next), or -1; in NULL:
 * the input is in the padded workspace already. */
static int conv_forward(model_t *m, int i, const float *in, int B)
{
    layer_t *l = &m->layers[i];
    const float *W = m->params + l->w_off, *bias = m->params + l->b_off;
    conv_geom_t g = layer_geom(l, B, l->u_hi - l->u_lo);
    if (!m->graph) {   /* its own workspace; a split layer computes its partition's channels */
        conv2d_forward(l->pb ? l->lout : l->out, m->col + m->col_off[i], in, W, bias, &g);
        return -1;
    }
    const int to_bn = m->training && i + 1 < m->nlayers && m->layers[i + 1].kind == LAYER_BN && m->layers[i + 1].src == i;
    conv2d_forward_ws(l->out, m->col + m->col_off[i], m->col + m->col_work_off, in, W, l->b_len ? bias : NULL,
                      to_bn ? m->bn_moments : NULL, &g);
    return to_bn ? i : -1;
}

/* A normalization whose only reader is the convolution above it writes
 * straight into that convolution's padded input (its output is then not
 * written: nothing else reads it, and the backward passes read the
 * normalization's input and the convolution's padded copy). Returns that
 * convolution, or -1. One whose only reader is a residual add above it
 * computes the add; *add_fused is then that add, and a convolution right
 * above the add that reads it gets its padded input written too (that
 * convolution is then returned). */
static int bn_forward(model_t *m, int i, const float *in, int B, int moments_of, int *add_fused)
{
    layer_t *l = &m->layers[i];
    const float *W = m->params + l->w_off, *bias = m->params + l->b_off;
    float *rm = m->state + l->s_off, *rv = rm + l->out_c;
    const int HW = l->out_h * l->out_w;
    float *out = l->out;
    plane_pad_t pp;
    bn_out_t o = { 0 };
    int relu = l->relu, also = -1;
    const layer_t *up = i + 1 < m->nlayers ? &m->layers[i + 1] : NULL;
    const int alone = m->graph && !m->spatial && !l->pb && l->nuse == 1 && up && up->src == i && !up->pb;
    if (alone && up->kind == LAYER_CONV) {
        conv_geom_t g = layer_geom(up, B, up->u_hi - up->u_lo);
        if (conv2d_in_padded(&pp, &g)) {
            o.pad = &pp;
            out = m->col + m->col_off[i + 1];
        }
    } else if (alone && up->kind == LAYER_ADD && up->src2 != i && !relu) {
        /* the residual add above, its only reader: added (and the add's
         * ReLU applied) as the normalization writes, into the add's output;
         * the normalization's own is not written (nothing reads it: its
         * backward pass reads its input, the add's its own output) */
        o.add = input_of(m, up->src2);
        out = up->out;
        relu = up->relu;
        *add_fused = i + 1;
        /* the next block's first convolution, right above the add, reads
         * the add's output too: its padded copy written here as well,
         * while each plane is in the cache (not copied again from memory
         * by the convolution) */
        const layer_t *cv = i + 2 < m->nlayers ? &m->layers[i + 2] : NULL;
        if (cv && cv->kind == LAYER_CONV && cv->src == i + 1 && !cv->pb) {
            conv_geom_t g = layer_geom(cv, B, cv->u_hi - cv->u_lo);
            if (conv2d_in_padded(&pp, &g)) {
                o.also = m->col + m->col_off[i + 2];
                o.also_pad = &pp;
                also = i + 2;
            }
        }
    }
    if (m->training)
        bn_forward_train(out, l->aux, l->aux + l->out_c, rm, rv, in, W, bias, moments_of == l->src ? m->bn_moments : NULL,
                         m->bn_moments, B, l->out_c, HW, relu, m->bn_momentum, BN_EPS, m->bn_sync, &o);
    else
        bn_forward_eval(out, rm, rv, in, W, bias, B, l->out_c, HW, relu, BN_EPS, &o);
    return o.pad ? i + 1 : also;
}

static void pool_forward(model_t *m, int i, const float *in, int B)
{
    layer_t *l = &m->layers[i];
    const int fused = i > 0 && passes_relu_fused(m, i - 1);
    if (m->spatial) { spatial_pool_forward(m, i, in, B, fused); return; }
    conv_geom_t g = layer_geom(l, B, l->out_c);
    if (fused) maxpool_relu_forward(l->out, l->argmax, in, &g);
    else maxpool_forward(l->out, l->argmax, in, &g);
}

static void layer_forward(model_t *m, int i, const float *in, int B, fwd_state_t *st)
{
    layer_t *l = &m->layers[i];
    const float *W = m->params + l->w_off, *bias = m->params + l->b_off;
    const long n = (long)B * layer_out_size(l);
    switch (l->kind) {
    case LAYER_DENSE:
        if (m->spatial && spatial_classifier(m->layers, m->nlayers, i)) spatial_dense_forward(m, i, in, B);
        else dense_forward(l->pb ? l->lout : l->out, m->col + m->dense_ws_off, in, W, bias, B, (int)in_size(l),
                           l->u_hi - l->u_lo, i + 1 < m->nlayers && passes_relu_in_dense(m, i + 1));
        break;
    case LAYER_CONV: st->moments_of = conv_forward(m, i, st->in_padded == i ? NULL : in, B); break;
    case LAYER_LC: {
        if (m->spatial) { spatial_lc_forward(m, i, (float *)in, B); break; }
        conv_geom_t g = layer_geom(l, B, l->out_c);
        lc_forward(l->out, m->col + m->col_off[i], in, W, bias, &g);
        break;
    }
    case LAYER_MAXPOOL: pool_forward(m, i, in, B); break;
    case LAYER_RELU:
        if (passes_relu_fused(m, i)) l->out = (float *)in;   /* the pool above applies it */
        else if (passes_relu_in_dense(m, i)) l->out = (float *)in;   /* the dense layer below has */
        else if (m->spatial) spatial_act(m, i, in, NULL, B);
        else relu_forward(l->out, in, n);
        break;
    case LAYER_TANH:
        if (m->spatial) spatial_act(m, i, in, NULL, B);
        else tanh_forward(l->out, in, n);
        break;
    case LAYER_FLATTEN: l->out = (float *)in; break;
    case LAYER_BN: st->in_padded = bn_forward(m, i, in, B, st->moments_of, &st->add_fused); break;
    case LAYER_ADD:
        if (st->add_fused != i) add_forward(l->out, in, m->layers[l->src2].out, n, l->relu);
        break;
    case LAYER_GAP: gap_forward(l->out, in, B, l->out_c, l->in_h * l->in_w); break;
    }
}

const float *passes_forward(model_t *m, const float *x, int B)
{
    m->input = x;
    fwd_state_t st = { .moments_of = -1, .in_padded = -1, .add_fused = -1 };
    for (int i = 0; i < m->nlayers; i++) {
        layer_t *l = &m->layers[i];
        const double t0 = m->layer_s ? now_s() : 0.0;
        layer_forward(m, i, input_of(m, l->src), B, &st);
        /* a split layer: every partition's part of the whole output */
        if (l->pb) m->part.gather(m->part.ctx, l->out, l->lout, B, (int)layer_out_size(l), l->pb);
        if (m->layer_s) m->layer_s[2 * i] += now_s() - t0;
    }
    return m->layers[m->nlayers - 1].out;
}

/* ---- backward ---- */

typedef struct {
    model_t *m;
    int B;
    int first;    /* the lowest layer with parameters */
    int padded;   /* the convolution whose output gradient is in the workspace, padded */
} bwd_t;

/* Where the input gradient for layer src goes: its dout for the first
 * reader to write, the scratch buffer for the second (added by
 * grad_done); NULL for the model input and below the lowest layer with
 * parameters. */
static float *grad_target(bwd_t *b, int src)
{
    if (src < 0 || src < b->first) return NULL;
    layer_t *s = &b->m->layers[src];
    return s->dwrites++ == 0 ? s->dout : b->m->dscratch;
}

/* to = from, or to += from (add): element-wise, the threads taking pieces */
static void copy_or_add(float *to, const float *from, long n, int add)
{
    const int np = par_elems(n);
    PAR_FOR_DYN_IF(np > 1)
    for (int q = 0; q < np; q++) {
        const long e = par_cut(n, np, q + 1, 16);
        for (long j = par_cut(n, np, q, 16); j < e; j++) to[j] = add ? to[j] + from[j] : from[j];
    }
}

static void grad_done(bwd_t *b, int src, const float *d)
{
    if (src < 0 || !d || d != b->m->dscratch) return;
    layer_t *s = &b->m->layers[src];
    copy_or_add(s->dout, d, (long)b->B * layer_out_size(s), 1);
}

/* This partition's columns of a split layer's whole output gradient, made
 * contiguous for the kernels. */
static const float *part_slice(model_t *m, layer_t *l, int B)
{
    const int R = (int)layer_out_size(l), lo = l->pb[m->part.index], nl = l->pb[m->part.index + 1] - lo;
    for (int b = 0; b < B; b++)
        memcpy(l->ldout + (long)b * nl, l->dout + (long)b * R + lo, sizeof(float) * (size_t)nl);
    return l->ldout;
}

static float *conv_backward(bwd_t *b, int i, const float *dout)
{
    model_t *m = b->m;
    layer_t *l = &m->layers[i];
    const float *W = m->params + l->w_off;
    float *dW = m->grads + l->w_off, *db = m->grads + l->b_off;
    conv_geom_t g = layer_geom(l, b->B, l->u_hi - l->u_lo);
    float *d = grad_target(b, l->src);
    if (!m->graph) {
        conv2d_backward(d, dW, db, m->col + m->col_off[i], dout, W, &g);
        return d;
    }
    const float *P = m->col + m->col_off[i], *dpad = b->padded == i ? NULL : l->dout;
    if (d && d == m->dscratch && !l->pb && conv2d_dinp_adds(&g)) {
        /* a second reader: added straight into the gradient the first
         * one wrote (what grad_done would add from the scratch buffer) */
        d = m->layers[l->src].dout;
        conv2d_backward_ws_add(d, dW, l->b_len ? db : NULL, P, m->col + m->col_work_off, dpad, W, &g);
        return d;
    }
    conv2d_backward_ws(d, dW, l->b_len ? db : NULL, P, m->col + m->col_work_off, dpad, W, &g);
    return d;
}

/* The input gradient of a convolution just below that only this layer
 * reads goes straight into that convolution's padded output gradient, if
 * it pads it. */
static float *bn_backward_at(bwd_t *b, int i, const float *in)
{
    model_t *m = b->m;
    layer_t *l = &m->layers[i];
    plane_pad_t pp;
    float *D = NULL;
    if (l->src == i - 1 && m->layers[l->src].kind == LAYER_CONV && m->layers[l->src].nuse == 1) {
        conv_geom_t g = layer_geom(&m->layers[l->src], b->B, m->layers[l->src].out_c);
        D = conv2d_dout_padded(&pp, m->col + m->col_work_off, &g);
    }
    float *d = D ? D : grad_target(b, l->src);
    bn_backward(d, m->grads + l->w_off, m->grads + l->b_off, l->dout, in, l->aux, l->aux + l->out_c, m->params + l->w_off,
                m->params + l->b_off, m->bn_moments, b->B, l->out_c, l->out_h * l->out_w, l->relu, m->bn_sync, D ? &pp : NULL);
    if (D) { b->padded = l->src; return NULL; }
    return d;
}

static void add_backward_at(bwd_t *b, int i)
{
    layer_t *l = &b->m->layers[i];
    const long n = (long)b->B * layer_out_size(l);
    add_backward(l->dout, l->dout, l->out, n, l->relu);   /* in place: the sum's gradient */
    const int srcs[2] = { l->src, l->src2 };
    for (int k = 0; k < 2; k++) {
        float *d = grad_target(b, srcs[k]);
        if (!d || d == l->dout) continue;   /* none, or the same buffer */
        /* a second reader's gradient is added straight from the sum's (what
         * grad_done would add from a copy in the scratch buffer); a first
         * reader's is copied, the threads taking pieces */
        const int add = d == b->m->dscratch;
        copy_or_add(add ? b->m->layers[srcs[k]].dout : d, l->dout, n, add);
    }
}

/* A max pooling's input gradient; through a ReLU it applies, into the
 * gradient below that ReLU. */
static void pool_backward(bwd_t *b, int i)
{
    model_t *m = b->m;
    layer_t *l = &m->layers[i];
    const int fused = i > 0 && passes_relu_fused(m, i - 1);
    float *d = grad_target(b, fused ? m->layers[i - 1].src : l->src);
    if (!d) return;
    if (m->spatial) { spatial_pool_backward(m, i, d, b->B, fused); return; }
    conv_geom_t g = layer_geom(l, b->B, l->out_c);
    if (fused) maxpool_relu_backward(d, l->dout, l->out, l->argmax, &g);
    else maxpool_backward(d, l->dout, l->argmax, &g);
}

/* Layer i is a ReLU that the dense layer below applies (forward) and the
 * dense layer above takes back (backward: dense_backward's relu_in), its
 * only reader in a sequential model. */
static int relu_in_dense_above(const model_t *m, int i)
{
    return i >= 0 && passes_relu_in_dense(m, i) && i + 1 < m->nlayers && m->layers[i + 1].kind == LAYER_DENSE &&
           m->layers[i + 1].src == i && !m->layers[i + 1].pb;
}

/* Layer i's gradients; returns where its input gradient went, for a split
 * layer's sum across partitions (NULL: nowhere, or already added). */
static float *layer_backward(bwd_t *b, int i)
{
    model_t *m = b->m;
    layer_t *l = &m->layers[i];
    const float *in = input_of(m, l->src), *W = m->params + l->w_off;
    float *dW = m->grads + l->w_off, *db = m->grads + l->b_off, *d = NULL;
    const long n = (long)b->B * layer_out_size(l);
    const float *dout = l->pb ? part_slice(m, l, b->B) : l->dout;
    switch (l->kind) {
    case LAYER_DENSE:
        if (relu_in_dense_above(m, l->src)) {   /* through the ReLU below, into the gradient below it */
            d = grad_target(b, m->layers[l->src].src);
            dense_backward(d, dW, db, dout, in, W, b->B, (int)in_size(l), l->u_hi - l->u_lo, 1);
            grad_done(b, m->layers[l->src].src, d);
            return d;
        }
        d = grad_target(b, l->src);
        if (m->spatial && spatial_classifier(m->layers, m->nlayers, i)) spatial_dense_backward(m, i, d, b->B);
        else dense_backward(d, dW, db, dout, in, W, b->B, (int)in_size(l), l->u_hi - l->u_lo, 0);
        break;
    case LAYER_CONV: d = conv_backward(b, i, dout); break;
    case LAYER_LC: {
        d = grad_target(b, l->src);
        if (m->spatial) { spatial_lc_backward(m, i, d, in, b->B); break; }
        conv_geom_t g = layer_geom(l, b->B, l->out_c);
        lc_backward(d, dW, db, m->col + m->col_off[i], dout, in, W, &g);
        break;
    }
    case LAYER_MAXPOOL: pool_backward(b, i); return NULL;
    case LAYER_RELU:
    case LAYER_TANH:
        if (passes_relu_fused(m, i)) return NULL;   /* done by the pool above */
        if (relu_in_dense_above(m, i)) return NULL;   /* done by the dense layer above */
        d = grad_target(b, l->src);
        if (d && m->spatial) spatial_act(m, i, NULL, d, b->B);
        else if (d && l->kind == LAYER_RELU) relu_backward(d, l->dout, l->out, n);
        else if (d) tanh_backward(d, l->dout, l->out, n);
        break;
    case LAYER_FLATTEN: return NULL;   /* its dout is the layer below's */
    case LAYER_BN: d = bn_backward_at(b, i, in); break;
    case LAYER_ADD: add_backward_at(b, i); return NULL;
    case LAYER_GAP:
        d = grad_target(b, l->src);
        if (d) gap_backward(d, l->dout, b->B, l->out_c, l->in_h * l->in_w);
        break;
    }
    grad_done(b, l->src, d);
    return d;
}

void passes_backward(model_t *m, int B)
{
    bwd_t b = { .m = m, .B = B, .first = passes_first_param(m), .padded = -1 };
    for (int i = 0; i < m->nlayers; i++) m->layers[i].dwrites = 0;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        layer_t *l = &m->layers[i];
        const double t0 = m->layer_s ? now_s() : 0.0;
        float *d = layer_backward(&b, i);
        /* each partition's contribution to the input gradient, summed */
        if (l->pb && d) m->part.sum(m->part.ctx, d, (long)B * in_size(l));
        if (m->layer_s) m->layer_s[2 * i + 1] += now_s() - t0;
        passes_grads_ready(m, i);
    }
}

void passes_grads_ready(const model_t *m, int i)
{
    const layer_t *l = &m->layers[i];
    if (l->w_len && m->grad_ready) m->grad_ready(m->grad_ctx, l->w_off, l->w_len + l->b_len);
}
