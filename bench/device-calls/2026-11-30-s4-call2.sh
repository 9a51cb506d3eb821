#!/usr/bin/env bash
# Session 4, call 2: CUTLASS fp8 probe: the new overlapped-promotion mainloop (probe store:
# co128x128x128c1x1 overlap, co128x192x128c1x1) vs the previous pack (CUTLASS's own fp8
# mainloop), each in a tune beside cuBLASLt (ratios to cuBLASLt's best within each tune).
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/new /tmp/old && tar -C /tmp/new -xJf build-dev/probe/cl-new.tar.xz && tar -C /tmp/old -xJf artifacts-cutlass-pack/artifacts-cutlass.tar.xz
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
for rep in 1 2; do
for shape in 2048x8192x8192 8192x57344x8192 4096x4096x4096 8192x7168x8192 2048x28672x4096; do
  for v in new old; do
    st=/tmp/$v/cl-probe; [ $v = old ] && st=/tmp/old/artifacts-cutlass
    GEMMTUNE_ARTIFACTS=$st build/gemmtune tune $shape --dtype e4m3 --backends cutlass,cublaslt --no-cache --json $OUT/$v-$shape-$rep.json > /tmp/t.txt 2>&1 || { echo "FAIL $v $shape"; tail -5 /tmp/t.txt; }
    python3 - $OUT/$v-$shape-$rep.json $v <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
res = [r for r in d["results"] if r.get("median_us")]
best = {}
for r in res:
    b = r["backend"]
    if b not in best or r["median_us"] < best[b]["median_us"]: best[b] = r
c, l = best.get("cutlass"), best.get("cublaslt")
wrong = [r["id"] + ":" + r["status"] for r in d["results"] if r.get("status") in ("wrong", "failed")]
print(f'{sys.argv[2]} {d["problem"]["m"]}x{d["problem"]["n"]}x{d["problem"]["k"]}: cutlass {c["id"] if c else "-"} {c["median_us"] if c else 0:.1f}us | cublaslt {l["median_us"]:.1f}us | lt/cutlass {l["median_us"]/c["median_us"] if c else 0:.3f} | not ok: {wrong[:4]}')
PY
  done
done
done
cd $OUT && tar czf tunes.tgz *.json && rm -f *.json
