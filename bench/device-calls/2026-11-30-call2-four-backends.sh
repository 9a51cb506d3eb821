#!/usr/bin/env bash
# Call 2: issue 5 (and 4) — the llm-layers suite, bf16 + fp8, all four backends, split over 2 GPUs.
cp -r build/snap/bench/. bench/ && cp -r build/snap/python/. python/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
R=$OUT
GPUS=2 SKIP_GPU_TESTS=1 bash bench/device.sh --backends cublaslt,triton,cutlass,cutedsl --dtypes bf16,fp8 \
  --part ceilings,suite --inductor-subset "16:llama3-70b:qkv,128:llama3-70b:down,2048:llama3-70b:gate_up,8192:llama3-70b:o,8192:llama3-70b:down,2048:llama3-8b:o:fp8" \
  --inductor-triton-subset none --budget-s 465 --tag four-backends > $R/device.log 2>&1
rc=$?
cd $R && tar czf shards.tgz $(ls -d shard-* bench-*.log 2>/dev/null) && rm -rf shard-* bench-*.log
ls $R; tail -60 $R/device.log
exit $rc
