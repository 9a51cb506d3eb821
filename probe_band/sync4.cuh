// band2: as band, but row r+1 is reduced and published before row r waits for its (M, Z); the
// first H pieces of each row move into registers (raw packs) once reduced, so that rows r (less
// its H pieces) and r+1 fit the N slots: 2 np - H <= N.
template <class Ti, class To, int PK, int H, int MAXT = 576>
__global__ void __launch_bounds__(MAXT, 1) band4_kernel(const Ti* __restrict__ x, To* __restrict__ y, int64_t rows, int64_t cols,
                                                         int64_t ld, float scale, float2* __restrict__ part,
                                                         unsigned* __restrict__ cnt, int N, int mode) {
  constexpr int VEC = int(16 / sizeof(Ti));
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxSlots], empty[kMaxSlots];
  __shared__ float2 wred[32];
  __shared__ __align__(8) uint64_t pubbar[4], statbar[4];
  __shared__ float2 wred4[4][16];
  __shared__ float2 rowstat4[4];
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
    for (int w = 0; w < 4; ++w) {
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
  if (warp == nw) {
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
        if (mode == 3) {
          for (uint32_t o = 0; o < bytes; o += kBulkChunk)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_u32(dst + o)),
                         "l"(src + o), "r"(bytes - o < kBulkChunk ? bytes - o : kBulkChunk), "r"(smem_u32(&full[st])) : "memory");
        } else {
          for (uint32_t o = 0; o < bytes; o += kBulkChunk)
            bulk_load(dst + o, src + o, bytes - o < kBulkChunk ? bytes - o : kBulkChunk, &full[st], policy);
        }
      }
    }
    return;
  }
  if (warp == nw + 1) {  // sync warp: publish r, then complete r - 1
    auto complete = [&](int64_t r) {
      const int w = int(r % 4);
      if (mode != 1) {
        if (ld_acquire(cnt + r) < unsigned(G)) {
          const uint64_t t0 = global_ns();
          while (ld_acquire(cnt + r) < unsigned(G))
            if (global_ns() - t0 > 5000000000ull) __trap();
        }
        const float2 mz = merge_pairs(part + r * G, int(G), lane);
        if (lane == 0) rowstat4[w] = mz;
      }
      if (lane == 0) {
        mbar_arrive(&statbar[w]);
        if (mode != 1 && atomicAdd(cnt + r, 1u) == unsigned(2 * G) - 1u) atomicExch(cnt + r, 0u);
      }
      __syncwarp();
    };
    for (int64_t r = 0; r < rows; ++r) {
      const int w = int(r % 4);
      mbar_wait(&pubbar[w], uint32_t(r / 4) & 1u);
      const float2 q = lane < nw ? wred4[w][lane] : make_float2(-INFINITY, 0.0f);
      const float M = warp_max(q.x);
      const float Z = warp_sum(q.y * weight(q.x, M));
      if (lane == 0) {
        if (mode == 1) rowstat4[w] = make_float2(M, Z);
        else {
          part[r * G + b] = make_float2(M, Z);
          red_release_add(cnt + r, 1u);
        }
      }
      __syncwarp();
      if (r > 0) complete(r - 1);
    }
    if (rows > 0) complete(rows - 1);
    return;
  }
  auto slot = [&](int64_t k) { return reinterpret_cast<const uint4*>(smem_raw + int64_t(k % N) * Pq * 16); };
  auto reduce_publish = [&](int64_t r) {
    float m = -INFINITY, s = 0.0f;
    for (int p = 0; p < np; ++p) {
      const int64_t k = r * np + p;
      const int n = piece_packs(p);
      mbar_wait(&full[k % N], uint32_t(k / N) & 1u);
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
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) merge_ms(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) {
      wred4[r % 4][warp] = make_float2(m, s);
      mbar_arrive(&pubbar[r % 4]);
    }
  };
  uint4 held[H > 0 ? H * PK : 1];
  auto hold = [&](int64_t r) {  // row r's first H pieces into registers, their slots released
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < np) {
        const int64_t k = r * np + h;
        const int n = piece_packs(h);
        const uint4* sp = slot(k);
#pragma unroll
        for (int q = 0; q < PK; ++q) {
          const int idx = q * T + t;
          held[h * PK + q] = idx < n ? sp[idx] : make_uint4(0, 0, 0, 0);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[k % N]);
      }
  };
  auto write_pack = [&](To* gy, const uint4& raw, float M, float inv) {
    const Pack<Ti, VEC> pk = *reinterpret_cast<const Pack<Ti, VEC>*>(&raw);
    float o[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) o[e] = exp_sub(scale * to_float(pk.v[e]), M) * inv;
    store_streaming<To, VEC>(gy, o);
  };
  if (rows > 0) {
    reduce_publish(0);
    hold(0);
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (r + 1 < rows) reduce_publish(r + 1);
    mbar_wait(&statbar[r % 4], uint32_t(r / 4) & 1u);
    const float M = rowstat4[r % 4].x, inv = 1.0f / rowstat4[r % 4].y;
    To* const gyr = y + r * ld + c0 * VEC;
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < np) {
        const int n = piece_packs(h);
#pragma unroll
        for (int q = 0; q < PK; ++q) {
          const int idx = q * T + t;
          if (idx < n) write_pack(gyr + (int64_t(h) * Pq + idx) * VEC, held[h * PK + q], M, inv);
        }
      }
    for (int p = H; p < np; ++p) {
      const int64_t k = r * np + p;
      const int n = piece_packs(p);
      const uint4* sp = slot(k);
#pragma unroll
      for (int q = 0; q < PK; ++q) {
        const int idx = q * T + t;
        if (idx < n) write_pack(gyr + (int64_t(p) * Pq + idx) * VEC, sp[idx], M, inv);
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[k % N]);
    }
    if (r + 1 < rows) hold(r + 1);
  }
}
