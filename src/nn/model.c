#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"
#include "plan.h"
#include "spatial.h"


int model_spec_check(const char *spec, int c, int h, int w, int classes, char *err, size_t errlen)
{
    plan_t *p = xcalloc(1, sizeof *p);
    int rc = plan_build(p, spec, c, h, w, classes, err, errlen);
    free(p);
    return rc;
}

int model_spec_graph(const char *spec)
{
    char err[256];
    plan_t *p = xcalloc(1, sizeof *p);
    /* the shape only matters to errors: any valid one tells whether it branches */
    int g = plan_build(p, spec, 3, 32, 32, 10, err, sizeof err) == 0 && p->graph;
    free(p);
    return g;
}

double model_spec_act_floats(const char *spec, int c, int h, int w, int classes)
{
    char err[256];
    plan_t *p = xcalloc(1, sizeof *p);
    double n = 0;
    if (plan_build(p, spec, c, h, w, classes, err, sizeof err) == 0)
        for (int i = 0; i < p->n; i++) n += (double)p->l[i].out_c * p->l[i].out_h * p->l[i].out_w;
    free(p);
    return n;
}

int model_nodecay_spans(const model_t *m, size_t *out, int max)
{
    int n = 0;
    for (int i = 0; i < m->nlayers && n < max; i++) {
        const layer_t *l = &m->layers[i];
        if (l->kind == LAYER_BN) { out[2 * n] = l->w_off; out[2 * n + 1] = l->w_len + l->b_len; n++; }
        else if (l->b_len) { out[2 * n] = l->b_off; out[2 * n + 1] = l->b_len; n++; }
    }
    return n;
}

int model_owner_spans(const model_t *m, int B, int T, size_t *out, int max)
{
    if (T < 2 || m->part.count != 1) return 0;
    int n = 0;
    size_t at = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (!l->w_len && !l->b_len) continue;
        if (l->kind != LAYER_DENSE || l->w_off != at || (l->b_len && l->b_off != l->w_off + l->w_len)) return 0;
        const int OUT = l->u_hi - l->u_lo, IN = (int)(l->w_len / (size_t)OUT);
        if (dense_owner_row(B, IN, OUT, T, 1) < 0 || n + T + 1 > max) return 0;
        for (int t = 0; t < T; t++) {
            const long r0 = dense_owner_row(B, IN, OUT, T, t), r1 = dense_owner_row(B, IN, OUT, T, t + 1);
            if (r1 <= r0) continue;
            out[3 * n] = l->w_off + (size_t)r0 * (size_t)IN;
            out[3 * n + 1] = (size_t)(r1 - r0) * (size_t)IN;
            out[3 * n + 2] = (size_t)t;
            n++;
        }
        if (l->b_len) {
            out[3 * n] = l->b_off; out[3 * n + 1] = l->b_len;
            out[3 * n + 2] = (size_t)dense_bias_owner(B, IN, OUT, T);
            n++;
        }
        at = l->w_off + l->w_len + l->b_len;
    }
    return at == m->nparams ? n : 0;
}

int model_bn_channels(const model_t *m)
{
    int c = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == LAYER_BN && m->layers[i].out_c > c) c = m->layers[i].out_c;
    return c;
}

static int layer_split(const layer_t *l) { return l->kind == LAYER_DENSE || l->kind == LAYER_CONV; }

