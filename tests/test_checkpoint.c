/* Checkpoint round trip, verification on load, and refusal of checkpoints
 * that do not fit. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdint.h>
#include <zlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/model.h"
#include "optim/optim.h"
#include "test.h"
#include "run/checkpoint.h"
#include "train/metrics.h"

static char dir[256], path[512];

static ckpt_meta_t meta_for(const model_t *m, const char *opt)
{
    ckpt_meta_t md = { .step = 123, .seed = 9, .c = m->in_c, .h = m->in_h, .w = m->in_w, .classes = m->classes };
    snprintf(md.model, sizeof md.model, "%s", m->spec);
    snprintf(md.sync, sizeof md.sync, "none");
    snprintf(md.optimizer, sizeof md.optimizer, "%s", opt);
    return md;
}

static model_t *trained(const char *spec, optim_t **o, opt_kind_t kind)
{
    model_t *m = model_create(spec, 1, 12, 12, 3, 4);
    model_init_params(m, 1);
    optim_cfg_t oc = { .kind = kind, .momentum = 0.9f, .eps = 1e-8f };
    *o = optim_create(&oc, m->nparams);
    for (size_t i = 0; i < m->nparams; i++) m->grads[i] = (float)((int)(i % 7) - 3) * 0.01f;
    optim_step(*o, m->params, m->grads, 0, m->nparams, 0.1f);
    return m;
}

static long file_size(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static int dir_entries(void)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_round_trip(void)
{
    optim_t *o;
    model_t *m = trained("lenet", &o, OPT_SGD);
    ckpt_meta_t md = meta_for(m, "sgd");
    char err[512] = "";
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    CHECK(dir_entries() == 1, "save left %d files (temporary not removed?)", dir_entries());
    ckpt_t ck;
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    CHECK(ck.meta.step == 123 && !strcmp(ck.meta.model, "lenet") && ck.meta.h == 12, "metadata");
    optim_t *o2;
    model_t *m2 = trained("lenet", &o2, OPT_SGD);
    model_init_params(m2, 2);
    optim_reset(o2);
    CHECK(ckpt_restore(&ck, m2, o2, err, sizeof err) == 0, "restore: %s", err);
    CHECK(!memcmp(m->params, m2->params, sizeof(float) * m->nparams), "parameters differ after round trip");
    CHECK(!memcmp(o->velocity, o2->velocity, sizeof(float) * m->nparams), "momentum differs after round trip");
    /* a model of another architecture is refused with both names */
    optim_t *o3;
    model_t *m3 = trained("mlp:8", &o3, OPT_SGD);
    CHECK(ckpt_restore(&ck, m3, NULL, err, sizeof err) != 0 && strstr(err, "lenet") && strstr(err, "mlp:8"), "other model: %s", err);
    /* another optimizer is refused */
    optim_t *o4;
    model_t *m4 = trained("lenet", &o4, OPT_ADAGRAD);
    CHECK(ckpt_restore(&ck, m4, o4, err, sizeof err) != 0 && strstr(err, "optimizer"), "other optimizer: %s", err);
    ckpt_free(&ck);
    model_free(m); model_free(m2); model_free(m3); model_free(m4);
    optim_free(o); optim_free(o2); optim_free(o3); optim_free(o4);
}

static void expect_load_error(const char *what, const char *needle)
{
    ckpt_t ck;
    char err[512] = "";
    int rc = ckpt_load(path, &ck, err, sizeof err);
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(strstr(err, needle) != NULL, "%s: '%s' lacks '%s'", what, err, needle);
    if (rc == 0) ckpt_free(&ck);
}

