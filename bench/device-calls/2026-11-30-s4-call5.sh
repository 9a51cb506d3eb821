#!/usr/bin/env bash
# Session 4, call 5 (nvidia-h200-x2): issues 4 and 5: the whole llm-layers suite (182 problems, bf16 +
# fp8 tensorwise), all four backends (CUTLASS and CuTe DSL load-only from the packs, with the
# overlapped fp8 promotion), Inductor max-autotune on 6 problems, split over both GPUs.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
GPUS=2 SKIP_GPU_TESTS=1 bash bench/device.sh --backends cublaslt,triton,cutlass,cutedsl --dtypes bf16,fp8 --part ceilings,suite \
  --inductor-subset 16:llama3-70b:qkv,128:llama3-70b:down,2048:llama3-70b:gate_up,8192:llama3-70b:o,8192:llama3-70b:down,2048:llama3-8b:o:fp8 \
  --inductor-triton-subset none --budget-s 470 --tag s4-four-backends > $OUT/device.log 2>&1
rm -f $OUT/*.sqlite* $OUT/shard-*/*.sqlite*
mkdir -p $OUT/misc && mv $OUT/shard-* $OUT/bench-*.log $OUT/misc/ 2>/dev/null; (cd $OUT && tar czf misc.tgz misc && rm -rf misc)
ls $OUT
grep -E "within 5%|pick vs|^\| (all|bf16|fp8) \|" $OUT/*.md | head -12 | cut -c1-300
