# Sourced by the GPU scripts. cublaslt_path BINARY [PYTHON]: when BINARY (linked on the build
# machine) cannot find libcublasLt.so.13 through its run path, put the folder of this machine's
# copy (the CUDA toolkit's, else the nvidia-cublas wheel's of PYTHON, default python3) in front of
# LD_LIBRARY_PATH; returns 0 when it changed LD_LIBRARY_PATH.
cublaslt_path() {
  ldd "$1" 2>/dev/null | grep -q "libcublasLt.*not found" || return 1
  local lt
  lt=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13 2>/dev/null | head -1)
  [ -n "$lt" ] || lt=$("${2:-python3}" -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib", "libcublasLt.so.13"))' 2>/dev/null)
  [ -n "$lt" ] || return 1
  export LD_LIBRARY_PATH="$(dirname "$lt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
