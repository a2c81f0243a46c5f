/* chart.c - the SVG chart of `seckill-bench strategies` (chart.h): axes,
 * bars and labels written as text, no drawing library. */
#include "bench/chart.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define CH_W 1000
#define CH_LABEL_W 250
#define CH_PANEL_W 330
#define CH_GAP 60
#define CH_ROW_H 30
#define CH_TOP 92

static double jnum(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *jstr(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

/* Writes s with XML's special characters escaped. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* 12345.6 -> "12,346". */
static void fmt_thousands(double v, char *out, size_t cap)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = 0;
}

/* Colours of the three reference lines, in the order of "references". */
static const char *const ch_ref_color[] = {"#2ca02c", "#9467bd", "#7f7f7f"};

struct ch_axis {
    double lo, hi; /* powers of ten */
    int x0, w;
};

static void axis_fit(struct ch_axis *a, double vmin, double vmax)
{
    if (vmin <= 0) vmin = 1;
    if (vmax < vmin) vmax = vmin;
    a->lo = pow(10, floor(log10(vmin)));
    a->hi = pow(10, ceil(log10(vmax)));
    if (a->hi <= a->lo) a->hi = a->lo * 10;
}

static double axis_x(const struct ch_axis *a, double v)
{
    if (v < a->lo) v = a->lo;
    return a->x0 + (double)a->w * (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
}

static void axis_draw(FILE *f, const struct ch_axis *a, int y0, int y1, const char *title,
                      int is_ms)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h\">", a->x0, CH_TOP - 14);
    xml_text(f, title);
    fprintf(f, "</text>\n");
    for (double v = a->lo; v <= a->hi * 1.0001; v *= 10) {
        double x = axis_x(a, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>\n", x, y0, x,
                y1);
        char lab[32];
        if (is_ms)
            snprintf(lab, sizeof lab, v < 1 ? "%.1f ms" : "%.0f ms", v);
        else if (v >= 1e6)
            snprintf(lab, sizeof lab, "%.0fM", v / 1e6);
        else if (v >= 1e3)
            snprintf(lab, sizeof lab, "%.0fk", v / 1e3);
        else
            snprintf(lab, sizeof lab, "%.0f", v);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%s</text>\n", x, y1 + 14, lab);
        for (int m = 2; m < 10 && v * m < a->hi; m++) {
            double xm = axis_x(a, v * m);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"minor\"/>\n", xm,
                    y0, xm, y1);
        }
    }
}

/* A value label readable over grid and reference lines: a white halo
 * first, the text on top (paint-order is not known to every renderer). */
static void ch_value(FILE *f, double x, int y, const char *txt)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"halo\">", x, y);
    xml_text(f, txt);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%d\" class=\"v\">", x, y);
    xml_text(f, txt);
    fprintf(f, "</text>\n");
}

/* The axes' ranges: the smallest and largest throughput (reference
 * lines included) and p99 of the strategies that have one. */
static void chart_ranges(const json_t *arr, const json_t *refs, double *rmin, double *rmax,
                         double *pmin, double *pmax)
{
    *rmin = *rmax = *pmin = *pmax = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *s = json_array_get(arr, i);
        double r = jnum(s, "rps"), p = jnum(json_object_get(s, "latency_ms"), "p99");
        if (r > 0) {
            *rmin = *rmin == 0 || r < *rmin ? r : *rmin;
            *rmax = r > *rmax ? r : *rmax;
        }
        if (p > 0) {
            *pmin = *pmin == 0 || p < *pmin ? p : *pmin;
            *pmax = p > *pmax ? p : *pmax;
        }
    }
    for (size_t i = 0; i < json_array_size(refs); i++) {
        double r = jnum(json_array_get(refs, i), "rps");
        if (r > *rmax) *rmax = r;
    }
}

/* The document's start: XML header, style, background, title and the
 * run's conditions (h: the height). */
