// band3: a sync warp publishes each row's CTA pair and merges its G pairs; the compute warps
// reduce pieces in stream order and write a row as soon as its (M, Z) is ready (polled between
// and while waiting for pieces), so the slots keep flowing. W rows of stats in flight (N <= (W-2) np).
constexpr int kW = 8;
__device__ __forceinline__ bool mbar_test_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
__device__ __forceinline__ bool warp_try(uint64_t* bar, uint32_t parity, int lane) {
  bool ok = false;
  if (lane == 0) ok = mbar_test_wait(bar, parity);
  return __shfl_sync(0xffffffffu, ok, 0);
}
template <class Ti, class To, int PK>
__global__ void __launch_bounds__(512 + 64) band3_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols,
                                                         int64_t ld, float scale, float2* __restrict__ part,
                                                         unsigned* __restrict__ cnt, int N, int mode) {
  constexpr int VEC = int(16 / sizeof(Ti));
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots], pubbar[kW], statbar[kW];
  __shared__ float2 wred[kW][16];
  __shared__ float2 rowstat[kW];
  const int T = int(blockDim.x) - 64, t = int(threadIdx.x), lane = t & 31, warp = t >> 5, nw = T >> 5;
  const int Pq = T * PK;
  const int64_t G = gridDim.x, b = blockIdx.x, R = cols / VEC, Cp = (R + G - 1) / G;
  const int np = int((Cp + Pq - 1) / Pq);
  const int64_t c0 = b * Cp, c1 = c0 + Cp < R ? c0 + Cp : R;
  const int64_t K = rows * np;
  if (t == 0) {
    for (int st = 0; st < N; ++st) {
      mbar_init(&full[st], 1);
      mbar_init(&empty[st], uint32_t(nw));
    }
    for (int w = 0; w < kW; ++w) {
      mbar_init(&pubbar[w], uint32_t(nw));
      mbar_init(&statbar[w], 1);
    }
    fence_mbar_init();
  }
  __syncthreads();
  auto piece_packs = [&](int p) -> int {
    const int64_t n = c1 - (c0 + int64_t(p) * Pq);
    return n <= 0 ? 0 : n < Pq ? int(n) : Pq;
  };
  if (warp == nw) {  // loader
    if (lane == 0) {
      const uint64_t policy = evict_first_policy();
      for (int64_t k = 0; k < K; ++k) {
        const int st = int(k % N);
        if (k >= N) mbar_wait(&empty[st], uint32_t(k / N - 1) & 1u);
        const int64_t r = k / np;
        const int p = int(k - r * np);
        const uint32_t bytes = uint32_t(piece_packs(p)) * 16u;
        mbar_arrive_expect_tx(&full[st], bytes);
        unsigned char* const dst = smem_raw + int64_t(st) * Pq * 16;
        const char* const src = reinterpret_cast<const char*>(x + r * ld) + (c0 + int64_t(p) * Pq) * 16;
        for (uint32_t o = 0; o < bytes; o += kBulkChunk)
          bulk_load(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk, &full[st], policy);
      }
    }
    return;
  }
  if (warp == nw + 1) {  // sync warp
    for (int64_t r = 0; r < rows; ++r) {
      const int w = int(r % kW);
      const uint32_t par = uint32_t(r / kW) & 1u;
      mbar_wait(&pubbar[w], par);
      const float2 q = lane < nw ? wred[w][lane] : make_float2(-INFINITY, 0.0f);
      const float M = warp_max(q.x);
      const float Z = warp_sum(q.y * weight(q.x, M));
      if (lane == 0) {
        part[r * G + b] = make_float2(M, Z);
        red_release_add(cnt + r, 1u);
      }
      if (ld_acquire(cnt + r) < unsigned(G)) {
        const uint64_t t0 = global_ns();
        while (ld_acquire(cnt + r) < unsigned(G))
          if (global_ns() - t0 > 5000000000ull) __trap();
      }
      const float2 mz = merge_pairs(part + r * G, int(G), lane);
      if (lane == 0) {
        rowstat[w] = mz;
        mbar_arrive(&statbar[w]);
        if (atomicAdd(cnt + r, 1u) == unsigned(2 * G) - 1u) atomicExch(cnt + r, 0u);
      }
      __syncwarp();
    }
    return;
  }
  auto slot = [&](int64_t k) { return reinterpret_cast<const uint4*>(smem_raw + int64_t(k % N) * Pq * 16); };
  int64_t rw = 0, published = 0;
  auto write_row = [&](int64_t r) {
    const float2 mz = rowstat[r % kW];
    const float M = mz.x, inv = 1.0f / mz.y;
    To* const gyr = y + r * ld + c0 * VEC;
    for (int p = 0; p < np; ++p) {
      const int64_t k = r * np + p;
      const int n = piece_packs(p);
      const uint4* sp = slot(k);
#pragma unroll
      for (int q = 0; q < PK; ++q) {
        const int idx = q * T + t;
        if (idx < n) {
          const uint4 raw = sp[idx];
          const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw);
          float o[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) o[e] = exp_sub(scale * to_float(pk.v[e]), M) * inv;
          store_streaming<To, VEC>(gyr + (int64_t(p) * Pq + idx) * VEC, o);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[k % N]);
    }
  };
  // writes every published row whose stats are ready (non-blocking)
  auto write_ready = [&]() {
    while (rw < published && warp_try(&statbar[rw % kW], uint32_t(rw / kW) & 1u, lane)) {
      mbar_wait(&statbar[rw % kW], uint32_t(rw / kW) & 1u);
      write_row(rw);
      ++rw;
    }
  };
  float m = -INFINITY, s = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t r = k / np;
    const int p = int(k - r * np);
    if (!warp_try(&full[k % N], uint32_t(k / N) & 1u, lane)) {
      const uint64_t t0 = global_ns();
      while (!warp_try(&full[k % N], uint32_t(k / N) & 1u, lane)) {
        write_ready();
        if (global_ns() - t0 > 5000000000ull) __trap();
      }
    }
    mbar_wait(&full[k % N], uint32_t(k / N) & 1u);
    const int n = piece_packs(p);
    const uint4* sp = slot(k);
    float v[PK * VEC];
#pragma unroll
    for (int q = 0; q < PK; ++q) {
      const int idx = q * T + t;
      if (idx < n) {
        const uint4 raw = sp[idx];
        const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw);
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[q * VEC + e] = scale * to_float(pk.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[q * VEC + e] = -INFINITY;
      }
    }
    float pm = -INFINITY;
#pragma unroll
    for (int e = 0; e < PK * VEC; ++e) pm = fmaxf(pm, v[e]);
    const float mn = fmaxf(m, pm), ref = mn == -INFINITY ? 0.0f : mn;
    float add = 0.0f;
#pragma unroll
    for (int e = 0; e < PK * VEC; ++e) add += exp_sub(v[e], ref);
    s = s * weight(m, mn) + add;
    m = mn;
    if (p == np - 1) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) merge_ms(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
      if (lane == 0) {
        wred[r % kW][warp] = make_float2(m, s);
        mbar_arrive(&pubbar[r % kW]);
      }
      ++published;
      m = -INFINITY, s = 0.0f;
    }
    write_ready();
  }
  while (rw < rows) {
    mbar_wait(&statbar[rw % kW], uint32_t(rw / kW) & 1u);
    write_row(rw);
    ++rw;
  }
}
