"""Independent verification of the corpus analysis outputs.

Plain Python (pyarrow only to read Parquet) and deliberately sharing no code with `corpus_dagster`: a bug
in the pipeline's normalization, hashing or Jaccard cannot hide itself here. Each module is a script
(`python verify/<name>.py --help`, exit code 0 = pass, 1 = fail) and a function returning a dict with
`passed` and `failures`.
"""
