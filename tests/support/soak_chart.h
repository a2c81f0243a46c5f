/* soak_chart.h - the soak's chart (`make soak`, docs/soak.svg): what each
 * process held minute by minute, as hand-written SVG line panels (resident
 * memory, open descriptors, Redis's used memory, p99 of the answers), the
 * end of the warm-up marked. A pure function of the samples: no I/O but
 * the file it writes. */
#ifndef SK_TEST_SOAK_CHART_H
#define SK_TEST_SOAK_CHART_H
#include <stddef.h>

#define SOAK_MAX_SERIES 24
#define SOAK_MAX_POINTS 240

/* One line: a process (or a serve node for p99), its value per minute
 * (a negative value: no sample that minute). */
struct soak_series {
    char name[32];
    double v[SOAK_MAX_POINTS];
};

/* One panel: a title, a unit, its lines. */
struct soak_panel {
    const char *title, *unit;
    const struct soak_series *s;
    size_t n;
};

/* Writes the panels (points minutes each, warm-up after warmup minutes)
 * as one SVG to path, with the caption under the title. 0, or -1 when the
 * file cannot be written. */
int soak_chart_write(const char *path, const char *caption, const struct soak_panel *p,
                     size_t npanels, size_t points, size_t warmup);

#endif
