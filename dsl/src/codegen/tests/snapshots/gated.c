
static void s0(unsigned long long n, const rl_real* RL_RESTRICT f0, const rl_real* RL_RESTRICT f1, rl_real* RL_RESTRICT c0) {
  for (unsigned long long i = 0; i < n; i++) {
    rl_real r0 = f0[i];
    rl_real r1 = f1[i];
    rl_real r2 = (rl_real)0.0;
    rl_real r3 = rl_bool(r1 > r2);
    rl_real r4 = r0 * r3;
    c0[i] = r4;
  }
}

static void s1(unsigned long long ng, const unsigned long long* RL_RESTRICT off, const rl_real* RL_RESTRICT c0, rl_real* RL_RESTRICT g0) {
  for (unsigned long long w = 0; w < ng; w++) {
    unsigned long long start = off[w], end = off[w + 1];
    double cnt = (double)(end - start);
    double acc = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) acc += (double)c0[j];
    acc = rl_lanes_sum(acc);
    if (RL_LANE == 0) g0[w] = (rl_real)(acc / cnt);
  }
}

static void s2(unsigned long long ng, const unsigned long long* RL_RESTRICT off, const rl_real* RL_RESTRICT c0, rl_real* RL_RESTRICT g1) {
  for (unsigned long long w = 0; w < ng; w++) {
    unsigned long long start = off[w], end = off[w + 1];
    double cnt = (double)(end - start);
    double acc = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) acc += (double)c0[j];
    double mean = rl_lanes_sum(acc) / cnt;
    double dev = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) { double d = (double)c0[j] - mean; dev += d * d; }
    dev = rl_lanes_sum(dev);
    if (RL_LANE == 0) g1[w] = (rl_real)rl_sqrt_d(dev / cnt);
  }
}

static void s3(unsigned long long n, const rl_real* RL_RESTRICT f1, const rl_real* RL_RESTRICT c0, const rl_real* RL_RESTRICT g0, const rl_real* RL_RESTRICT g1, const unsigned int* RL_RESTRICT gid, rl_real* RL_RESTRICT c1, rl_real* RL_RESTRICT c2) {
  for (unsigned long long i = 0; i < n; i++) {
    rl_real r0 = c0[i];
    rl_real r1 = g0[gid[i]];
    rl_real r2 = r0 - r1;
    rl_real r3 = g1[gid[i]];
    rl_real r4 = (rl_real)0.0001;
    rl_real r5 = r3 + r4;
    rl_real r6 = r2 / r5;
    rl_real r7 = f1[i];
    rl_real r8 = (rl_real)4.0;
    rl_real r9 = r7 / r8;
    rl_real r10 = (rl_real)1.0;
    rl_real r11 = rl_min(r9, r10);
    rl_real r12 = rl_sqrt(r11);
    rl_real r13 = r6 * r12;
    c1[i] = r6;
    c2[i] = r13;
  }
}

void rl_entry_0(const rl_ctx* x) { s0(x->n, x->f[0], x->f[1], x->c[0]); }
void rl_entry_1(const rl_ctx* x) { s1(x->ng, x->off, x->c[0], x->g[0]); }
void rl_entry_2(const rl_ctx* x) { s2(x->ng, x->off, x->c[0], x->g[1]); }
void rl_entry_3(const rl_ctx* x) { s3(x->n, x->f[1], x->c[0], x->g[0], x->g[1], x->gid, x->c[1], x->c[2]); }