static void test_corrupt(void)
{
    optim_t *o;
    model_t *m = trained("mlp:16", &o, OPT_ADAGRAD);
    ckpt_meta_t md = meta_for(m, "adagrad");
    char err[512];
    ckpt_save(path, m, o, &md, err, sizeof err);
    long n = file_size(path);
    /* flip one byte of data */
    FILE *f = fopen(path, "r+b");
    fseek(f, n - 100, SEEK_SET);
    int c = fgetc(f);
    fseek(f, n - 100, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
    expect_load_error("flipped data byte", "CRC32");
    ckpt_save(path, m, o, &md, err, sizeof err);
    CHECK(truncate(path, n - 4) == 0, "truncate");
    expect_load_error("truncated data", "corrupt");
    CHECK(truncate(path, 100) == 0, "truncate");
    expect_load_error("truncated header", "truncated");
    f = fopen(path, "wb"); fputs("hello", f); fclose(f);
    expect_load_error("5-byte file", "truncated");
    /* a safetensors file without dsgd metadata */
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    f = fopen(path, "wb");
    unsigned char len[8] = { (unsigned char)strlen(hdr) };
    fwrite(len, 1, 8, f); fputs(hdr, f); fwrite("\0\0\0\0", 1, 4, f);
    fclose(f);
    expect_load_error("foreign safetensors", "not a dsgd checkpoint");
    /* writing into a missing directory fails cleanly */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/missing/ck.safetensors", dir);
    CHECK(ckpt_save(bad, m, o, &md, err, sizeof err) != 0 && strstr(err, "cannot write"), "save to missing dir: %s", err);
    unlink(path);
    CHECK(dir_entries() == 0, "failed saves left files behind");
    model_free(m);
    optim_free(o);
}

/* A version-1 dsgd checkpoint (CRC-32 of the data only, which both this
 * reader and the old one check) with the given tensor entries and step,
 * data_len bytes of data: crafted files test the header rules alone. */
static void craft_with(const char *tensors, const char *step, long nparams, const char *pad, size_t data_len,
                       const unsigned char *given)
{
    unsigned char *data = calloc(data_len + 1, 1);
    for (size_t i = 0; i < data_len; i++) data[i] = given ? given[i] : (unsigned char)(i * 7);
    char hdr[4096];
    int n = snprintf(hdr, sizeof hdr,
                     "{\"__metadata__\":{\"format\":\"dsgd\",\"version\":\"1\",\"model\":\"logreg\",\"input\":\"1,1,2\","
                     "\"classes\":\"2\",\"step\":\"%s\",\"sync\":\"none\",\"optimizer\":\"sgd\",\"seed\":\"1\","
                     "\"nparams\":\"%ld\",\"crc32\":\"%08lx\"},%s}%s",
                     step, nparams, (unsigned long)crc32(0L, data, (uInt)data_len), tensors, pad);
    FILE *f = fopen(path, "wb");
    unsigned char len[8] = { 0 };
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    fwrite(data, 1, data_len, f);
    fclose(f);
    free(data);
}

static void craft(const char *tensors, const char *step, long nparams, const char *pad, size_t data_len)
{
    craft_with(tensors, step, nparams, pad, data_len, NULL);
}

#define W "\"layer1.dense.weight\":{\"dtype\":\"F32\",\"shape\":"
#define B "\"layer1.dense.bias\":{\"dtype\":\"F32\",\"shape\":"

/* Defects 1 and 2: metadata out of range and headers that break the
 * safetensors rules are refused on load, before anything is used. */
static void test_header_rules(void)
{
    ckpt_t ck;
    char err[512] = "";
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 6, "", 24);
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "a valid crafted file is refused: %s", err);
    if (!err[0]) ckpt_free(&ck);
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "-1", 6, "", 24);
    expect_load_error("negative step", "step");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "99999999999999999999", 6, "", 24);
    expect_load_error("step beyond a long", "step");
    craft(W "[4294967296,4294967296],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 6, "", 24);
    expect_load_error("shape product overflows", "overflow");
    craft(W "[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}," B "[2],\"data_offsets\":[0,8]}", "5", 2, "", 8);
    expect_load_error("shape product wraps to 0", "overflow");
    craft(W "[1.5,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 5, "", 24);
    expect_load_error("fractional shape", "integer");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[12,20]}", "5", 6, "", 20);
    expect_load_error("overlapping data_offsets", "overlap");
    craft(W "[2,2],\"data_offsets\":[1,17]}," B "[2],\"data_offsets\":[17,25]}", "5", 6, "", 25);
    expect_load_error("unaligned data_offsets (a hole at 0)", "does not start");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[20,28]}", "5", 6, "", 28);
    expect_load_error("a hole between tensors", "does not start");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 6, "", 32);
    expect_load_error("data beyond the last tensor", "cover");
    craft(W "[2,2],\"data_offsets\":[8,0]}," B "[2],\"data_offsets\":[16,24]}", "5", 6, "", 24);
    expect_load_error("begin > end", "data_offsets");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 6, "xyz", 24);
    expect_load_error("bytes after the JSON", "after its JSON");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5\xff\xfe", 6, "", 24);
    expect_load_error("header is not UTF-8", "UTF-8");
    craft(W "[2,2],\"data_offsets\":[0,16]}," W "[2],\"data_offsets\":[16,24]}", "5", 6, "", 24);
    expect_load_error("a tensor named twice", "twice");
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 7, "", 24);
    expect_load_error("nparams disagrees with the tensors", "nparams");
}

