"""gemmtune's report: one self-contained HTML page (and its figures) from bench results, the CLI's
suite / tune output and the tuning cache. `gemmtune report` and `python -m gemmtune.report` run
cli.main; docs/report.md describes the inputs and the page.

Modules: load (inputs -> runs of problems), analyze (comparisons and the backend scorecard),
maintenance (lines of code per backend), figures (matplotlib), page (the HTML), cache_export
(bench / tune results written as a tuning-cache export)."""
