/* nn/plan — model specs parsed into layers with shapes (no buffers): the
 * simple stacks, the locally connected stacks and the residual network. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "../util/util.h"
#include "plan.h"

#define MAX_LAYERS 64   /* hidden layers of an mlp, at most half of these */
#define PLAN_MODELS "logreg, mlp[:H1,H2,...][:tanh], lenet[:tanh], resnet[:D,W], lc[:C1,C2,...][:k=K][:s=S][:p=P][:pool=Q]"

enum { LC_MAX_LAYERS = 16 };

/* lc[:C1,C2,...][:k=K][:s=S][:p=P][:pool=Q]: per channel count, a locally
 * connected layer (K×K fields over all input channels, stride S, P zeros
 * of padding on every side), the activation, and Q×Q max pooling of
 * stride Q (Q = 1: none); then flatten and a dense classifier. Defaults:
 * lc:8,16:k=3:s=1:p=(K-1)/2:pool=2 — on 28×28 images 28×28×8 → 14×14×8
 * → 14×14×16 → 7×7×16 → K classes, 0.30 M parameters. */
static int plan_lc(plan_t *p, const char *spec, char **fields, int nf, layer_kind_t act, int classes,
                   char *err, size_t errlen)
{
    static const char USAGE[] = "want lc[:C1,C2,...][:k=K][:s=S][:p=P][:pool=Q], e.g. lc:8,16:k=3";
    long ch[LC_MAX_LAYERS] = { 8, 16 }, k = 3, s = 1, pad = 0, pool = 2;
    int n = 2, have_ch = 0, given[4] = { 0 };   /* k, s, p, pool seen */
    for (int i = 1; i < nf; i++) {
        char *f = fields[i], *eq = strchr(f, '=');
        if (!strcmp(f, "tanh") || !strcmp(f, "relu")) continue;
        if (!have_ch && isdigit((unsigned char)f[0]) && !eq) {
            have_ch = 1;
            n = 0;
            for (char *q = f, *tok; (tok = strsep(&q, ",")) != NULL;) {
                if (n == LC_MAX_LAYERS) { snprintf(err, errlen, "--model %s: at most %d locally connected layers", spec, LC_MAX_LAYERS); return -1; }
                if (parse_long(tok, &ch[n]) != 0 || ch[n] < 1 || ch[n] > 65536) {
                    snprintf(err, errlen, "--model %s: bad channel count '%s' (1 to 65536); %s", spec, tok, USAGE);
                    return -1;
                }
                n++;
            }
            continue;
        }
        static const char *const keys[4] = { "k", "s", "p", "pool" };
        long *const dsts[4] = { &k, &s, &pad, &pool };
        int key = 0;
        if (eq) *eq = 0;
        while (eq && key < 4 && strcmp(f, keys[key])) key++;
        if (!eq || key == 4) { snprintf(err, errlen, "--model %s: unknown field '%s'; %s", spec, f, USAGE); return -1; }
        /* a second value would silently win over the first */
        if (given[key]++) { snprintf(err, errlen, "--model %s: %s= is given twice; %s", spec, f, USAGE); return -1; }
        if (parse_long(eq + 1, dsts[key]) != 0) { snprintf(err, errlen, "--model %s: %s= wants an integer; %s", spec, f, USAGE); return -1; }
    }
    /* the default padding keeps the input's size at stride 1; a given one,
     * negative included, is judged below */
    if (!given[2]) pad = (k - 1) / 2;
    if (k < 1 || k > 64 || s < 1 || s > 64 || pad < 0 || pad >= k || pad > 64 || pool < 1 || pool > 16) {
        snprintf(err, errlen, "--model %s: want 1 <= k <= 64, 1 <= s <= 64, 0 <= p < k and 1 <= pool <= 16 (got k=%ld s=%ld p=%ld pool=%ld)",
                 spec, k, s, pad, pool);
        return -1;
    }
    double params = 0;
    for (int i = 0; i < n; i++) {
        conv_geom_t g = { .B = 1, .C = p->c, .H = p->h, .W = p->w, .OC = (int)ch[i], .KH = (int)k, .KW = (int)k,
                          .stride = (int)s, .pad = (int)pad };
        if (conv_geom_init(&g) != 0) {
            snprintf(err, errlen, "--model %s: layer %d's %ldx%ld field does not fit its %dx%d input; use fewer layers, a smaller k or pool=1",
                     spec, i + 1, k, k, p->h, p->w);
            return -1;
        }
        const double bank = (double)ch[i] * p->c * k * k;   /* one position's weights: a GEMM operand */
        params += ((double)g.OH * g.OW) * (bank + (double)ch[i]);
        if (params > 2e9 || bank > 1e8 || (double)ch[i] * g.OH * g.OW > 1e8) {
            snprintf(err, errlen, "--model %s: too large for these %dx%dx%d inputs (%.3g parameters by layer %d); lower the channels or raise s",
                     spec, p->in_c, p->in_h, p->in_w, params, i + 1);
            return -1;
        }
        if (plan_push(p, LAYER_LC, (int)ch[i], (int)k, (int)s, (int)pad, err, errlen) != 0 ||
            plan_push(p, act, 0, 0, 0, 0, err, errlen) != 0)
            return -1;
        if (pool == 1) continue;
        if (p->h < pool || p->w < pool) {
            snprintf(err, errlen, "--model %s: the %ldx%ld pooling after layer %d does not fit its %dx%d output; use fewer layers or pool=1",
                     spec, pool, pool, i + 1, p->h, p->w);
            return -1;
        }
        if (plan_push(p, LAYER_MAXPOOL, 0, (int)pool, (int)pool, 0, err, errlen) != 0) return -1;
    }
    if (plan_push(p, LAYER_FLATTEN, 0, 0, 0, 0, err, errlen) != 0 || plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen) != 0)
        return -1;
    return 0;
}