/* Defect 2: the CRC covers the header, and a transposed weight is not
 * taken for the right one. */
static void test_header_damage_and_shapes(void)
{
    optim_t *o;
    model_t *m = trained("mlp:16", &o, OPT_SGD);
    ckpt_meta_t md = meta_for(m, "sgd");
    char err[512];
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    /* "seed":"9" -> "seed":"8": a header change the data CRC cannot see */
    FILE *f = fopen(path, "r+b");
    char buf[4096] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    char *hit = memmem(buf, got, "\"seed\":\"9\"", 10);
    CHECK(hit != NULL, "seed not found in header");
    if (hit) { fseek(f, (long)(hit - buf) + 8, SEEK_SET); fputc('8', f); }
    fclose(f);
    expect_load_error("a damaged header byte", "CRC32");
    /* a transposed weight, of the right size, is another model */
    craft(W "[2,1],\"data_offsets\":[0,8]}," B "[2],\"data_offsets\":[8,16]}", "5", 4, "", 16);
    ckpt_t ck;
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    model_t *lr = model_create("logreg", 1, 2, 1, 2, 1);   /* weight [2, 2]: but shape [2,1] above is [OUT=2, IN=1] */
    model_t *lr1 = model_create("logreg", 1, 1, 1, 2, 1);  /* weight [2, 1] */
    ck.meta.h = 2; ck.meta.w = 1;
    /* the same spec on both sides: the tensor and both shapes are named,
     * not "model 'logreg' does not match model 'logreg'" */
    CHECK(ckpt_restore(&ck, lr, NULL, err, sizeof err) != 0 && strstr(err, "'layer1.dense.weight' is [2,1]") &&
          strstr(err, "needs [2,2]") && !strstr(err, "does not match") && !strstr(err, "--model"),
          "a [2,1] weight restored into a [2,2] layer: %s", err);
    ck.meta.h = 1;
    CHECK(ckpt_restore(&ck, lr1, NULL, err, sizeof err) == 0, "restore of the right shape: %s", err);
    ckpt_free(&ck);
    craft(W "[1,2],\"data_offsets\":[0,8]}," B "[2],\"data_offsets\":[8,16]}", "5", 4, "", 16);
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    ck.meta.h = 1; ck.meta.w = 1;
    CHECK(ckpt_restore(&ck, lr1, NULL, err, sizeof err) != 0 && strstr(err, "[1,2]") && strstr(err, "[2,1]"),
          "a transposed [1,2] weight restored into a [2,1] layer: %s", err);
    ckpt_free(&ck);
    /* a layer tensor the model does not have */
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]},"
          "\"layer0.bn.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}", "5", 6, "", 32);
    model_t *lr2 = model_create("logreg", 1, 1, 2, 2, 1);   /* the crafted files' model */
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    CHECK(ckpt_restore(&ck, lr2, NULL, err, sizeof err) != 0 && strstr(err, "'layer0.bn.running_mean'") && strstr(err, "does not have"),
          "a tensor the model lacks: %s", err);
    ckpt_free(&ck);
    /* optimizer state of another shape than [nparams] */
    craft(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]},"
          "\"optim.velocity\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[24,48]}", "5", 6, "", 48);
    optim_cfg_t oc = { .kind = OPT_SGD, .momentum = 0.9f };
    optim_t *mo = optim_create(&oc, lr2->nparams);
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    CHECK(ckpt_restore(&ck, lr2, mo, err, sizeof err) != 0 && strstr(err, "'optim.velocity' is [3,2]") && strstr(err, "needs [6]"),
          "a [3,2] momentum buffer for 6 parameters: %s", err);
    ckpt_free(&ck);
    model_free(lr2);
    optim_free(mo);
    model_free(lr); model_free(lr1); model_free(m);
    optim_free(o);
}

