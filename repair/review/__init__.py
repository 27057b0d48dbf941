"""Review of reported issues: judgments and corrections (store), by references (oracle), in a spreadsheet
(sheet), or on a local web page (web; `python -m repair.review RUN_DIR`)."""