int model_part_check(const char *spec, int c, int h, int w, int classes, int M, char *err, size_t errlen)
{
    plan_t *p = xcalloc(1, sizeof *p);
    int rc = plan_build(p, spec, c, h, w, classes, err, errlen);
    int lc = 0;
    for (int i = 0; i < p->n; i++) lc |= p->l[i].kind == LAYER_LC;
    if (rc == 0 && M > 1 && lc) rc = spatial_check(p->l, p->n, M, spec, err, errlen);
    if (rc == 0 && M > 1 && p->graph) {
        snprintf(err, errlen, "--model-parallel %d: model '%s' has residual branches and batch normalization, which model parallelism does not split; use --model-parallel 1 (data parallelism) or an mlp or lenet model",
                 M, spec);
        rc = -1;
    }
    /* an lc model's classifier is split by inputs, not units */
    for (int i = 0; i < p->n && rc == 0 && !lc; i++)
        if (layer_split(&p->l[i]) && p->l[i].out_c < M) {
            snprintf(err, errlen, "--model-parallel %d splits every layer by output units, but layer %d (%s) of '%s' has only %d; use at most %d partitions",
                     M, i + 1, layer_kind_name(p->l[i].kind), spec, p->l[i].out_c, p->l[i].out_c);
            rc = -1;
        }
    free(p);
    return rc;
}

model_t *model_create(const char *spec, int c, int h, int w, int classes, int max_batch)
{
    return model_create_part(spec, c, h, w, classes, max_batch, NULL);
}

/* Cut a planned layer down to partition P of M: units [u_lo, u_hi) of out_c. */
static void layer_cut(layer_t *l, int P, int M)
{
    const size_t per_unit = l->w_len / (size_t)l->out_c;
    const int plane = l->out_h * l->out_w;
    l->u_lo = (int)((long)l->out_c * P / M);
    l->u_hi = (int)((long)l->out_c * (P + 1) / M);
    l->w_len = per_unit * (size_t)(l->u_hi - l->u_lo);
    l->b_len = l->b_len ? (size_t)(l->u_hi - l->u_lo) : 0;
    l->pb = xcalloc((size_t)M + 1, sizeof(int));
    for (int q = 0; q <= M; q++) l->pb[q] = (int)((long)l->out_c * q / M) * plane;
}

