"""cachehit: every finished suite problem answered from pass 1's tuning cache, by a new engine in this
process and by the gemmtune CLI in a separate one (`gemmtune suite FILE --cache PASS1`); select_ms
per problem (target < 1 ms)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
from pathlib import Path

from .. import log, warn
from ..render import fnum
from ..summary import cli_select_stats, select_stats


def part_cachehit(run):
    res = {"in_process": {}, "cli": {}}
    eng = run.engine(run.cache1)
    per = []
    try:
        for p, id1, _, _ in run.done:
            t0 = time.perf_counter()
            try:
                k, rep = eng.select(p.gt())
                wall_ms = (time.perf_counter() - t0) * 1e3
                # select_ms: the engine's own wall time of select() (as the CLI measures it);
                # python_ms adds ctypes and the report's JSON.
                ms = rep["seconds"] * 1e3 if rep.get("seconds") is not None else wall_ms
                per.append({"label": p.label, "select_ms": ms, "python_ms": wall_ms,
                            "from_cache": bool(rep.get("from_cache")), "same_pick": k.id == id1})
                k.close()
            except Exception as e:
                per.append({"label": p.label, "error": f"{type(e).__name__}: {e}"})
    finally:
        eng.close()
    res["in_process"] = select_stats(per)
    res["in_process"]["problems"] = per
    res["cli"] = cli_cachehit(run)
    run.cachehit = res
    for where in ("in_process", "cli"):
        r = res[where]
        if r.get("n"):
            log(f"cachehit {where}: {r['n_from_cache']}/{r['n']} from cache, select median {fnum(r['median_ms'], 3)} ms, "
                f"max {fnum(r['max_ms'], 3)} ms, {r['n_under_1ms']} under 1 ms")
        elif r.get("error"):
            warn(f"cachehit {where}: {r['error'][:300]}")


def cli_cachehit(run):
    """The CLI's answers: one `gemmtune suite` per (dtype, scale) over the finished problems, with the
    run's cache, artifact store and backends."""
    a = run.args
    cli = Path(a.gemmtune_cli)
    if a.mock and not cli.exists():
        return {"error": "mock run: no CLI"}
    if not cli.exists():
        return {"error": f"{cli}: not found (build the CLI, or pass --gemmtune-cli)"}
    env = os.environ.copy()
    lt = run.gpu.loaded_cublaslt()
    if lt:
        # The cache is keyed by the cuBLASLt version: the CLI must load the same library as this
        # process (torch may have brought its own copy).
        env["LD_PRELOAD"] = lt + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    groups = {}
    for p, id1, _, _ in run.done:
        groups.setdefault((p.dtype, p.scale), []).append((p, id1))
    per, runs = [], []
    for (dtype, scale), items in groups.items():
        shapes = run.tmp / f"cachehit-{dtype}-{scale}.csv"
        with open(shapes, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "layer", "phase", "m", "n", "k"])
            for p, _ in items:
                w.writerow([p.model, p.layer, p.phase, p.m, p.n, p.k])
        out_json = run.tmp / f"cachehit-{dtype}-{scale}.jsonl"
        # --artifacts: a cached pick of a compiled backend is loaded from the run's store.
        cmd = [str(cli), "suite", str(shapes), "--dtype", dtype, "--cache", str(run.cache1),
               "--artifacts", str(run.artifacts), "--json", str(out_json)]
        if scale != "none":
            cmd += ["--scale", scale]
        if a.backend_list:
            cmd += ["--backends", ",".join(a.backend_list)]
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
            rc, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = "timeout", str(e)
        wall = time.monotonic() - t0
        runs.append({"command": " ".join(cmd), "rc": rc, "wall_s": wall, "stderr_tail": (err or "")[-1500:]})
        by_key = {}
        if out_json.exists():
            for line in out_json.read_text().splitlines():
                try:
                    j = json.loads(line)
                except json.JSONDecodeError:
                    continue
                key = (j.get("model"), j.get("layer"), j.get("m"), j.get("n"), j.get("k"))
                e = by_key.setdefault(key, {"select_ms": j.get("select_ms"), "from_cache": j.get("from_cache"),
                                            "status": j.get("status"), "winner_id": None})
                if j.get("winner"):
                    e["winner_id"] = j.get("candidate_id")
        for p, id1 in items:
            e = by_key.get((p.model, p.layer, p.m, p.n, p.k))
            if e is None or e.get("select_ms") is None:
                per.append({"label": p.label, "error": "no row in the CLI's output" if e is None else f"status {e.get('status')}"})
            else:
                per.append({"label": p.label, "select_ms": e["select_ms"], "from_cache": bool(e["from_cache"]),
                            "same_pick": (e["winner_id"] == id1) if e["winner_id"] else None})
    return cli_select_stats(per, runs, lt)
