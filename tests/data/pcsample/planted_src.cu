// A source file for the recorded PC samples of raw.jsonl (tests/tools/test_pcsample.py).
// line 2
// line 3
// line 4
// line 5
// line 6
// line 7
// line 8
// line 9
// line 10
// line 11
// line 12
// line 13
// line 14
// line 15
// line 16
// line 17
// line 18
// line 19
    p = next[p];  // the planted chase
    x = fmaf(x, a, b);
// line 22
// line 23
// line 24
// line 25
// line 26
// line 27
// line 28
// line 29
// line 30
// line 31
// line 32
// line 33
// line 34
// line 35
// line 36
// line 37
// line 38
// line 39
        v = fmaf(v, 0.999f, 1.0f);
// line 41
// line 42
// line 43
// line 44