model_t *model_create_part(const char *spec, int c, int h, int w, int classes, int max_batch,
                           const model_part_t *part)
{
    plan_t *pl = xcalloc(1, sizeof *pl);
    char err[256];
    if (plan_build(pl, spec, c, h, w, classes, err, sizeof err) != 0) die("%s", err);
    if (max_batch < 1) die("model_create: max_batch %d < 1", max_batch);
    const int M = part && part->count > 1 ? part->count : 1;
    if (M > 1 && model_part_check(spec, c, h, w, classes, M, err, sizeof err) != 0) die("%s", err);
    const int n = pl->n;
    model_t *m = xcalloc(1, sizeof *m);
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    m->in_c = c; m->in_h = h; m->in_w = w; m->classes = classes;
    m->nlayers = n;
    m->max_batch = max_batch;
    m->graph = pl->graph;
    m->training = 1;
    m->bn_momentum = 0.1f;
    m->layers = xcalloc((size_t)n, sizeof(layer_t));
    memcpy(m->layers, pl->l, sizeof(layer_t) * (size_t)n);
    free(pl);
    m->col_off = xcalloc((size_t)n, sizeof(long));
    if (M > 1) m->part = *part; else m->part = (model_part_t){ .index = 0, .count = 1 };

    int lcm = 0;   /* an lc model: split into spatial blocks */
    for (int i = 0; i < n; i++) lcm |= m->layers[i].kind == LAYER_LC;
    size_t off = 0, full = 0, soff = 0;
    long col_total = 0, max_out = 0, work_max = 0, dense_max = 0;
    int max_oc = 0;
    for (int i = 0; i < n; i++) {
        layer_t *l = &m->layers[i];
        l->gw_off = full; full += l->w_len;
        l->gb_off = full; full += l->b_len;
        l->u_lo = 0; l->u_hi = l->out_c;
        l->blk = (lc_rect_t){ 0, l->out_h, 0, l->out_w };
        if (M > 1 && l->kind == LAYER_LC) spatial_cut(m, i);
        else if (M > 1 && lcm && spatial_classifier(m->layers, n, i)) spatial_cut_classifier(m, i);
        else if (M > 1 && layer_split(l)) layer_cut(l, part->index, M);
        l->w_off = off; off += l->w_len;
        l->b_off = off; off += l->b_len;
        l->s_off = soff; soff += l->s_len;
        if (l->kind == LAYER_CONV) {
            conv_geom_t g = layer_geom(l, max_batch, l->u_hi - l->u_lo);
            const long need = conv_col_size(&g), pad = conv_pad_size(&g);
            /* each convolution keeps its padded input from forward to
             * backward; a graph model's convolutions share the rest of the
             * workspace (work_max, after every padded input), the others
             * keep theirs */
            m->col_off[i] = col_total;
            col_total += m->graph ? pad : need;
            if (need - pad > work_max) work_max = need - pad;
            if (l->out_c > max_oc) max_oc = l->out_c;
        } else if (l->kind == LAYER_LC) {
            conv_geom_t g = layer_geom(l, max_batch, l->out_c);
            m->col_off[i] = col_total;
            col_total += lc_col_size(&g);
        } else if (l->kind == LAYER_DENSE) {
            const long need = dense_ws_size(max_batch, l->in_c * l->in_h * l->in_w, l->u_hi - l->u_lo);
            if (need > dense_max) dense_max = need;
        }
        if (layer_out_size(l) > max_out) max_out = layer_out_size(l);
        if (m->graph) {
            if (l->src >= 0) m->layers[l->src].nuse++;
            if (l->src2 >= 0) m->layers[l->src2].nuse++;
        }
    }
    m->nparams = off;
    m->full_nparams = full;
    m->nstate = soff;
    /* the state rides right after the parameters: one allocation */
    m->params = xalloc_floats(off + soff);
    m->state = m->params + off;
    m->grads = xalloc_floats(off);
    m->col_work_off = col_total;
    if (m->graph) col_total += work_max;
    m->dense_ws_off = col_total;   /* the dense layers' workspace, shared */
    col_total += dense_max;
    m->col = col_total ? xalloc_floats((size_t)col_total) : NULL;
    m->probs = xalloc_floats((size_t)max_batch * classes);
    m->dlogits = xalloc_floats((size_t)max_batch * classes);
    model_init_state(m);
    if (m->graph) {
        m->dscratch = xalloc_floats((size_t)max_batch * (size_t)max_out);
        m->zbias = xalloc_floats((size_t)(max_oc > 0 ? max_oc : 1));
        m->bn_moments = xmalloc(sizeof(double) * 2 * (size_t)max_batch * (size_t)(max_oc > 0 ? max_oc : 1));
        graph_alloc_douts(m, (size_t)max_batch * (size_t)max_out);
    }

    /* A layer's input gradient is needed only if some layer below has
     * parameters; flatten aliases its neighbour's buffers. */
    for (int i = 0; i < n; i++) {
        layer_t *l = &m->layers[i];
        long nl = (long)max_batch * layer_out_size(l);
        if (l->kind == LAYER_FLATTEN) {
            l->out = NULL;  /* set to the input at forward time */
            l->dout = i > 0 ? m->layers[i - 1].dout : NULL;
            continue;
        }
        if (passes_relu_fused(m, i)) {   /* the pool above computes both, and both gradients */
            l->out = l->dout = NULL;
            continue;
        }
        /* a ReLU the dense layer below applies: its output is that layer's */
        l->out = passes_relu_in_dense(m, i) ? NULL : xalloc_floats((size_t)nl);
        if (!m->graph) l->dout = (i == n - 1) ? m->dlogits : xalloc_floats((size_t)nl);
        if (l->pb) {
            long np = (long)max_batch * (l->pb[part->index + 1] - l->pb[part->index]);
            l->lout = xalloc_floats((size_t)np);
            l->ldout = xalloc_floats((size_t)np);
        }
        if (l->kind == LAYER_MAXPOOL) l->argmax = xcalloc((size_t)nl, sizeof(int32_t));
        if (l->kind == LAYER_BN) l->aux = xalloc_floats(2 * (size_t)l->out_c);
    }
    if (M > 1 && lcm) spatial_setup(m);
    return m;
}

