/* soak_chart.c - the soak's line panels as SVG (soak_chart.h). */
#include "support/soak_chart.h"

#include <stdio.h>
#include <string.h>

#define W 1000
#define PANEL_H 190
#define TOP 70
#define LEFT 70
#define RIGHT 230 /* the legend */

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                     "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};

/* A round upper bound for the axis: 1, 2 or 5 times a power of ten. */
static double nice_max(double v)
{
    if (v <= 0) return 1;
    double p = 1;
    while (p * 10 <= v)
        p *= 10;
    while (p > v)
        p /= 10;
    if (v <= p) return p;
    if (v <= 2 * p) return 2 * p;
    if (v <= 5 * p) return 5 * p;
    return 10 * p;
}

static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

static void panel(FILE *f, const struct soak_panel *p, int y0, size_t points, size_t warmup)
{
    int pw = W - LEFT - RIGHT, ph = PANEL_H - 50;
    double max = 0;
    for (size_t i = 0; i < p->n; i++)
        for (size_t k = 0; k < points; k++)
            if (p->s[i].v[k] > max) max = p->s[i].v[k];
    max = nice_max(max);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h\">", LEFT, y0 - 8);
    esc(f, p->title);
    fprintf(f, " (%s)</text>\n", p->unit);
    for (int g = 0; g <= 4; g++) {
        double y = y0 + ph - (double)ph * g / 4;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"%s\"/>\n", LEFT, y,
                LEFT + pw, y, g ? "minor" : "grid");
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" class=\"tick lab\">%g</text>\n", LEFT - 6, y + 4,
                max * g / 4);
    }
    double dx = points > 1 ? (double)pw / (double)(points - 1) : 0;
    for (size_t k = 0; k<points; k += points> 30 ? 5 : 1)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%zu</text>\n", LEFT + dx * (double)k,
                y0 + ph + 14, k + 1);
    if (warmup && warmup < points) {
        double x = LEFT + dx * (double)(warmup - 1);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#999\" "
                "stroke-dasharray=\"4 3\"/>\n",
                x, y0, x, y0 + ph);
    }
    for (size_t i = 0; i < p->n; i++) {
        const char *col = colors[i % (sizeof colors / sizeof *colors)];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
        for (size_t k = 0; k < points; k++)
            if (p->s[i].v[k] >= 0)
                fprintf(f, "%.1f,%.1f ", LEFT + dx * (double)k,
                        y0 + ph - (double)ph * p->s[i].v[k] / max);
        fputs("\"/>\n", f);
        int ly = y0 + 4 + (int)i * 13;
        if (ly > y0 + ph + 10) continue; /* more lines than room: the first ones named */
        fprintf(f,
                "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>"
                "<text x=\"%d\" y=\"%d\" class=\"v\">",
                W - RIGHT + 16, ly - 4, W - RIGHT + 34, ly - 4, col, W - RIGHT + 40, ly);
        esc(f, p->s[i].name);
        fputs("</text>\n", f);
    }
}

int soak_chart_write(const char *path, const char *caption, const struct soak_panel *p,
                     size_t npanels, size_t points, size_t warmup)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int h = TOP + (int)npanels * PANEL_H + 20;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 "
            "%d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
            "<desc>seckill soak chart; made by make soak (tests/test_chaos.c)</desc>\n"
            "<style>text{font-size:12px;fill:#222}.t{font-size:16px;font-weight:bold}"
            ".h{font-size:13px;font-weight:bold}.tick{font-size:10px;fill:#555;text-anchor:middle}"
            ".lab{text-anchor:end}.v{font-size:11px}.grid{stroke:#bbb;stroke-width:1}"
            ".minor{stroke:#eee;stroke-width:1}.note{font-size:11px;fill:#555}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"12\" y=\"24\" class=\"t\">Soak: every process, minute by minute (x: "
            "minutes; dashed: end of the warm-up)</text>\n"
            "<text x=\"12\" y=\"44\" class=\"note\">",
            W, h, W, h);
    esc(f, caption);
    fputs("</text>\n", f);
    for (size_t i = 0; i < npanels; i++)
        panel(f, &p[i], TOP + 20 + (int)i * PANEL_H, points, warmup);
    fputs("</svg>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}