static void chart_head(FILE *f, const json_t *cf, const json_t *m, int h)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
            /* Not an XML comment: those may not contain "--". */
            "<desc>seckill-bench strategies chart; regenerate with: seckill-bench strategies "
            "--chart-from RUN.json --chart FILE.svg</desc>\n"
            "<style>text{font-size:12px;fill:#222}.t{font-size:16px;font-weight:bold}"
            ".h{font-size:13px;font-weight:bold}.tick{font-size:10px;fill:#555;text-anchor:middle}"
            ".v{font-size:11px}.halo{font-size:11px;fill:white;stroke:white;stroke-width:4px}.lab{"
            "text-anchor:end}.grid{stroke:#bbb;stroke-width:1}"
            ".minor{stroke:#eee;stroke-width:1}.note{font-size:11px;fill:#555}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            CH_W, h, CH_W, h);
    fprintf(f, "<text x=\"12\" y=\"24\" class=\"t\">Stock-deduction strategies, one run "
               "(seckill-bench strategies)</text>\n");
    char cond[400];
    snprintf(cond, sizeof cond,
             "stock %lld, %lld requests from %lld users (limit 1), %lld client threads; "
             "%lld cpus, %s",
             (long long)jnum(cf, "stock"), (long long)jnum(cf, "requests"),
             (long long)jnum(cf, "users"), (long long)jnum(cf, "conns"), (long long)jnum(m, "cpus"),
             jstr(m, "cpu_model", "?"));
    fprintf(f, "<text x=\"12\" y=\"44\" class=\"note\">");
    xml_text(f, cond);
    fprintf(f, "</text>\n");
}

/* Row i: the strategy's label, then its throughput and p99 bars with
 * their values, or the reason it did not run. */
static void chart_row(FILE *f, const json_t *s, size_t i, const struct ch_axis *ax,
                      const struct ch_axis *ay)
{
    int y = CH_TOP + (int)i * CH_ROW_H;
    const char *id = jstr(s, "id", "");
    int ran = !strcmp(jstr(s, "status", ""), "ran");
    long long over = (long long)jnum(s, "oversold");
    const char *color = !strcmp(id, "naive")                     ? "#d62728"
                        : !strcmp(jstr(s, "store", ""), "redis") ? "#1f77b4"
                                                                 : "#ff7f0e";
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lab\">", CH_LABEL_W - 8, y + 19);
    xml_text(f, jstr(s, "label", id));
    fprintf(f, "</text>\n");
    if (!ran) {
        const char *why = jstr(s, "note", "not run");
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"note\">", CH_LABEL_W + 6, y + 19);
        xml_text(f, why);
        fprintf(f, "</text>\n");
        return;
    }
    double r = jnum(s, "rps"), p = jnum(json_object_get(s, "latency_ms"), "p99");
    double xr = axis_x(ax, r), xp = axis_x(ay, p);
    char num[32], txt[96];
    fmt_thousands(r, num, sizeof num);
    if (over > 0)
        snprintf(txt, sizeof txt, "%s/s, OVERSOLD %lld", num, over);
    else
        snprintf(txt, sizeof txt, "%s/s", num);
    char lat[32];
    snprintf(lat, sizeof lat, "%.*f ms", p < 10 ? 2 : 0, p);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", ax->x0,
            y + 6, xr - ax->x0, CH_ROW_H - 12, color);
    ch_value(f, xr + 4, y + 19, txt);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
            "fill-opacity=\"0.6\"/>\n",
            ay->x0, y + 6, xp - ay->x0, CH_ROW_H - 12, color);
    ch_value(f, xp + 4, y + 19, lat);
}

/* The legend of the reference lines below the panels (y1: their bottom),
 * then the colour key and the end of the document. */
