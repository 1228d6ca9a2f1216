# allocs.bash: the allocators that standard.sh and scaling.sh compare, in one
# place (sourced, not run). bench_allocs ROOT LIBDIR fills
#   spec[NAME]="LIB|VAR=VALUE" (LIB empty for glibc) and order=(NAME ...)
# with glibc, Debian's jemalloc and mimalloc 2.0.9 found in LIBDIR, the
# peers of HPM_PEERS (default ROOT/../shared/peers or ROOT/../../shared/peers;
# absent ones are skipped), hpmalloc (HPM_LIB, default ROOT/build/libhpmalloc.so),
# hpmalloc-b (HPM_LIB_B, when set), EXTRA_ALLOCS="NAME=LIB.so[,VAR=VALUE] ...",
# then keeps only ALLOCS="NAME ..." when that is set. It sets peers too.
bench_allocs() {
  local root=$1 L=$2 d e name rest lib var a keep=()
  peers=${HPM_PEERS:-}
  if [[ -z $peers ]]; then
    for d in "$root/../shared/peers" "$root/../../shared/peers"; do [[ -d $d ]] && { peers=$(cd "$d" && pwd); break; }; done
  fi
  declare -gA spec=()
  order=()
  _add() { spec[$1]="$2|${3:-}"; order+=("$1"); }
  _add glibc ""
  [[ -r $L/libjemalloc.so.2 ]] && _add jemalloc "$(realpath "$L/libjemalloc.so.2")"
  [[ -r $L/libmimalloc.so.2 ]] && _add mimalloc "$(realpath "$L/libmimalloc.so.2")"
  if [[ -n $peers ]]; then
    [[ -r $peers/libsnmalloc.so ]] && _add snmalloc "$peers/libsnmalloc.so"
    [[ -r $peers/libmimalloc-v3.so ]] && _add mimalloc-v3 "$peers/libmimalloc-v3.so"
    [[ -r $peers/libtcmalloc-temeraire.so ]] && _add tcmalloc "$peers/libtcmalloc-temeraire.so" GLIBC_TUNABLES=glibc.pthread.rseq=0
  fi
  lib=${HPM_LIB:-$root/build/libhpmalloc.so}
  [[ -r $lib ]] && _add hpmalloc "$(realpath "$lib")"
  [[ -n ${HPM_LIB_B:-} && -r ${HPM_LIB_B:-} ]] && _add hpmalloc-b "$(realpath "$HPM_LIB_B")"
  for e in ${EXTRA_ALLOCS:-}; do
    name=${e%%=*}; rest=${e#*=}; lib=${rest%%,*}; var=""; [[ $rest == *,* ]] && var=${rest#*,}
    _add "$name" "$(realpath "$lib")" "$var"
  done
  if [[ -n ${ALLOCS:-} ]]; then
    for a in "${order[@]}"; do [[ " $ALLOCS " == *" $a "* ]] && keep+=("$a"); done
    order=("${keep[@]}")
  fi
}