long layer_out_size(const layer_t *l) { return (long)l->out_c * l->out_h * l->out_w; }

conv_geom_t layer_geom(const layer_t *l, int B, int OC)
{
    conv_geom_t g = { .B = B, .C = l->in_c, .H = l->in_h, .W = l->in_w, .OC = OC,
                      .KH = l->k, .KW = l->k, .stride = l->stride, .pad = l->pad };
    conv_geom_init(&g);
    return g;
}

/* ---- spec parsing into a plan (layers with shapes, no buffers) ---- */

void plan_from(plan_t *p, int src)
{
    p->next_src = src;
    if (src < 0) { p->c = p->in_c; p->h = p->in_h; p->w = p->in_w; }
    else { p->c = p->l[src].out_c; p->h = p->l[src].out_h; p->w = p->l[src].out_w; }
}

int plan_push(plan_t *p, layer_kind_t kind, int out_c, int k, int stride, int pad,
              char *err, size_t errlen)
{
    if (p->n >= PLAN_MAX) { snprintf(err, errlen, "model has more than %d layers", PLAN_MAX); return -1; }
    layer_t *l = &p->l[p->n];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->src = p->next_src != PLAN_PREV ? p->next_src : p->n - 1;
    l->src2 = -1;
    p->next_src = PLAN_PREV;
    l->in_c = p->c; l->in_h = p->h; l->in_w = p->w;
    l->k = k; l->stride = stride; l->pad = pad;
    switch (kind) {
    case LAYER_DENSE:
        l->out_c = out_c; l->out_h = l->out_w = 1;
        l->w_len = (size_t)out_c * p->c * p->h * p->w;
        l->b_len = (size_t)out_c;
        break;
    case LAYER_CONV:
    case LAYER_LC:
    case LAYER_MAXPOOL: {
        conv_geom_t g = { .B = 1, .C = p->c, .H = p->h, .W = p->w, .OC = out_c,
                          .KH = k, .KW = k, .stride = stride, .pad = pad };
        if (conv_geom_init(&g) != 0) {
            snprintf(err, errlen, "%s %dx%d at layer %d does not fit its %dx%d input",
                     layer_kind_name(kind), k, k, p->n + 1, p->h, p->w);
            return -1;
        }
        l->out_c = kind == LAYER_MAXPOOL ? p->c : out_c;
        l->out_h = g.OH; l->out_w = g.OW;
        if (kind == LAYER_CONV) {
            l->w_len = (size_t)out_c * p->c * k * k;
            l->b_len = (size_t)out_c;
        } else if (kind == LAYER_LC) {   /* a filter bank and a bias per output position */
            l->w_len = (size_t)g.OH * g.OW * out_c * p->c * k * k;
            l->b_len = (size_t)out_c * g.OH * g.OW;
        }
        break;
    }
    case LAYER_FLATTEN:
        l->out_c = p->c * p->h * p->w; l->out_h = l->out_w = 1;
        break;
    case LAYER_BN:
        l->out_c = p->c; l->out_h = p->h; l->out_w = p->w;
        l->w_len = l->b_len = (size_t)p->c;
        l->s_len = 2 * (size_t)p->c;
        break;
    case LAYER_GAP:
        l->out_c = p->c; l->out_h = l->out_w = 1;
        break;
    default:
        l->out_c = p->c; l->out_h = p->h; l->out_w = p->w;
    }
    p->c = l->out_c; p->h = l->out_h; p->w = l->out_w;
    p->n++;
    return 0;
}

