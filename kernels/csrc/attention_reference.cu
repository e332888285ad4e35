
extern "C" __global__ void __launch_bounds__(32) reference(
        const float* q, const bf16* kp, const bf16* vp, const int* table, int P, int start,
        int NQ, int KV, float scale, bf16* out) {
    const int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int G = NQ / KV, kvh = h / G, p = start + r;
    const float* qr = q + ((long long)r * NQ + h) * HD;
    unsigned qa[HD / 16][4], qb[HD / 16][4];               // q's high bf16, and the rest
#pragma unroll
    for (int dc = 0; dc < HD / 16; dc++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float x = qr[16 * dc + 8 * e + 2 * t], y = qr[16 * dc + 8 * e + 2 * t + 1];
            const unsigned hw = pack_bf16(x, y);
            qa[dc][2 * e] = g == 0 ? hw : 0u;
            qb[dc][2 * e] = g == 0 ? rest_bf16(x, y, hw) : 0u;
            qa[dc][2 * e + 1] = qb[dc][2 * e + 1] = 0u;
        }
    }
    auto at = [&](int key, int d) -> long long {
        return (((long long)table[key / P] * P + key % P) * KV + kvh) * HD + d;
    };
    auto kword = [&](int key, int d) -> unsigned {        // K[key][d, d + 1], 0 past p
        return key <= p ? *(const unsigned*)(kp + at(key, d)) : 0u;
    };
    auto vword = [&](int key, int d) -> unsigned {        // V[key][d], V[key + 1][d], 0 past p
        const unsigned lo = key <= p ? vp[at(key, d)] : 0u;
        const unsigned hi = key + 1 <= p ? vp[at(key + 1, d)] : 0u;
        return lo | (hi << 16);
    };
    const int p0 = g == 0 ? p : -1;
    float M = NEG_INF, L = 0.f, A[NC][4];
#pragma unroll
    for (int dt = 0; dt < NC; dt++) A[dt][0] = A[dt][1] = A[dt][2] = A[dt][3] = 0.f;
    for (int j = 0; j <= p / SPAN; j++) {
        const int k0 = j * SPAN;
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
            const int key = k0 + 8 * nt + g;               // B column g of tile nt
#pragma unroll
            for (int dc = 0; dc < HD / 16; dc++) {
                const unsigned b0 = kword(key, 16 * dc + 2 * t), b1 = kword(key, 16 * dc + 8 + 2 * t);
                mma(s[nt], qa[dc][0], qa[dc][1], qa[dc][2], qa[dc][3], b0, b1);
                mma(s[nt], qb[dc][0], qb[dc][1], qb[dc][2], qb[dc][3], b0, b1);
            }
        }
        unsigned Pw[8][2], Qw[8][2];
        float m0, m1, l0, l1;
        span_softmax(s, p0, -1, k0, t, scale, Pw, Qw, m0, m1, l0, l1);
        float acc[NC][4];
#pragma unroll
        for (int dt = 0; dt < NC; dt++) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < 4; kc++) {
            const int key = k0 + 16 * kc + 2 * t;          // B rows 2t, 2t + 1 (b0), + 8 (b1)
#pragma unroll
            for (int dt = 0; dt < NC; dt++) {
                const unsigned b0 = vword(key, 8 * dt + g), b1 = vword(key + 8, 8 * dt + g);
                mma(acc[dt], Pw[2 * kc][0], Pw[2 * kc][1], Pw[2 * kc + 1][0], Pw[2 * kc + 1][1], b0, b1);
                mma(acc[dt], Qw[2 * kc][0], Qw[2 * kc][1], Qw[2 * kc + 1][0], Qw[2 * kc + 1][1], b0, b1);
            }
        }
        if (g == 0) fold<NC>(M, L, A, 0, m0, l0, acc);
    }
    if (g == 0) finish<NC>(A, L, 0, t, false, out + ((long long)r * NQ + h) * HD);
}
