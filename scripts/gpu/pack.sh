# Sourced by the GPU machine's scripts (bench/device.sh, scripts/gpu/grouped.sh): the kernel pack
# artifacts-pack/store.tar.xz (scripts/precompile.sh), when carried, as one artifact store. The
# GPU machine has neither CUTLASS's headers nor the CuTe DSL wheel, so those backends run
# load-only from it.
#
#   pack_unpack   unpacks it into a fresh store (unless GEMMTUNE_ARTIFACTS is set) and exports
#                 GEMMTUNE_ARTIFACTS, GEMMTUNE_LOAD_ONLY (cutlass,cutedsl) and
#                 GEMMTUNE_TEST_CUTLASS_PACK; sets pack_store ("" without a pack)
#   pack_trust    trusts that store with build/gemmtune (docs/kernel-packs.md: packs are native
#                 code built elsewhere); call it once the CLI finds its libraries
pack_store=""

pack_unpack() {
  local packs=() pk tmp d
  [ -f artifacts-pack/store.tar.xz ] && packs+=(artifacts-pack/store.tar.xz)
  [ "${#packs[@]}" -gt 0 ] && [ -z "${GEMMTUNE_ARTIFACTS:-}" ] || return 0
  pack_store=${TMPDIR:-/tmp}/gemmtune-packs/store
  rm -rf "${pack_store%/store}" && mkdir -p -m 700 "${pack_store%/store}" "$pack_store"
  for pk in "${packs[@]}"; do
    tmp=$(mktemp -d)
    tar -C "$tmp" -xJf "$pk" || { echo "== pack $pk: cannot unpack"; return 1; }
    # each pack holds one top-level folder: the store's content-addressed entries
    for d in "$tmp"/*/; do cp -r --update=none "$d". "$pack_store"/ 2>/dev/null || cp -rn "$d". "$pack_store"/; done
    rm -rf "$tmp"
  done
  chmod -R go-w "$pack_store"  # a store others can write is refused
  export GEMMTUNE_ARTIFACTS=$pack_store
  export GEMMTUNE_LOAD_ONLY=${GEMMTUNE_LOAD_ONLY:-cutlass,cutedsl} GEMMTUNE_TEST_CUTLASS_PACK=${GEMMTUNE_TEST_CUTLASS_PACK:-1}
  echo "== packs: ${packs[*]} -> GEMMTUNE_ARTIFACTS=$pack_store ($(find "$pack_store" -type f | wc -l) files)"
}

pack_trust() {
  [ -n "$pack_store" ] && [ -x build/gemmtune ] || return 0
  if build/gemmtune store --help >/dev/null 2>&1; then
    echo "== $(build/gemmtune store trust "$pack_store" 2>&1 | tail -1)"
  else
    echo "== WARNING: build/gemmtune does not run here; the pack is not trusted and will not load"
  fi
}
