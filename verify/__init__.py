"""Independent verification of the corpus analysis outputs.

Plain Python (pyarrow only to read Parquet) and sharing no text rule with `corpus_dagster`: a bug in the
pipeline's normalization, hashing or Jaccard cannot hide itself here. The one thing taken from it is
which files of a folder are the corpus (`_inputs`, through the analysis's `select_corpus_files`), so a
check reads the documents the analysis read. Each module is a script (`python verify/<name>.py --help`,
`--corpus-dir`/`--out-dir` as the analysis takes them; exit code 0 = pass, 1 = fail) and a function
returning a dict with `passed` and `failures`.
"""
