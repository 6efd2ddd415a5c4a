extern "C" __global__ void s0(unsigned long long n, const rl_real* RL_RESTRICT f0, const rl_real* RL_RESTRICT f1, const rl_real* RL_RESTRICT f2, const rl_real* RL_RESTRICT f3, rl_real* RL_RESTRICT c0, rl_real* RL_RESTRICT c3) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r0 = f2[i];
    rl_real r1 = f3[i];
    rl_real r2 = (rl_real)0.0;
    rl_real r3 = rl_bool(r1 > r2);
    rl_real r4 = r0 * r3;
    rl_real r5 = f0[i];
    rl_real r6 = rl_bool(r5 > r2);
    rl_real r7 = f1[i];
    rl_real r8 = rl_bool(r7 == r2);
    rl_real r9 = rl_bool(r6 != 0 && r8 != 0);
    c0[i] = r4;
    c3[i] = r9;
  }
}
extern "C" __global__ void s1(unsigned long long ng, const unsigned long long* RL_RESTRICT off, const rl_real* RL_RESTRICT c0, const rl_real* RL_RESTRICT c3, rl_real* RL_RESTRICT g0) {
  unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32u;
  if (w >= ng) return;  // a warp's lanes share w, so they leave together
  {
    unsigned long long start = off[w], end = off[w + 1];
    double cnt = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) { cnt += c3[j] != 0 ? 1.0 : 0.0; }
    cnt = rl_lanes_sum(cnt);
    double acc = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) { acc += c3[j] != 0 ? (double)c0[j] : 0.0; }
    acc = rl_lanes_sum(acc);
    if (RL_LANE == 0) g0[w] = (rl_real)acc;
  }
}
extern "C" __global__ void s2(unsigned long long ng, const unsigned long long* RL_RESTRICT off, const rl_real* RL_RESTRICT c3, rl_real* RL_RESTRICT g1) {
  unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32u;
  if (w >= ng) return;  // a warp's lanes share w, so they leave together
  {
    unsigned long long start = off[w], end = off[w + 1];
    double cnt = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) { cnt += c3[j] != 0 ? 1.0 : 0.0; }
    cnt = rl_lanes_sum(cnt);
    if (RL_LANE == 0) g1[w] = (rl_real)cnt;
  }
}
extern "C" __global__ void s3(unsigned long long n, const rl_real* RL_RESTRICT c0, const rl_real* RL_RESTRICT c3, const rl_real* RL_RESTRICT g0, const rl_real* RL_RESTRICT g1, const unsigned int* RL_RESTRICT gid, rl_real* RL_RESTRICT c1, rl_real* RL_RESTRICT c2) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r0 = c0[i];
    rl_real r1 = g0[gid[i]];
    rl_real r2 = c3[i];
    rl_real r3 = r2 * r0;
    rl_real r4 = r1 - r3;
    rl_real r5 = g1[gid[i]];
    rl_real r6 = r5 - r2;
    rl_real r7 = (rl_real)1.0;
    rl_real r8 = rl_max(r6, r7);
    rl_real r9 = r4 / r8;
    rl_real r10 = r0 - r9;
    c1[i] = r10;
    c2[i] = r10;
  }
}