const char *layer_kind_name(layer_kind_t k)
{
    switch (k) {
    case LAYER_DENSE: return "dense";
    case LAYER_CONV: return "conv";
    case LAYER_MAXPOOL: return "maxpool";
    case LAYER_RELU: return "relu";
    case LAYER_TANH: return "tanh";
    case LAYER_FLATTEN: return "flatten";
    case LAYER_BN: return "bn";
    case LAYER_ADD: return "add";
    case LAYER_GAP: return "gap";
    case LAYER_LC: return "lc";
    }
    return "?";
}

/* resnet:D,W — He et al.'s residual network for small images (the CIFAR
 * family of "Deep Residual Learning for Image Recognition", 2016), with
 * D = 6n + 2:
 *   conv3x3(W) → bn → relu
 *   3 stages of n basic blocks, widths W, 2W, 4W; the first block of
 *   stages 2 and 3 has stride 2:
 *       x → conv3x3 → bn → relu → conv3x3 → bn ─┐
 *       x ─────────── (or conv1x1/2 → bn) ──────+→ relu
 *   global average pooling → dense(K)
 * Convolutions have no bias (the batch normalization after each has one).
 * resnet = resnet:20,16 (ResNet-20: 0.27 M parameters on 3×32×32 inputs).
 * Its passes are passes.c's. */
enum { RESNET_DEPTH = 20, RESNET_WIDTH = 16, RESNET_MAX_BLOCKS = 60 };

/* conv without bias, He-normal init (a batch normalization follows) */
static int push_conv(plan_t *p, int oc, int k, int stride, int pad, char *err, size_t errlen)
{
    if (plan_push(p, LAYER_CONV, oc, k, stride, pad, err, errlen) != 0) return -1;
    layer_t *l = &p->l[p->n - 1];
    l->b_len = 0;
    l->he = 1;
    return 0;
}

static int push_bn(plan_t *p, int relu, char *err, size_t errlen)
{
    if (plan_push(p, LAYER_BN, 0, 0, 0, 0, err, errlen) != 0) return -1;
    p->l[p->n - 1].relu = relu;
    return 0;
}