/* F64 tensors: a paradigm's sync.* state in double precision round-trips
 * bit for bit; F64 is refused anywhere else, and read as F32 or with a
 * value that is not finite. */
static void test_f64_sync_tensors(void)
{
    optim_t *o;
    model_t *m = trained("mlp:8", &o, OPT_SGD);
    ckpt_meta_t md = meta_for(m, "sgd");
    const double v[6] = { 0.1, -1e-300, 3.0, 1.0 / 3.0, 2e300, 0 };
    const float f[4] = { 1, 2, 3, 4 };
    ckpt_tensor_t t[2] = { { .name = "sync.test64", .rows = 2, .cols = 3, .data64 = v },
                           { .name = "sync.test32", .rows = 2, .cols = 2, .data = f } };
    md.extra = t;
    md.nextra = 2;
    char err[512] = "";
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    ckpt_t ck;
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    double back[3];
    float fb[3];
    CHECK(ckpt_rows(&ck, "sync.test64") == 2 && ckpt_read_row64(&ck, "sync.test64", 1, back, 3) == 0 &&
          !memcmp(back, v + 3, sizeof back), "F64 row 1 did not come back bit for bit");
    CHECK(ckpt_read_row(&ck, "sync.test64", 0, fb, 3) != 0, "an F64 tensor was read as F32");
    CHECK(ckpt_read_row64(&ck, "sync.test32", 0, back, 2) != 0, "an F32 tensor was read as F64");
    CHECK(ckpt_read_row64(&ck, "sync.test64", 2, back, 3) != 0, "a row past the end was read");
    ckpt_free(&ck);
    /* a non-finite value is not written (test_nonfinite: nor read) */
    const double nan[3] = { 0, NAN, 0 };
    t[0] = (ckpt_tensor_t){ .name = "sync.test64", .rows = 1, .cols = 3, .data64 = nan };
    md.nextra = 1;
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) != 0 && strstr(err, "sync.test64"), "a NaN F64 tensor was written: %s", err);
    model_free(m);
    optim_free(o);
    /* F64 in a layer tensor is refused on load */
    craft("\"layer1.dense.weight\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[0,32]}," B "[2],\"data_offsets\":[32,40]}",
          "5", 6, "", 40);
    expect_load_error("an F64 layer tensor", "F64 only in sync.*");
}

/* Defect 4: a write error (here the file-size limit, as a full disk would
 * do) fails the save or the metrics file, and leaves no file behind. */
