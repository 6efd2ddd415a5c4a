extern "C" __global__ void s0_r3(unsigned long long n, const rl_real* RL_RESTRICT f1, rl_real* RL_RESTRICT t0) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r1 = f1[i];
    rl_real r2 = (rl_real)0.0;
    rl_real r3 = rl_bool(r1 > r2);
    t0[i] = r3;
  }
}
extern "C" __global__ void s0_r4(unsigned long long n, const rl_real* RL_RESTRICT f0, const rl_real* RL_RESTRICT t0, rl_real* RL_RESTRICT t1) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r0 = f0[i];
    rl_real r3 = t0[i];
    rl_real r4 = r0 * r3;
    t1[i] = r4;
  }
}
extern "C" __global__ void s0_store0(unsigned long long n, const rl_real* RL_RESTRICT t1, rl_real* RL_RESTRICT c0) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r4 = t1[i];
    c0[i] = r4;
  }
}
extern "C" __global__ void s1(unsigned long long ng, const unsigned long long* RL_RESTRICT off, const rl_real* RL_RESTRICT c0, rl_real* RL_RESTRICT g0) {
  unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32u;
  if (w >= ng) return;  // a warp's lanes share w, so they leave together
  {
    unsigned long long start = off[w], end = off[w + 1];
    double cnt = (double)(end - start);
    double acc = 0.0;
    for (unsigned long long j = start + RL_LANE; j < end; j += RL_LANES) acc += (double)c0[j];
    acc = rl_lanes_sum(acc);
    if (RL_LANE == 0) g0[w] = (rl_real)(acc / cnt);
  }
}
extern "C" __global__ void s2(unsigned long long ng, const unsigned long long* RL_RESTRICT off, const rl_real* RL_RESTRICT c0, rl_real* RL_RESTRICT g1) {
  unsigned long long w = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) / 32u;
  if (w >= ng) return;  // a warp's lanes share w, so they leave together
  {
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
extern "C" __global__ void s3_r2(unsigned long long n, const rl_real* RL_RESTRICT c0, const rl_real* RL_RESTRICT g0, const unsigned int* RL_RESTRICT gid, rl_real* RL_RESTRICT t2) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r0 = c0[i];
    rl_real r1 = g0[gid[i]];
    rl_real r2 = r0 - r1;
    t2[i] = r2;
  }
}
extern "C" __global__ void s3_r5(unsigned long long n, const rl_real* RL_RESTRICT g1, const unsigned int* RL_RESTRICT gid, rl_real* RL_RESTRICT t3) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r3 = g1[gid[i]];
    rl_real r4 = (rl_real)0.0001;
    rl_real r5 = r3 + r4;
    t3[i] = r5;
  }
}
extern "C" __global__ void s3_r6(unsigned long long n, const rl_real* RL_RESTRICT t2, const rl_real* RL_RESTRICT t3, rl_real* RL_RESTRICT t4) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r2 = t2[i];
    rl_real r5 = t3[i];
    rl_real r6 = r2 / r5;
    t4[i] = r6;
  }
}
extern "C" __global__ void s3_r9(unsigned long long n, const rl_real* RL_RESTRICT f1, rl_real* RL_RESTRICT t5) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r7 = f1[i];
    rl_real r8 = (rl_real)4.0;
    rl_real r9 = r7 / r8;
    t5[i] = r9;
  }
}
extern "C" __global__ void s3_r11(unsigned long long n, const rl_real* RL_RESTRICT t5, rl_real* RL_RESTRICT t6) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r9 = t5[i];
    rl_real r10 = (rl_real)1.0;
    rl_real r11 = rl_min(r9, r10);
    t6[i] = r11;
  }
}
extern "C" __global__ void s3_r12(unsigned long long n, const rl_real* RL_RESTRICT t6, rl_real* RL_RESTRICT t7) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r11 = t6[i];
    rl_real r12 = rl_sqrt(r11);
    t7[i] = r12;
  }
}
extern "C" __global__ void s3_r13(unsigned long long n, const rl_real* RL_RESTRICT t4, const rl_real* RL_RESTRICT t7, rl_real* RL_RESTRICT t8) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r6 = t4[i];
    rl_real r12 = t7[i];
    rl_real r13 = r6 * r12;
    t8[i] = r13;
  }
}
extern "C" __global__ void s3_store0(unsigned long long n, const rl_real* RL_RESTRICT t4, rl_real* RL_RESTRICT c1) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r6 = t4[i];
    c1[i] = r6;
  }
}
extern "C" __global__ void s3_store1(unsigned long long n, const rl_real* RL_RESTRICT t8, rl_real* RL_RESTRICT c2) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
    rl_real r13 = t8[i];
    c2[i] = r13;
  }
}
