"""How a run's decisions are shown: text and Markdown tables, plots and forest plots, the report
folder, summary.json, the end-of-run summary, claim histories and the tidy export."""

EXPORT_FORMATS = ("csv", "parquet")  # the tidy export's formats; here so the CLI reads them without the stack
