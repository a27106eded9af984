"""The report of one or more runs: curves, tables and the per-action credit viewer in one
self-contained HTML page (``agentcredit report``, docs/report.md).

    run_files.py   finding run directories and reading them tolerantly
    aggregate.py   a method's seeds summarised (mean, sd, curves by update)
    curves.py      the learning curves (Plotly figures)
    tables.py      success per task type, the VICT audit, the ledger, timing
    viewer.py      the rollout viewer's data from the saved updates
    page.py        the page itself: escaping, embedding, writing

Needs the ``report`` extra (Plotly): ``pip install 'agentcredit[report]'``.
"""