static void test_write_errors(void)
{
    optim_t *o;
    model_t *m = trained("lenet", &o, OPT_SGD);
    ckpt_meta_t md = meta_for(m, "sgd");
    char err[512] = "", mpath[600];
    struct rlimit old, lim;
    unlink(path);
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) != 0 && strstr(err, "cannot write"), "save past the limit: %s", err);
    snprintf(mpath, sizeof mpath, "%s/m.jsonl", dir);
    metrics_t mx;
    CHECK(metrics_open(&mx, mpath, 0, err, sizeof err) == 0, "metrics_open: %s", err);
    for (int i = 0; i < 1000; i++) { metrics_begin(&mx, "eval", i); metrics_long(&mx, "step", i); metrics_end(&mx); }
    CHECK(metrics_close(&mx, 1) != 0, "metrics past the limit closed without an error");
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(dir_entries() == 0, "failed writes left %d files", dir_entries());
    model_free(m);
    optim_free(o);
}

/* A lead frozen past --timeout is replaced; the new lead takes over the
 * metrics file and finishes it; the old one, woken, writes the evaluation
 * it had begun before it learns it was evicted, then abandons its file.
 * The finished file holds the old lead's lines up to the takeover, the new
 * lead's after it, and its done event, whole (the old lead's late line once
 * overwrote the new lead's through the shared file). */
static void test_metrics_takeover(void)
{
    char err[512] = "", mpath[600];
    snprintf(mpath, sizeof mpath, "%s/t.jsonl", dir);
    const int files = dir_entries();
    metrics_t old, lead;
    CHECK(metrics_open(&old, mpath, 0, err, sizeof err) == 0, "metrics_open: %s", err);
    metrics_begin(&old, "eval", 1); metrics_long(&old, "step", 1); metrics_end(&old);
    fputs("{\"event\":\"eval\",\"ti", old.f);   /* half a line: frozen while writing */
    fflush(old.f);
    CHECK(metrics_takeover(&lead, mpath, 0, err, sizeof err) == 0, "metrics_takeover: %s", err);
    metrics_begin(&lead, "takeover", 2); metrics_long(&lead, "step", 2); metrics_end(&lead);
    metrics_begin(&old, "eval", 3); metrics_long(&old, "step", 3); metrics_str(&old, "from", "the old lead"); metrics_end(&old);
    metrics_begin(&lead, "done", 4); metrics_str(&lead, "status", "ok"); metrics_end(&lead);
    CHECK(metrics_close(&lead, 1) == 0, "the new lead's close failed");
    metrics_begin(&old, "eval", 5); metrics_str(&old, "from", "the old lead, after the rename"); metrics_end(&old);
    metrics_abandon(&old);
    FILE *f = fopen(mpath, "r");
    CHECK(f != NULL, "no metrics file after the takeover");
    char got[4096] = "";
    size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    got[n] = 0;
    if (f) fclose(f);
    const char *want = "{\"event\":\"eval\",\"time\":1.000000,\"step\":1}\n"
                       "{\"event\":\"takeover\",\"time\":2.000000,\"step\":2}\n"
                       "{\"event\":\"done\",\"time\":4.000000,\"status\":\"ok\"}\n";
    CHECK(!strcmp(got, want), "the taken-over metrics file is\n%s\nnot\n%s", got, want);
    unlink(mpath);
    CHECK(dir_entries() == files, "the takeover left %d files", dir_entries() - files);
}

/* A diverged run's state is never written, and a file holding NaN or
 * infinity (an older dsgd's, or made by hand) is refused on load. */