void model_init_state(model_t *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (l->kind != LAYER_BN) continue;
        for (int c = 0; c < l->out_c; c++) {
            m->state[l->s_off + (size_t)c] = 0.0f;
            m->state[l->s_off + (size_t)l->out_c + (size_t)c] = 1.0f;
        }
    }
}

void model_free(model_t *m)
{
    if (!m) return;
    spatial_free(m);
    for (int i = 0; i < m->nlayers; i++) {
        layer_t *l = &m->layers[i];
        if (l->kind == LAYER_FLATTEN || passes_relu_fused(m, i)) continue;
        if (!passes_relu_in_dense(m, i)) free(l->out);
        if (i != m->nlayers - 1 && !m->graph) free(l->dout);
        free(l->argmax);
        free(l->pb); free(l->lout); free(l->ldout);
        free(l->aux);
    }
    free(m->layers); free(m->col_off);
    free(m->params); free(m->grads); free(m->col);
    free(m->probs); free(m->dlogits);
    free(m->dscratch); free(m->zbias); free(m->bn_moments);
    for (int i = 0; i < m->ndpool; i++) free(m->dpool[i]);
    free(m->dpool);
    free(m);
}

void model_init_params(model_t *m, uint64_t seed)
{
    rng_t r;
    rng_seed(&r, seed, 0x1417);  /* stream: parameter init */
    memset(m->params, 0, sizeof(float) * m->nparams);
    for (int i = 0; i < m->nlayers; i++) {
        layer_t *l = &m->layers[i];
        if (!l->w_len) continue;
        if (l->kind == LAYER_BN) {   /* γ = 1, β = 0 */
            for (size_t j = 0; j < l->w_len; j++) m->params[l->w_off + j] = 1.0f;
            continue;
        }
        /* the whole layer's values are drawn in order; a partition keeps
         * the rows of its units [u_lo, u_hi), or the banks of its block */
        const long fan_in = l->kind == LAYER_DENSE ? (long)l->in_c * l->in_h * l->in_w : (long)l->in_c * l->k * l->k;
        long fan_out = (long)l->out_c;
        if (l->kind == LAYER_CONV || l->kind == LAYER_LC) fan_out *= (long)l->k * l->k;
        const size_t all = l->kind == LAYER_LC ? (size_t)l->out_h * l->out_w * (size_t)l->out_c * (size_t)fan_in
                                               : (size_t)l->out_c * (size_t)fan_in;
        const size_t lo = (size_t)l->u_lo * (size_t)fan_in, hi = lo + l->w_len;
        const size_t bank = (size_t)l->out_c * (size_t)fan_in;   /* lc: one position's weights */
        const int bw = l->blk.x1 - l->blk.x0, split_lc = l->kind == LAYER_LC && l->w_len < all;
        /* an lc model's classifier split by inputs: the columns of its block's features */
        const int split_cls = m->spatial && l->kind == LAYER_DENSE && spatial_classifier(m->layers, m->nlayers, i);
        const layer_t *t = split_cls ? &m->layers[i - 2] : NULL;
        const size_t F = t ? (size_t)t->out_c * (size_t)(l->blk.y1 - l->blk.y0) * (size_t)bw : 0;
        const int relu_next = l->he || (i + 1 < m->nlayers && m->layers[i + 1].kind == LAYER_RELU);
        const float sd = sqrtf(2.0f / (float)fan_in), a = sqrtf(6.0f / (float)(fan_in + fan_out));
        float *w = m->params + l->w_off;
        /* values another partition keeps are skipped, not computed: the
         * generator advances as drawing them would (a normal takes two
         * draws, a uniform one) */
        const uint64_t per = relu_next ? 2 : 1;
#define DRAW() (relu_next ? sd * rng_normal(&r) : a * (float)(2.0 * rng_uniform(&r) - 1.0))
        for (size_t j = 0; j < all;) {
            if (split_lc) {   /* a position's whole bank at once */
                const long p = (long)(j / bank), oh = p / l->out_w, ow = p % l->out_w;
                if (oh >= l->blk.y0 && oh < l->blk.y1 && ow >= l->blk.x0 && ow < l->blk.x1) {
                    float *dst = w + ((size_t)(oh - l->blk.y0) * (size_t)bw + (size_t)(ow - l->blk.x0)) * bank;
                    for (size_t k = 0; k < bank; k++) dst[k] = DRAW();
                } else {
                    rng_skip(&r, per * bank);
                }
                j += bank;
                continue;
            }
            long dst = -1;
            if (split_cls) {
                const long k = (long)(j / (size_t)fan_in), f = (long)(j % (size_t)fan_in);
                const long c = f / ((long)t->out_h * t->out_w), y = f / t->out_w % t->out_h, x = f % t->out_w;
                if (y >= l->blk.y0 && y < l->blk.y1 && x >= l->blk.x0 && x < l->blk.x1)
                    dst = (long)((size_t)k * F + ((size_t)c * (size_t)(l->blk.y1 - l->blk.y0) + (size_t)(y - l->blk.y0)) * (size_t)bw
                                 + (size_t)(x - l->blk.x0));
            } else if (j >= lo && j < hi) {
                dst = (long)(j - lo);
            }
            if (dst >= 0) w[dst] = DRAW();
            else rng_skip(&r, per);
            j++;
        }
#undef DRAW
    }
}

