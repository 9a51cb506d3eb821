#!/usr/bin/env bash
# Session 4, call 3: CuTe DSL GEMM with overlapped fp8 promotion: the CuTe DSL GPU tests (every
# candidate of the test matrix vs the float64 host reference) and fp8 tunes beside cuBLASLt.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/cs && tar -C /tmp/cs -xJf artifacts-cutedsl-pack/store.tar.xz
export GEMMTUNE_ARTIFACTS=/tmp/cs/store GEMMTUNE_CUTEDSL_LOAD_ONLY=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 300 build/tests/gemmtune_gpu_tests --gtest_filter='Cutedsl.*' > $OUT/gpu-tests-cutedsl.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[==========\]|checked|candidate runs" $OUT/gpu-tests-cutedsl.log | head
for shape in 2048x8192x8192 8192x57344x8192 4096x4096x4096 8192x7168x8192 2048x28672x4096; do
  build/gemmtune tune $shape --dtype e4m3 --backends cutedsl,cublaslt --no-cache --json $OUT/cd-$shape.json > /tmp/t.txt 2>&1 || { echo "FAIL $shape"; tail -5 /tmp/t.txt; }
  python3 - $OUT/cd-$shape.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
best = {}
for r in d["results"]:
    if r.get("median_us") and (r["backend"] not in best or r["median_us"] < best[r["backend"]]["median_us"]): best[r["backend"]] = r
c, l = best.get("cutedsl"), best.get("cublaslt")
bad = [r["id"] + ":" + r["status"] for r in d["results"] if r.get("status") in ("wrong", "failed")]
print(f'{d["problem"]["m"]}x{d["problem"]["n"]}x{d["problem"]["k"]}: cutedsl {c["id"] if c else "-"} {c["median_us"] if c else 0:.1f}us | cublaslt {l["median_us"]:.1f}us | lt/cutedsl {l["median_us"]/c["median_us"] if c else 0:.3f} | not ok: {bad[:4]}')
PY
done
cd $OUT && tar czf tunes.tgz cd-*.json && rm -f cd-*.json