static void chart_legend(FILE *f, const json_t *refs, int y1)
{
    int ly = y1 + 36;
    for (size_t i = 0; i < json_array_size(refs) && i < 3; i++) {
        const json_t *r = json_array_get(refs, i);
        double v = jnum(r, "rps");
        if (v <= 0) continue;
        char num[32];
        fmt_thousands(v, num, sizeof num);
        fprintf(f,
                "<line x1=\"12\" y1=\"%d\" x2=\"40\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\" "
                "stroke-dasharray=\"6,4\"/>\n<text x=\"46\" y=\"%d\" class=\"note\">",
                ly - 4, ly - 4, ch_ref_color[i], ly);
        xml_text(f, jstr(r, "label", ""));
        fprintf(f, ": %s/s</text>\n", num);
        ly += 18;
    }
    fprintf(f,
            "<text x=\"12\" y=\"%d\" class=\"note\">red: naive check-then-act (oversells); "
            "blue: Redis strategies; orange: database strategies. Latency per request, "
            "closed loop.</text>\n</svg>\n",
            ly + 4);
}

/* The whole document on f. */
static void chart_draw(FILE *f, const json_t *root)
{
    const json_t *arr = json_object_get(root, "strategies");
    const json_t *refs = json_object_get(root, "references");
    size_t n = json_array_size(arr);
    double rmin, rmax, pmin, pmax;
    chart_ranges(arr, refs, &rmin, &rmax, &pmin, &pmax);
    struct ch_axis ax = {.x0 = CH_LABEL_W, .w = CH_PANEL_W};
    struct ch_axis ay = {.x0 = CH_LABEL_W + CH_PANEL_W + CH_GAP, .w = CH_PANEL_W};
    axis_fit(&ax, rmin, rmax);
    axis_fit(&ay, pmin, pmax);
    int y1 = CH_TOP + (int)n * CH_ROW_H;
    chart_head(f, json_object_get(root, "config"), json_object_get(root, "machine"), y1 + 120);
    axis_draw(f, &ax, CH_TOP - 4, y1, "throughput, requests/s (log scale)", 0);
    axis_draw(f, &ay, CH_TOP - 4, y1, "p99 latency (log scale)", 1);
    /* Reference lines across the throughput panel, under the bars. */
    for (size_t i = 0; i < json_array_size(refs) && i < 3; i++) {
        double v = jnum(json_array_get(refs, i), "rps");
        if (v <= 0) continue;
        double x = axis_x(&ax, v);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
                "stroke-width=\"2\" stroke-dasharray=\"6,4\"/>\n",
                x, CH_TOP - 4, x, y1, ch_ref_color[i]);
    }
    for (size_t i = 0; i < n; i++)
        chart_row(f, json_array_get(arr, i), i, &ax, &ay);
    chart_legend(f, refs, y1);
}

int sk_chart_svg(const json_t *run, char **svg, size_t *len, char *err, size_t cap)
{
    *svg = NULL;
    *len = 0;
    if (!json_is_array(json_object_get(run, "strategies")) ||
        !json_is_object(json_object_get(run, "config"))) {
        snprintf(err, cap, "not a `seckill-bench strategies --json` output");
        return SK_EINVAL;
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) {
        snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    chart_draw(f, run);
    /* a stream that failed to grow reports it here */
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || !buf) {
        free(buf);
        snprintf(err, cap, "out of memory");
        return SK_ENOMEM;
    }
    *svg = buf;
    *len = n;
    return 0;
}

int sk_chart_write(const json_t *run, const char *path, char *err, size_t cap)
{
    char *svg;
    size_t len;
    int rc = sk_chart_svg(run, &svg, &len, err, cap);
    if (rc < 0) return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        free(svg);
        return SK_EIO;
    }
    int ok = fwrite(svg, 1, len, f) == len;
    int e = errno;
    if (fclose(f) != 0) {
        ok = 0;
        e = errno;
    }
    free(svg);
    if (!ok) {
        snprintf(err, cap, "%s: %s", path, strerror(e));
        return SK_EIO;
    }
    return 0;
}