const float *model_forward(model_t *m, const float *x, int B)
{
    if (B > m->max_batch) die("model_forward: batch %d exceeds the model's max batch %d", B, m->max_batch);
    return passes_forward(m, x, B);
}

float model_loss(model_t *m, const int32_t *labels, int B)
{
    const float *logits = m->layers[m->nlayers - 1].out;
    return softmax_xent_forward(m->probs, logits, labels, B, m->classes);
}

void model_backward(model_t *m, const int32_t *labels, int B)
{
    softmax_xent_backward(m->dlogits, m->probs, labels, B, m->classes);
    passes_backward(m, B);
}

void model_zero_backward(model_t *m)
{
    memset(m->grads, 0, sizeof(float) * m->nparams);
    for (int i = m->nlayers - 1; i >= 0; i--) passes_grads_ready(m, i);
}

int model_correct(const model_t *m, const int32_t *labels, int B)
{
    const float *z = m->layers[m->nlayers - 1].out;
    int correct = 0, K = m->classes;
    for (int i = 0; i < B; i++) {
        const float *r = z + (long)i * K;
        int best = 0;
        for (int k = 1; k < K; k++) if (r[k] > r[best]) best = k;
        correct += best == labels[i];
    }
    return correct;
}

double model_forward_macs(const model_t *m)
{
    double macs = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (l->kind == LAYER_DENSE || l->kind == LAYER_LC) macs += (double)l->w_len;
        else if (l->kind == LAYER_CONV) macs += (double)l->w_len * l->out_h * l->out_w;
    }
    return macs;
}

double model_train_flops(const model_t *m)
{
    const int first = passes_first_param(m);
    double flops = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        double macs = l->kind == LAYER_DENSE || l->kind == LAYER_LC ? (double)l->w_len
                    : l->kind == LAYER_CONV ? (double)l->w_len * l->out_h * l->out_w : 0;
        /* forward and weight gradient always; the input gradient only where
         * model_backward computes one */
        const int dinp = l->src >= 0 && l->src >= first;
        flops += 2.0 * macs * (dinp ? 3 : 2);
    }
    return flops;
}

