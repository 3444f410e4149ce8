"""The statistics of the tools: spread of repetitions, the Mann-Whitney U test, the MAD outlier test."""

import math
import statistics

EXACT_LIMIT = 50  # use the exact U distribution (when there are no ties) up to n1 + n2 samples
MAD_SCALE = 0.6745      # makes the MAD of normal data an estimate of its standard deviation
MAD_FLOOR = 0.01        # of the median: identical GPUs have MAD 0


def cv_of(bench, metric):
    """The coefficient of variation (stddev/mean) of a metric's repetitions (0 if unknown)."""
    xs = bench.samples.get(metric) or []
    if len(xs) >= 2:
        mean = statistics.fmean(xs)
        return statistics.stdev(xs) / abs(mean) if mean else 0.0
    cvs = bench.cvs.get(metric) or []
    return max(cvs) if cvs else 0.0


def exact_u_cdf(n1, n2):
    """Counts of each U value (0..n1*n2) over all arrangements of n1 vs n2 distinct samples."""
    # f[i][j][u]: arrangements of i and j items with statistic u (recurrence on the largest item).
    prev = [[1] for _ in range(n2 + 1)]  # i = 0: one arrangement, U = 0
    for i in range(1, n1 + 1):
        cur = [[1]]  # j = 0
        for j in range(1, n2 + 1):
            a, b = prev[j], cur[j - 1]  # largest from sample 1 (adds j to U), or from sample 2
            counts = [0] * (i * j + 1)
            for u, c in enumerate(a):
                counts[u + j] += c
            for u, c in enumerate(b):
                counts[u] += c
            cur.append(counts)
        prev = cur
    return prev[n2]


def mann_whitney_p(xs, ys):
    """Two-sided Mann-Whitney U test p-value (exact without ties for small n, else normal approx)."""
    n1, n2 = len(xs), len(ys)
    if n1 < 1 or n2 < 1:
        return None
    pooled = sorted((v, side) for side, vals in ((0, xs), (1, ys)) for v in vals)
    ranks, ties, i = [0.0] * len(pooled), [], 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    if not ties and n <= EXACT_LIMIT:
        counts = exact_u_cdf(n1, n2)
        total = sum(counts)
        u = int(round(min(u1, n1 * n2 - u1)))
        return min(1.0, 2 * sum(counts[: u + 1]) / total)
    mu = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - sum(t ** 3 - t for t in ties) / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = max(0.0, abs(u1 - mu) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def outliers(values, threshold):
    """{unit: modified z} of the units beyond the threshold; values: {unit: x}, three or more."""
    xs = list(values.values())
    med = statistics.median(xs)
    mad = max(statistics.median(abs(x - med) for x in xs), MAD_FLOOR * abs(med))
    if mad == 0:
        return {}
    z = {u: MAD_SCALE * (x - med) / mad for u, x in values.items()}
    return {u: v for u, v in z.items() if abs(v) > threshold}


def relative_spread(values):
    """The relative spread of positive values: exp(standard deviation of their logarithms) - 1, the
    multiplicative noise of times and rates (0 for fewer than two, or a value not positive)."""
    if len(values) < 2 or min(values) <= 0:
        return 0.0
    return math.expm1(statistics.stdev(math.log(v) for v in values))


def min_p(n1, n2):
    """The smallest two-sided p-value the exact U test can give for n1 vs n2 samples."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))
