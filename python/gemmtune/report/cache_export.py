"""Bench results or `gemmtune tune --json` outputs written as a tuning-cache export (format
"gemmtune-cache", version 2: what `gemmtune cache export` writes and `gemmtune cache import` reads).

A bench run's tune rows are every candidate of every problem as its engine stored them in the run's
tuning cache (the cache file itself stays on the GPU machine); this rebuilds that cache's entries:
the key (summary.problems[].tune.key), the engine's environment string, the canonical problem, the
winner and every candidate result. What the rows do not hold is written as not recorded: tuned_at
null. Only the bench's problems in the nn.Linear layout ("rc") without an epilogue are rebuilt.

    python -m gemmtune.report.cache_export RESULT... -o cache.json
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

from .load import ReportError, _need, _parse_json_text

_IN_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "e4m3": "e4m3", "e5m2": "e5m2"}


def canonical(row: dict, where: str) -> str:
    """GemmProblem::canonical() of a bench row (layout rc: A row-major [m,k], B = W^T column-major
    [k,n] with ld k, D row-major with ld n)."""
    if row.get("layout", "rc") != "rc" or row.get("epilogue", "none") != "none":
        raise ReportError(f"{where}: layout {row.get('layout')!r} / epilogue {row.get('epilogue')!r}: only the "
                          "bench's rc problems without an epilogue can be rebuilt")
    dt = _IN_DTYPE.get(str(row.get("dtype")))
    if dt is None:
        raise ReportError(f"{where}.dtype: {row.get('dtype')!r} is not a GEMM input dtype")
    m, n, k = row["m"], row["n"], row["k"]
    return (f"gemm1;m={m};n={n};k={k};a={dt}/row/{k};b={dt}/col/{k};d={row.get('out_dtype', 'bf16')}/row/{n};"
            f"bias=0;act=none;scale={row.get('scale', 'none')};tf32=0")


def result(r: dict) -> dict:
    """One candidate in to_json's encoding (src/core/report_json.cpp): not measured = 0 / null."""
    return {"backend": r["backend"], "id": r.get("candidate_id", r.get("id", "")),
            "name": r.get("candidate", r.get("name", "")), "status": r["status"], "reason": r.get("reason") or "",
            "rel_err": r.get("rel_err"), "median_us": r.get("median_us") or 0.0, "p20_us": r.get("p20_us") or 0.0,
            "p80_us": r.get("p80_us") or 0.0, "samples": int(r.get("samples") or 0),
            "compile_s": r.get("compile_s") or 0.0, "winner": bool(r.get("winner")),
            "is_default": bool(r.get("is_default", r.get("default", False)))}


def _entry(key: str, env: str, problem: str, results: list, tuned_at, where: str) -> dict:
    winners = [r for r in results if r["winner"]]
    if len(winners) != 1:
        raise ReportError(f"{where}: {len(winners)} winners among its candidates (one expected)")
    w = winners[0]
    return {"key": key, "environment": env, "problem": problem, "backend": w["backend"], "candidate_id": w["id"],
            "candidate_name": w["name"], "median_us": w["median_us"], "tuned_at": tuned_at, "results": results}


def from_bench(doc: dict, path: str) -> list:
    env = ((doc.get("environment") or {}).get("engine") or {}).get("environment")
    if not env:
        raise ReportError(f"{path}.environment.engine.environment: missing (the engine's environment string)")
    keys = {}
    for i, s in enumerate((doc.get("summary") or {}).get("problems") or []):
        key = (s.get("tune") or {}).get("key")
        if s.get("label") and key:
            keys[(s.get("model"), s.get("layer"), s.get("m"), s.get("n"), s.get("k"), s.get("dtype_name"))] = key
    groups: dict = {}
    for i, r in enumerate(_need(doc, "rows", path)):
        if r.get("op", "gemm") != "gemm" or r.get("timing") != "tune":
            continue
        ident = (r.get("model"), r.get("layer"), r.get("m"), r.get("n"), r.get("k"), r.get("dtype_name"))
        if ident not in keys:
            raise ReportError(f"{path}.rows[{i}]: no summary.problems[] entry with its tune key ({ident})")
        g = groups.setdefault(keys[ident], {"problem": canonical(r, f"{path}.rows[{i}]"), "results": []})
        g["results"].append(result(r))
    return [_entry(key, env, g["problem"], g["results"], None, f"{path}: key {key}") for key, g in groups.items()]


def from_tune(doc: dict, where: str) -> dict:
    prob = _need(doc, "problem", where)
    canon = _need(prob, "canonical", f"{where}.problem")
    results = [result(r) for r in _need(doc, "results", where)]
    tuned = doc.get("tuned_at")
    return _entry(_need(doc, "key", where), _need(doc, "environment", where), canon, results,
                  None if not isinstance(tuned, (int, float)) else tuned, where)


def export(paths: list) -> dict:
    entries = {}
    for path in paths:
        data = Path(path).read_bytes()
        if data.startswith(b"\xfd7zXZ\x00"):
            data = lzma.decompress(data)
        doc = _parse_json_text(data.decode("utf-8"), path)
        if isinstance(doc, dict) and "rows" in doc and "summary" in doc:
            new = from_bench(doc, path)
        elif isinstance(doc, dict) and "problem" in doc and "results" in doc:
            new = [from_tune(doc, path)]
        else:
            raise ReportError(f"{path}: not a bench result nor a `gemmtune tune --json` output")
        for e in new:
            entries[e["key"]] = e  # a later input replaces an earlier entry of the same key, as a re-tune does
    return {"format": "gemmtune-cache", "version": 2, "entries": list(entries.values())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gemmtune.report.cache_export", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", metavar="RESULT", help="bench result (.json, .json.xz) or tune --json output")
    ap.add_argument("-o", "--output", required=True, metavar="FILE", help="the export (.json, or .json.xz)")
    args = ap.parse_args(argv)
    try:
        doc = export(args.inputs)
    except (ReportError, OSError) as e:
        print(f"cache_export: {e}", file=sys.stderr)
        return 1
    text = json.dumps(doc, indent=1).encode()
    Path(args.output).write_bytes(lzma.compress(text, preset=9) if args.output.endswith(".xz") else text)
    print(f"wrote {len(doc['entries'])} entries to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
