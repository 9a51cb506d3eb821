"""`gemmtune report` (the C++ CLI runs `python -m gemmtune.report` with its arguments): the HTML page,
the figures alone, and a text summary on stdout. Exit 0, 1 on bad input (the message names the
file and field), 2 on a usage error."""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
from pathlib import Path

from .load import ReportError, load

USAGE_EXIT = 2
ERROR_EXIT = 1


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="gemmtune report",
        description="A self-contained HTML report (roofline per dtype, speed-up over torch, which backend wins "
                    "where, the backends' scorecard, correctness, environment) from bench or suite results and "
                    "the tuning cache. See docs/report.md.")
    ap.add_argument("inputs", nargs="*", metavar="INPUT",
                    help="bench results (.json, .json.xz), `gemmtune suite --json` or `tune --json` output, a "
                         "cache export, or a .tgz of such JSON files")
    ap.add_argument("--cache", action="append", default=[], metavar="PATH",
                    help="a tuning cache: the SQLite file or a `gemmtune cache export` JSON (repeatable)")
    ap.add_argument("--compile-times", action="append", default=[], metavar="INPUT",
                    help="an input read for the compile-time table only (e.g. a cold tune from an empty artifact "
                         "store): its problems are neither plotted nor compared (repeatable)")
    ap.add_argument("-o", "--output", metavar="FILE", help="write the HTML page to FILE")
    ap.add_argument("--format", choices=("png", "svg"), help="write the figures alone, one file each, to --out-dir")
    ap.add_argument("--out-dir", metavar="DIR", help="folder for --format's figures (created if missing)")
    ap.add_argument("--made-by", help=argparse.SUPPRESS)  # the command line as the user typed it (from the C++ CLI)
    return ap


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error
        return int(e.code or 0) and USAGE_EXIT
    if not args.inputs and not args.cache:
        ap.print_usage(sys.stderr)
        print("gemmtune report: give at least one INPUT or --cache PATH", file=sys.stderr)
        return USAGE_EXIT
    if args.out_dir and not args.format:
        args.format = "png"
    if args.format and not args.out_dir:
        print("gemmtune report: --format needs --out-dir DIR", file=sys.stderr)
        return USAGE_EXIT
    if not args.output and not args.format:
        print("gemmtune report: nothing to write: give -o FILE.html and/or --format png|svg --out-dir DIR",
              file=sys.stderr)
        return USAGE_EXIT
    made_by = args.made_by or "python -m gemmtune.report " + " ".join(shlex.quote(a) for a in argv)
    try:
        return _run(args, made_by)
    except ReportError as e:
        print(f"gemmtune report: {e}", file=sys.stderr)
        return ERROR_EXIT


def _run(args, made_by: str) -> int:
    # Imported here so that a usage error needs no matplotlib.
    try:
        from . import figures as figmod
    except ImportError as e:
        raise ReportError(f"{e} in {sys.executable}: scripts/setup.sh installs python/requirements-report.txt "
                          "(or set $GEMMTUNE_PYTHON to a python with matplotlib)") from None
    from .analyze import analyze
    from .maintenance import count
    from .page import render, summary_lines

    runs = []
    for path in list(args.inputs) + list(args.cache):
        runs.extend(load(path))
    for path in args.compile_times:
        for r in load(path):
            r.compile_only = True
            r.notes.append("read for its compile times only (--compile-times): its problems are not shown")
            runs.append(r)
    for path in args.cache:
        for r in runs:
            if r.path == path and r.kind != "cache":
                raise ReportError(f"{path}: given with --cache but it is a {r.kind} result, not a tuning cache")
    a = analyze(runs)
    code = count()
    figs = figmod.build(a, code)
    written = []
    try:
        if args.format:
            out = Path(args.out_dir)
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ReportError(f"{out}: cannot create the folder ({e.strerror})") from None
            for f in figs:
                target = out / f"{f.name}.{args.format}"
                _write(target, f.png() if args.format == "png" else f.svg().encode())
                written.append(str(target))
        if args.output:
            pngs = {f.name: f.png() for f in figs}
            generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            page = render(a, figs, pngs, code, made_by, generated)
            _write(Path(args.output), page.encode())
            written.append(f"{args.output} ({len(page) // 1024} KiB, {len(figs)} figures)")
    finally:
        for f in figs:
            f.close()
    for line in summary_lines(a):
        print(line)
    for w in written:
        print(f"wrote {w}")
    return 0


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as e:
        raise ReportError(f"{path}: cannot write ({e.strerror})") from None