static int plan_resnet(plan_t *p, const char *spec, const char *dw, int nf, int classes, char *err, size_t errlen)
{
    long D = RESNET_DEPTH, W = RESNET_WIDTH;
    if (nf > 2) { snprintf(err, errlen, "--model %s: resnet takes one field, resnet:D,W (e.g. resnet:20,16)", spec); return -1; }
    if (dw) {
        char buf[64], *comma;
        snprintf(buf, sizeof buf, "%s", dw);
        comma = strchr(buf, ',');
        if (!comma) { snprintf(err, errlen, "--model %s: want resnet:D,W, depth and base width (e.g. resnet:20,16)", spec); return -1; }
        *comma = 0;
        if (parse_long(buf, &D) != 0 || parse_long(comma + 1, &W) != 0) {
            snprintf(err, errlen, "--model %s: depth and width must be integers (e.g. resnet:20,16)", spec);
            return -1;
        }
    }
    const long nb = (D - 2) / 6;
    if (D < 8 || (D - 2) % 6 != 0 || nb > RESNET_MAX_BLOCKS) {
        snprintf(err, errlen, "--model %s: depth %ld is not 6n+2 with 1 <= n <= %d (8, 14, 20, 32, 44, 56, 110, ...)", spec, D,
                 RESNET_MAX_BLOCKS);
        return -1;
    }
    if (W < 1 || W > 4096) { snprintf(err, errlen, "--model %s: base width %ld must be in [1, 4096]", spec, W); return -1; }
    if (p->in_h < 4 || p->in_w < 4) {
        snprintf(err, errlen, "--model %s: the data's %dx%d images are too small for resnet's two stride-2 stages (at least 4x4)",
                 spec, p->in_h, p->in_w);
        return -1;
    }
    /* parameters ≈ 9·(4W)²·2n + ...; keep every size far inside the int and
     * size_t ranges the kernels use */
    double params = 9.0 * (double)W * W * 2 * nb * (1 + 4 + 16) + 9.0 * W * p->in_c;
    double act = (double)W * p->in_h * p->in_w;
    if (params > 1e9 || act > 1e8 || (double)p->in_c * 9 * 4 * W > 1e8) {
        snprintf(err, errlen, "--model %s: too large for these %dx%dx%d inputs (%.3g parameters, %.3g floats of activation per sample); lower the width or depth",
                 spec, p->in_c, p->in_h, p->in_w, params, act);
        return -1;
    }
    p->graph = 1;
    plan_from(p, -1);
    if (push_conv(p, (int)W, 3, 1, 1, err, errlen) || push_bn(p, 1, err, errlen)) return -1;
    int x = p->n - 1;
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < nb; j++) {
            const int oc = (int)W << s, stride = s > 0 && j == 0 ? 2 : 1, in_c = p->l[x].out_c;
            plan_from(p, x);
            if (push_conv(p, oc, 3, stride, 1, err, errlen) || push_bn(p, 1, err, errlen) ||
                push_conv(p, oc, 3, 1, 1, err, errlen) || push_bn(p, 0, err, errlen))
                return -1;
            const int main_out = p->n - 1;
            int shortcut = x;
            if (stride != 1 || in_c != oc) {   /* projection: conv1x1 with the block's stride */
                plan_from(p, x);
                if (push_conv(p, oc, 1, stride, 0, err, errlen) || push_bn(p, 0, err, errlen)) return -1;
                shortcut = p->n - 1;
            }
            plan_from(p, main_out);
            if (plan_push(p, LAYER_ADD, 0, 0, 0, 0, err, errlen) != 0) return -1;
            layer_t *a = &p->l[p->n - 1];
            a->src2 = shortcut;
            a->relu = 1;
            x = p->n - 1;
        }
    if (plan_push(p, LAYER_GAP, 0, 0, 0, 0, err, errlen) || plan_push(p, LAYER_DENSE, classes, 0, 0, 0, err, errlen)) return -1;
    (void)classes;
    return 0;
}

int plan_build(plan_t *p, const char *spec, int c, int h, int w, int classes,
                      char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->c = c; p->h = h; p->w = w;
    p->in_c = c; p->in_h = h; p->in_w = w;
    p->next_src = PLAN_PREV;
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
        else if (!strcmp(fields[0], "resnet") || !strcmp(fields[0], "lc")) continue;   /* parsed by plan_resnet, plan_lc */
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
            snprintf(err, errlen, "unknown option '%s' in model spec '%s'; models: " PLAN_MODELS, fields[i], spec);
            return -1;
        }
    }
    const char *name = fields[0];
    int rc = 0;
    if (!strcmp(name, "resnet")) return plan_resnet(p, spec, nf > 1 ? fields[1] : NULL, nf, classes, err, errlen);
    if (!strcmp(name, "lc")) return plan_lc(p, spec, fields, nf, act, classes, err, errlen);
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
        snprintf(err, errlen, "unknown model '%s'; models: " PLAN_MODELS, name);
        return -1;
    }
    return rc ? -1 : 0;
}

