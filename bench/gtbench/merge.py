"""--merge: the shards of one run (bench/h200.py --shard I/N, one per GPU; bench/device.sh GPUS=N) as
that one run: rows and raw results concatenated in one run's order, the summary rebuilt by
build_summary() as one run computes it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .console import print_summary
from .render import write_doc
from .summary import build_summary, cli_select_stats, exit_code, select_stats


def raw_results(summary):
    """The raw results a written summary holds (the inverse of build_summary(), for merging)."""
    cov = summary["coverage"]
    return {"planned": cov["planned"], "problems": summary["problems"], "skipped": cov["skipped_for_budget"],
            "coldtune": summary.get("coldtune") or {},
            "decoder": (summary.get("decoder") or {}).get("chains", []),
            "stability": (summary.get("stability") or {}).get("problems", []),
            "cachehit": summary.get("cachehit") or {}, "mismatches": summary.get("mismatches", []),
            "part_seconds": summary.get("part_seconds", {}), "part_errors": summary.get("part_errors", [])}


def merge_cachehit(parts):
    """The shards' cachehit entries as one: problems concatenated, statistics recomputed;
    max_ms_after_first is the largest of the shards' (each shard's first select is its own cold start)."""
    parts = [c for c in parts if c]
    if not parts:
        return {}
    out = {}
    for where in ("in_process", "cli"):
        rs = [c.get(where) or {} for c in parts]
        if not any("problems" in r for r in rs):
            out[where] = rs[0]  # nothing ran (e.g. a mock run's "no CLI")
            continue
        per = [e for r in rs for e in r.get("problems", [])]
        if where == "cli":
            out[where] = cli_select_stats(per, [x for r in rs for x in r.get("runs", [])], rs[0].get("cublaslt_preload"))
        else:
            out[where] = {**select_stats(per), "problems": per}
        if "max_ms_after_first" in out[where]:
            out[where]["max_ms_after_first"] = max((r["max_ms_after_first"] for r in rs
                                                    if r.get("max_ms_after_first") is not None), default=None)
    return out


def merge_docs(docs, merge_command=""):
    """One run's doc from the docs of its shards (--shard I/N, any order; raises ValueError if they are
    not the shards of one run). Rows and raw results are concatenated in the order one run would have
    produced them (the ordering's index), and the summary is rebuilt by build_summary(), as one run
    computes it. ceilings, ceilings_end and environment are shard 0's (its GPU); shards[] holds every
    shard's GPU, ceilings, GPU state, part times and coverage counts (each problem's roof_us comes from
    its own shard's ceilings). Part times are the longest shard's (they ran in parallel). A missing
    shard is a part error and its problems count as planned but not finished. The stream ceiling
    is shard 0's (each problem's and chain's stream_us its own shard's); decoder chains are merged by
    index like the problems."""
    if not docs or any("shard" not in d for d in docs):
        raise ValueError("not a shard's result (no 'shard' field: was it run with --shard I/N?)")
    docs = sorted(docs, key=lambda d: d["shard"]["index"])
    count = docs[0]["shard"]["count"]
    idx = [d["shard"]["index"] for d in docs]
    if any(d["shard"]["count"] != count for d in docs) or len(set(idx)) != len(idx):
        given = ", ".join(f"{d['shard']['index']}/{d['shard']['count']}" for d in docs)
        raise ValueError(f"shards {given}: not the shards of one run")
    first = docs[0]
    raws = [raw_results(d["summary"]) for d in docs]
    by_index = lambda e: e.get("index", 0)  # noqa: E731
    skipped = {}
    for r in raws:
        for k, v in r["skipped"].items():
            skipped.setdefault(k, []).extend(v)
    raw = {"planned": sum(r["planned"] for r in raws),
           "problems": sorted((p for r in raws for p in r["problems"]), key=by_index),
           "skipped": skipped,
           "coldtune": next((r["coldtune"] for r in raws if r["coldtune"]), {}),
           "decoder": sorted((c for r in raws for c in r["decoder"]), key=by_index),
           "stability": sorted((e for r in raws for e in r["stability"]), key=by_index),
           "cachehit": merge_cachehit([r["cachehit"] for r in raws]),
           "mismatches": [m for r in raws for m in r["mismatches"]],
           "part_seconds": {}, "part_errors": []}
    for i, r in zip(idx, raws):
        for k, v in r["part_seconds"].items():
            raw["part_seconds"][k] = max(raw["part_seconds"].get(k, 0.0), v)
        raw["part_errors"] += [f"shard {i}: {e}" for e in r["part_errors"]]
    missing = sorted(set(range(count)) - set(idx))
    if missing:
        raw["planned"] = max(raw["planned"], first["shard"].get("problems_total") or 0)
        raw["part_errors"] += [f"shard {i} of {count}: no result (see its log, bench-{i}.log)" for i in missing]

    # Rows in one run's order: the cold tune's, then each problem's (tune, then side by side) by
    # index, then the decoder chains' by index, then the stability head-to-heads.
    index_of = {(p["m"], p["n"], p["k"], p["dtype_name"]): p.get("index", 0) for p in raw["problems"]}
    chain_of = {(c["model"], c["m"], c["dtype_name"]): c.get("index", 0) for c in raw["decoder"]}
    phase = {"coldtune": 0, "decoder_graph": 2, "stability_h2h": 3}

    def row_key(r):
        if r.get("timing") == "decoder_graph":
            return 2, chain_of.get((r["model"], r["m"], r["dtype_name"]), 0)
        return phase.get(r.get("timing"), 1), index_of.get((r["m"], r["n"], r["k"], r["dtype_name"]), 0)
    rows = sorted((r for d in docs for r in d["rows"]), key=row_key)

    def shard_entry(d):
        e, su = d["environment"], d["summary"]
        cov = su["coverage"]
        return {"index": d["shard"]["index"], "count": count, "gpu": d["shard"].get("gpu"), "device": d["device"],
                "command": d["command"], "final": d.get("final"), "ceilings": d.get("ceilings"),
                "ceilings_end": d.get("ceilings_end"),
                "gpu_state": {"start": e.get("gpu_state_start"), "end": e.get("gpu_state_end")},
                "part_times": su.get("part_seconds", {}),
                "coverage": {"planned": cov["planned"], "finished": cov["finished"], "errors": len(cov["errors"]),
                             "skipped_not_supported": len(cov["skipped_not_supported"]),
                             "skipped_for_budget": {k: len(v) for k, v in cov["skipped_for_budget"].items()}}}

    def shard_command(d):
        cvd = (d["shard"].get("gpu") or {}).get("cuda_visible_devices")
        return (f"CUDA_VISIBLE_DEVICES={cvd} " if cvd is not None else "") + d["command"]

    env = dict(first["environment"])
    env["merge_command"] = merge_command
    doc = {"device": first["device"], "date": first["date"], "command": "\n".join(shard_command(d) for d in docs),
           "environment": env, "ceilings": first.get("ceilings") or {}, "ceilings_end": first.get("ceilings_end") or {},
           "stream": first.get("stream") or {},
           "rows": rows, "summary": None, "final": all(d.get("final") for d in docs) and not missing,
           "shards": [shard_entry(d) for d in docs]}
    doc["summary"] = build_summary(raw, doc)
    return doc


def merge_main(args, command):
    """--merge SHARD.json...: one run's <date>-h200[-tag].json and .md in --out (tag: --tag, else the
    shards'); the stdout summary; the exit code one run would have had."""
    try:
        docs = [json.loads(Path(f).read_text()) for f in args.merge]
        doc = merge_docs(docs, command)
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"h200.py --merge: {e}", file=sys.stderr)
        return 2
    tag = args.tag or docs[0]["shard"].get("tag") or ""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{doc['date']}-h200" + (f"-{tag}" if tag else "")
    write_doc(out, stem, doc)
    print_summary(doc)
    print(f"merged {len(docs)} shards: wrote {out / (stem + '.json')} and .md")
    return exit_code(doc)
