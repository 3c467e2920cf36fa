#include "model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/util.h"

#define MAX_LAYERS 64

const char *layer_kind_name(layer_kind_t k)
{
    switch (k) {
    case LAYER_DENSE: return "dense";
    case LAYER_CONV: return "conv";
    case LAYER_MAXPOOL: return "maxpool";
    case LAYER_RELU: return "relu";
    case LAYER_TANH: return "tanh";
    case LAYER_FLATTEN: return "flatten";
    }
    return "?";
}

/* ---- spec parsing into a plan (layers with shapes, no buffers) ---- */

typedef struct plan {
    int n;
    layer_t l[MAX_LAYERS];
    int c, h, w;     /* running output shape */
} plan_t;

static int plan_push(plan_t *p, layer_kind_t kind, int out_c, int k, int stride, int pad,
                     char *err, size_t errlen)
{
    if (p->n >= MAX_LAYERS) { snprintf(err, errlen, "model has more than %d layers", MAX_LAYERS); return -1; }
    layer_t *l = &p->l[p->n];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->in_c = p->c; l->in_h = p->h; l->in_w = p->w;
    l->k = k; l->stride = stride; l->pad = pad;
    switch (kind) {
    case LAYER_DENSE:
        l->out_c = out_c; l->out_h = l->out_w = 1;
        l->w_len = (size_t)out_c * p->c * p->h * p->w;
        l->b_len = (size_t)out_c;
        break;
    case LAYER_CONV:
    case LAYER_MAXPOOL: {
        conv_geom_t g = { .B = 1, .C = p->c, .H = p->h, .W = p->w, .OC = out_c,
                          .KH = k, .KW = k, .stride = stride, .pad = pad };
        if (conv_geom_init(&g) != 0) {
            snprintf(err, errlen, "%s %dx%d at layer %d does not fit its %dx%d input",
                     layer_kind_name(kind), k, k, p->n + 1, p->h, p->w);
            return -1;
        }
        l->out_c = kind == LAYER_CONV ? out_c : p->c;
        l->out_h = g.OH; l->out_w = g.OW;
        if (kind == LAYER_CONV) {
            l->w_len = (size_t)out_c * p->c * k * k;
            l->b_len = (size_t)out_c;
        }
        break;
    }
    case LAYER_FLATTEN:
        l->out_c = p->c * p->h * p->w; l->out_h = l->out_w = 1;
        break;
    default:
        l->out_c = p->c; l->out_h = p->h; l->out_w = p->w;
    }
    p->c = l->out_c; p->h = l->out_h; p->w = l->out_w;
    p->n++;
    return 0;
}

static int plan_build(plan_t *p, const char *spec, int c, int h, int w, int classes,
                      char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->c = c; p->h = h; p->w = w;
    if (c < 1 || h < 1 || w < 1 || classes < 2) {
        snprintf(err, errlen, "invalid input shape %dx%dx%d with %d classes", c, h, w, classes);
        return -1;
    }
    char buf[128];
    if (strlen(spec) >= sizeof buf) { snprintf(err, errlen, "model spec '%s' is too long", spec); return -1; }
    strcpy(buf, spec);
    char *fields[8];
    int nf = 0;
    for (char *s = buf, *tok; (tok = strsep(&s, ":")) != NULL;) {
        if (nf == 8) { snprintf(err, errlen, "model spec '%s' has too many ':' fields", spec); return -1; }
        fields[nf++] = tok;
    }
    layer_kind_t act = LAYER_RELU;
    int hidden[MAX_LAYERS], nh = -1;
    for (int i = 1; i < nf; i++) {
        if (!strcmp(fields[i], "tanh")) act = LAYER_TANH;
        else if (!strcmp(fields[i], "relu")) act = LAYER_RELU;
        else if (!strcmp(fields[0], "mlp") && nh < 0 && isdigit((unsigned char)fields[i][0])) {
            nh = 0;
            for (char *s = fields[i], *tok; (tok = strsep(&s, ",")) != NULL;) {
                long v;
                if (parse_long(tok, &v) != 0 || v < 1 || v > 1 << 20 || nh >= MAX_LAYERS / 2 - 2) {
                    snprintf(err, errlen, "bad hidden size '%s' in model spec '%s' (want e.g. mlp:256,128)", tok, spec);
                    return -1;
                }
                hidden[nh++] = (int)v;
            }
        } else {
            snprintf(err, errlen, "unknown option '%s' in model spec '%s'; models: logreg, mlp[:H1,H2,...][:tanh], lenet[:tanh]", fields[i], spec);
            return -1;
        }
    }
    const char *name = fields[0];
    int rc = 0;
    if (!strcmp(name, "logreg")) {
        if (nf > 1) { snprintf(err, errlen, "model logreg takes no options (got '%s')", spec); return -1; }
        rc |= plan_push(p, LAYER_FLATTEN, 0, 0, 0, 0, err, errlen);
        rc |= plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen);
    } else if (!strcmp(name, "mlp")) {
        if (nh < 0) { hidden[0] = 256; hidden[1] = 128; nh = 2; }
        rc |= plan_push(p, LAYER_FLATTEN, 0, 0, 0, 0, err, errlen);
        for (int i = 0; i < nh && !rc; i++) {
            rc |= plan_push(p, LAYER_DENSE, hidden[i], 0, 0, 0, err, errlen);
            rc |= plan_push(p, act, 0, 0, 0, 0, err, errlen);
        }
        if (!rc) rc |= plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen);
    } else if (!strcmp(name, "lenet")) {
        if (h < 12 || w < 12) {
            snprintf(err, errlen, "model lenet needs inputs of at least 12x12 (data is %dx%d); use mlp or logreg", h, w);
            return -1;
        }
        static const struct { layer_kind_t kind; int out_c, k, stride, pad; } lenet[] = {
            { LAYER_CONV, 6, 5, 1, 2 }, { LAYER_RELU, 0, 0, 0, 0 }, { LAYER_MAXPOOL, 0, 2, 2, 0 },
            { LAYER_CONV, 16, 5, 1, 0 }, { LAYER_RELU, 0, 0, 0, 0 }, { LAYER_MAXPOOL, 0, 2, 2, 0 },
            { LAYER_FLATTEN, 0, 0, 0, 0 }, { LAYER_DENSE, 120, 0, 0, 0 }, { LAYER_RELU, 0, 0, 0, 0 },
            { LAYER_DENSE, 84, 0, 0, 0 }, { LAYER_RELU, 0, 0, 0, 0 }, { LAYER_DENSE, -1, 0, 0, 0 },
        };
        for (size_t i = 0; i < sizeof lenet / sizeof lenet[0] && !rc; i++) {
            layer_kind_t kind = lenet[i].kind == LAYER_RELU ? act : lenet[i].kind;
            int oc = lenet[i].out_c < 0 ? classes : lenet[i].out_c;
            rc = plan_push(p, kind, oc, lenet[i].k, lenet[i].stride, lenet[i].pad, err, errlen);
        }
    } else {
        snprintf(err, errlen, "unknown model '%s'; models: logreg, mlp[:H1,H2,...][:tanh], lenet[:tanh]", name);
        return -1;
    }
    return rc ? -1 : 0;
}