static void test_nonfinite(void)
{
    optim_t *o;
    model_t *m = trained("mlp:8", &o, OPT_SGD);
    ckpt_meta_t md = meta_for(m, "sgd");
    char err[512] = "";
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    const long good = file_size(path);
    FILE *f = fopen(path, "rb");
    unsigned char *before = malloc((size_t)good);
    CHECK(fread(before, 1, (size_t)good, f) == (size_t)good, "read back");
    fclose(f);
    const float bad[2] = { NAN, INFINITY };
    for (int k = 0; k < 2; k++) {
        float keep = m->params[3];
        m->params[3] = bad[k];
        err[0] = 0;
        CHECK(ckpt_save(path, m, o, &md, err, sizeof err) != 0 && strstr(err, "diverged") && strstr(err, "parameters"),
              "a %s parameter was written: %s", k ? "infinite" : "NaN", err);
        m->params[3] = keep;
    }
    o->velocity[5] = NAN;
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) != 0 && strstr(err, "momentum"), "NaN momentum written: %s", err);
    o->velocity[5] = 0;
    f = fopen(path, "rb");
    unsigned char *after = malloc((size_t)good);
    CHECK(file_size(path) == good && fread(after, 1, (size_t)good, f) == (size_t)good && !memcmp(before, after, (size_t)good),
          "the previous checkpoint changed");
    fclose(f);
    CHECK(dir_entries() == 1, "a refused save left %d files", dir_entries());
    /* batch-norm statistics too */
    optim_t *ro;
    model_t *rn = trained("resnet:8,2", &ro, OPT_SGD);
    ckpt_meta_t rmd = meta_for(rn, "sgd");
    rn->state[1] = INFINITY;
    CHECK(ckpt_save(path, rn, ro, &rmd, err, sizeof err) != 0 && strstr(err, "batch-normalization"), "inf statistics: %s", err);
    /* on load: a crafted version-1 file whose bias holds a NaN */
    unsigned char data[24] = { 0 };
    const float v[6] = { 0.5f, -1, 2, 0.25f, 1, NAN };
    memcpy(data, v, sizeof v);
    craft_with(W "[2,2],\"data_offsets\":[0,16]}," B "[2],\"data_offsets\":[16,24]}", "5", 6, "", 24, data);
    expect_load_error("a NaN bias", "NaN or infinite values in 'layer1.dense.bias'");
    free(before); free(after);
    model_free(m); optim_free(o); model_free(rn); optim_free(ro);
}

/* Values no run reaches are refused, naming the tensor, the index and the
 * value: a negative running variance (its square root is a NaN that the
 * ReLU after it hides, so evaluation printed an ordinary accuracy and a
 * resumed run saved the value again), a negative Adagrad sum of squares,
 * and a negative variance in a worker's copy of the statistics. */
static void test_negative_state(void)
{
    optim_t *o;
    model_t *m = trained("resnet:8,2", &o, OPT_ADAGRAD);
    ckpt_meta_t md = meta_for(m, "adagrad");
    char err[512] = "", name[96];
    int bn = 0;
    while (!m->layers[bn].s_len) bn++;
    const int C = m->layers[bn].out_c;
    float *var = m->state + m->layers[bn].s_off + C;   /* running_mean, then running_var */
    var[1] = -1;
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    snprintf(name, sizeof name, "-1 at index 1 of 'layer%d.bn.running_var'", bn);
    expect_load_error("a negative running variance", name);
    var[1] = 0;   /* a variance of 0 is one a run reaches */
    o->accum[4] = -0.5f;
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    expect_load_error("a negative Adagrad sum", "-0.5 at index 4 of 'optim.accum'");
    o->accum[4] = 0;
    float *rows = malloc(sizeof(float) * 2 * m->nstate);
    memcpy(rows, m->state, sizeof(float) * m->nstate);
    memcpy(rows + m->nstate, m->state, sizeof(float) * m->nstate);
    rows[m->nstate + (size_t)(var - m->state)] = -2;   /* worker 1, channel 0 */
    ckpt_tensor_t t = { .name = "sync.worker_state", .rows = 2, .cols = (long)m->nstate, .data = rows };
    md.extra = &t;
    md.nextra = 1;
    CHECK(ckpt_save(path, m, o, &md, err, sizeof err) == 0, "save: %s", err);
    ckpt_t ck;
    CHECK(ckpt_load(path, &ck, err, sizeof err) == 0, "load: %s", err);
    snprintf(name, sizeof name, "worker 1's running variance of layer %d, channel 0", bn);
    CHECK(ckpt_restore(&ck, m, o, err, sizeof err) != 0 && strstr(err, "'sync.worker_state'") && strstr(err, name) &&
          strstr(err, "-2"), "a negative variance in a worker's statistics: %s", err);
    ckpt_free(&ck);
    free(rows);
    model_free(m);
    optim_free(o);
}

