#!/usr/bin/env bash
# Session 4, call 1: issue 2's duel experiment (race duels on single launches vs on several
# launches per sample) on the pair the last stability run disagreed on, 3 reps, alternating.
cp -r build-dev/snap/bench/. bench/ && cp -r build-dev/snap/python/. python/
mkdir -p build/tests && tar -C build -xJf build-dev/bin.tar.xz && mv build/gemmtune_gpu_tests build/tests/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv
RACE_METHOD_VARIANTS=duel RACE_METHOD_REPS="1 2 3" RACE_METHOD_PROBLEMS="512x10240x8192" OUT=$OUT bash bench/race-method.sh 2>&1
cd $OUT && tar czf race-method.tgz race-method && rm -rf race-method