int model_spec_check(const char *spec, int c, int h, int w, int classes, char *err, size_t errlen)
{
    plan_t p;
    return plan_build(&p, spec, c, h, w, classes, err, errlen);
}

static long layer_out_size(const layer_t *l) { return (long)l->out_c * l->out_h * l->out_w; }

static conv_geom_t layer_geom(const layer_t *l, int B)
{
    conv_geom_t g = { .B = B, .C = l->in_c, .H = l->in_h, .W = l->in_w, .OC = l->out_c,
                      .KH = l->k, .KW = l->k, .stride = l->stride, .pad = l->pad };
    conv_geom_init(&g);
    return g;
}

model_t *model_create(const char *spec, int c, int h, int w, int classes, int max_batch)
{
    plan_t p;
    char err[256];
    if (plan_build(&p, spec, c, h, w, classes, err, sizeof err) != 0) die("%s", err);
    if (max_batch < 1) die("model_create: max_batch %d < 1", max_batch);
    model_t *m = xcalloc(1, sizeof *m);
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    m->in_c = c; m->in_h = h; m->in_w = w; m->classes = classes;
    m->nlayers = p.n;
    m->max_batch = max_batch;
    m->layers = xcalloc((size_t)p.n, sizeof(layer_t));
    memcpy(m->layers, p.l, sizeof(layer_t) * (size_t)p.n);
    m->col_off = xcalloc((size_t)p.n, sizeof(long));

    size_t off = 0;
    long col_total = 0, tmp_max = 0;
    for (int i = 0; i < p.n; i++) {
        layer_t *l = &m->layers[i];
        l->w_off = off; off += l->w_len;
        l->b_off = off; off += l->b_len;
        if (l->kind == LAYER_CONV) {
            conv_geom_t g = layer_geom(l, max_batch);
            m->col_off[i] = col_total;
            col_total += conv_col_size(&g);
            long t = (long)g.OC * g.B * g.OH * g.OW;
            if (t > tmp_max) tmp_max = t;
        }
    }
    m->nparams = off;
    m->params = xalloc_floats(off);
    m->grads = xalloc_floats(off);
    m->col = col_total ? xalloc_floats((size_t)col_total) : NULL;
    m->tmp = tmp_max ? xalloc_floats((size_t)tmp_max) : NULL;
    m->probs = xalloc_floats((size_t)max_batch * classes);
    m->dlogits = xalloc_floats((size_t)max_batch * classes);

    /* A layer's input gradient is needed only if some layer below has
     * parameters; flatten aliases its neighbour's buffers. */
    for (int i = 0; i < p.n; i++) {
        layer_t *l = &m->layers[i];
        long n = (long)max_batch * layer_out_size(l);
        if (l->kind == LAYER_FLATTEN) {
            l->out = NULL;  /* set to the input at forward time */
            l->dout = i > 0 ? m->layers[i - 1].dout : NULL;
            continue;
        }
        l->out = xalloc_floats((size_t)n);
        l->dout = (i == p.n - 1) ? m->dlogits : xalloc_floats((size_t)n);
        if (l->kind == LAYER_MAXPOOL) l->argmax = xcalloc((size_t)n, sizeof(int32_t));
    }
    return m;
}