/* A paradigm's sync_state: its keys in any order, each once, nothing else,
 * plain integers within each key's range; the writer's text is what the paradigms wrote before the
 * helper existed (old checkpoints keep loading). */
static void test_sync_state_text(void)
{
    static const ckpt_key_t keys[] = { { "steps", -5, 1000 }, { "syncs", 0, 1000 }, { "workers", 1, 64 }, { "window", 1, 1000 } };
    char out[256];
    long v[4];
    CHECK(ckpt_state_write(out, sizeof out, 4, keys, (long[]){ 300, 12, 4, 25 }) == 0, "write");
    CHECK(!strcmp(out, "steps=300,syncs=12,workers=4,window=25"), "written as '%s'", out);
    CHECK(ckpt_state_read(out, 4, keys, v) == 0 && v[0] == 300 && v[1] == 12 && v[2] == 4 && v[3] == 25, "read back");
    CHECK(ckpt_state_read("window=25,workers=4,syncs=12,steps=300", 4, keys, v) == 0 && v[0] == 300 && v[3] == 25,
          "another order");
    CHECK(ckpt_state_read("steps=-1,syncs=0,workers=1,window=1", 4, keys, v) == 0 && v[0] == -1,
          "a negative value within its key's range is read");
    CHECK(ckpt_state_read("steps=-6,syncs=0,workers=1,window=1", 4, keys, v) != 0, "a value below its key's range is refused");
    CHECK(ckpt_state_read("steps=1,syncs=0,workers=65,window=1", 4, keys, v) != 0, "a value above its key's range is refused");
    CHECK(ckpt_state_read("steps=1000,syncs=1000,workers=64,window=1000", 4, keys, v) == 0, "the ends of the ranges are read");
    static const char *const bad[] = {
        "", ",", "steps=300,syncs=12,workers=4", "steps=300,syncs=12,workers=4,window=25,extra=1",
        "steps=300,syncs=12,workers=4,steps=25", "steps=300,syncs=12,workers=4,window=", "steps=300,syncs=12,workers=4,window",
        "steps=300,syncs=12,workers=4,window=2.5", "steps=300,syncs=12,workers=4,window= 25", "steps=300,,syncs=12,workers=4,window=25",
        "steps=300,syncs=12,workers=4,window=25,", ",steps=300,syncs=12,workers=4,window=25", "steps=300,syncs=12,workers=4,window=1e3",
        "steps=300,syncs=12,workers=4,window=99999999999999999999", "Steps=300,syncs=12,workers=4,window=25",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ckpt_state_read(bad[i], 4, keys, v) != 0, "'%s' accepted", bad[i]);
    char small[16];
    CHECK(ckpt_state_write(small, sizeof small, 4, keys, (long[]){ 300, 12, 4, 25 }) != 0, "a text too long for the field is refused");
}

int main(int argc, char **argv)
{
    TEST_BEGIN(argc, argv);
    snprintf(dir, sizeof dir, "/tmp/dsgd-test-ckpt-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    RUN(test_round_trip);
    RUN(test_corrupt);
    RUN(test_header_rules);
    RUN(test_write_errors);
    RUN(test_header_damage_and_shapes);
    RUN(test_f64_sync_tensors);
    RUN(test_nonfinite);
    RUN(test_negative_state);
    RUN(test_metrics_takeover);
    RUN(test_sync_state_text);
    unlink(path);
    rmdir(dir);
    return TEST_END("test_checkpoint");
}