int model_spans(const model_t *m, model_span_t *out, int max)
{
    int n = 0;
#define SPAN(o, f, len) do { if (out && n < max) out[n] = (model_span_t){ (o), (f), (len) }; n++; } while (0)
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (!l->w_len && !l->b_len) continue;
        const lc_rect_t b = l->blk;
        if (m->spatial && l->kind == LAYER_DENSE && spatial_classifier(m->layers, m->nlayers, i)) {
            /* weight columns of its block's features: a span per class, channel and row */
            const layer_t *t = &m->layers[i - 2];
            const size_t bw = (size_t)(b.x1 - b.x0), bh = (size_t)(b.y1 - b.y0), C = (size_t)t->out_c;
            const size_t H = (size_t)t->out_h, W = (size_t)t->out_w, F = C * bh * bw;
            for (size_t k = 0; k < (size_t)l->out_c; k++)
                for (size_t c = 0; c < C; c++)
                    for (size_t y = 0; y < bh; y++)
                        SPAN(l->w_off + k * F + (c * bh + y) * bw,
                             l->gw_off + k * C * H * W + (c * H + (size_t)b.y0 + y) * W + (size_t)b.x0, bw);
            if (l->b_len) SPAN(l->b_off, l->gb_off, l->b_len);
            continue;
        }
        if (l->kind == LAYER_LC && m->spatial) {   /* a bank per position: a span per row of the block */
            const size_t bw = (size_t)(b.x1 - b.x0), bhw = (size_t)(b.y1 - b.y0) * bw, OW = (size_t)l->out_w;
            const size_t bank = l->w_len / bhw;
            for (int y = b.y0; y < b.y1; y++)
                SPAN(l->w_off + (size_t)(y - b.y0) * bw * bank, l->gw_off + ((size_t)y * OW + (size_t)b.x0) * bank, bw * bank);
            for (int c = 0; c < l->out_c; c++)
                for (int y = b.y0; y < b.y1; y++)
                    SPAN(l->b_off + (size_t)c * bhw + (size_t)(y - b.y0) * bw,
                         l->gb_off + ((size_t)c * (size_t)l->out_h + (size_t)y) * OW + (size_t)b.x0, bw);
            continue;
        }
        const size_t per_unit = l->kind == LAYER_DENSE ? (size_t)l->in_c * l->in_h * l->in_w
                              : l->w_len / (size_t)(l->u_hi - l->u_lo);
        SPAN(l->w_off, l->gw_off + (size_t)l->u_lo * per_unit, l->w_len);
        SPAN(l->b_off, l->gb_off + (size_t)l->u_lo, l->b_len);
    }
#undef SPAN
    return n;
}

size_t model_part_nparams(const model_t *m, int q)
{
    const int M = m->part.count;
    if (M == 1) return m->nparams;
    size_t n = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer_t *l = &m->layers[i];
        if (l->kind == LAYER_LC && m->spatial) {
            const lc_rect_t b = spatial_block(m->layers, m->nlayers, i, q, M), o = l->blk;
            const size_t pos = (size_t)(b.y1 - b.y0) * (size_t)(b.x1 - b.x0);
            const size_t own = (size_t)(o.y1 - o.y0) * (size_t)(o.x1 - o.x0);
            n += (l->w_len / own + (size_t)l->out_c) * pos;
            continue;
        }
        if (m->spatial && l->kind == LAYER_DENSE && spatial_classifier(m->layers, m->nlayers, i)) {
            n += spatial_classifier_nparams(m, i, q);
            continue;
        }
        if (!layer_split(l)) { n += l->w_len + l->b_len; continue; }
        const size_t per_unit = l->kind == LAYER_DENSE ? (size_t)l->in_c * l->in_h * l->in_w
                                                       : (size_t)l->in_c * l->k * l->k;
        const size_t units = (size_t)((long)l->out_c * (q + 1) / M - (long)l->out_c * q / M);
        n += (per_unit + 1) * units;   /* dense and conv layers have a bias here */
    }
    return n;
}