void model_free(model_t *m)
{
    if (!m) return;
    for (int i = 0; i < m->nlayers; i++) {
        layer_t *l = &m->layers[i];
        if (l->kind == LAYER_FLATTEN) continue;
        free(l->out);
        if (i != m->nlayers - 1) free(l->dout);
        free(l->argmax);
    }
    free(m->layers); free(m->col_off);
    free(m->params); free(m->grads); free(m->col); free(m->tmp);
    free(m->probs); free(m->dlogits);
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
        long fan_out = (long)(l->b_len ? l->b_len : 1);
        long fan_in = (long)(l->w_len / (size_t)fan_out);
        if (l->kind == LAYER_CONV) fan_out *= (long)l->k * l->k;
        int relu_next = i + 1 < m->nlayers && m->layers[i + 1].kind == LAYER_RELU;
        float *w = m->params + l->w_off;
        if (relu_next) {
            float sd = sqrtf(2.0f / (float)fan_in);
            for (size_t j = 0; j < l->w_len; j++) w[j] = sd * rng_normal(&r);
        } else {
            float a = sqrtf(6.0f / (float)(fan_in + fan_out));
            for (size_t j = 0; j < l->w_len; j++) w[j] = a * (float)(2.0 * rng_uniform(&r) - 1.0);
        }
    }
}

const float *model_forward(model_t *m, const float *x, int B)
{
    if (B > m->max_batch) die("model_forward: batch %d exceeds the model's max batch %d", B, m->max_batch);
    m->input = x;
    const float *inp = x;
    for (int i = 0; i < m->nlayers; i++) {
        layer_t *l = &m->layers[i];
        const float *W = m->params + l->w_off, *bias = m->params + l->b_off;
        long n = (long)B * layer_out_size(l);
        switch (l->kind) {
        case LAYER_DENSE:
            dense_forward(l->out, inp, W, bias, B, l->in_c * l->in_h * l->in_w, l->out_c);
            break;
        case LAYER_CONV: {
            conv_geom_t g = layer_geom(l, B);
            conv2d_forward(l->out, m->col + m->col_off[i], m->tmp, inp, W, bias, &g);
            break;
        }
        case LAYER_MAXPOOL: {
            conv_geom_t g = layer_geom(l, B);
            maxpool_forward(l->out, l->argmax, inp, &g);
            break;
        }
        case LAYER_RELU: relu_forward(l->out, inp, n); break;
        case LAYER_TANH: tanh_forward(l->out, inp, n); break;
        case LAYER_FLATTEN: l->out = (float *)inp; break;
        }
        inp = l->out;
    }
    return inp;
}

float model_loss(model_t *m, const int32_t *labels, int B)
{
    const float *logits = m->layers[m->nlayers - 1].out;
    return softmax_xent_forward(m->probs, logits, labels, B, m->classes);
}

void model_backward(model_t *m, const int32_t *labels, int B)
{
    softmax_xent_backward(m->dlogits, m->probs, labels, B, m->classes);
    int first_param = m->nlayers;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].w_len) { first_param = i; break; }
    for (int i = m->nlayers - 1; i >= 0; i--) {
        layer_t *l = &m->layers[i];
        const float *inp = i > 0 ? m->layers[i - 1].out : m->input;
        float *dinp = (i > first_param) ? m->layers[i - 1].dout : NULL;
        long n = (long)B * layer_out_size(l);
        switch (l->kind) {
        case LAYER_DENSE:
            dense_backward(dinp, m->grads + l->w_off, m->grads + l->b_off, l->dout, inp,
                           m->params + l->w_off, B, l->in_c * l->in_h * l->in_w, l->out_c);
            break;
        case LAYER_CONV: {
            conv_geom_t g = layer_geom(l, B);
            conv2d_backward(dinp, m->grads + l->w_off, m->grads + l->b_off, m->col + m->col_off[i],
                            m->tmp, l->dout, m->params + l->w_off, &g);
            break;
        }
        case LAYER_MAXPOOL:
            if (dinp) { conv_geom_t g = layer_geom(l, B); maxpool_backward(dinp, l->dout, l->argmax, &g); }
            break;
        case LAYER_RELU: if (dinp) relu_backward(dinp, l->dout, l->out, n); break;
        case LAYER_TANH: if (dinp) tanh_backward(dinp, l->dout, l->out, n); break;
        case LAYER_FLATTEN: break;  /* dout aliases the layer below */
        }
        if (l->w_len && m->grad_ready) m->grad_ready(m->grad_ctx, l->w_off, l->w_len + l->b_len);
    }
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
        if (l->kind == LAYER_DENSE) macs += (double)l->w_len;
        else if (l->kind == LAYER_CONV) macs += (double)l->w_len * l->out_h * l->out_w;
    }
    return macs;
}
