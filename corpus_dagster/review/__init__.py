"""The review sample: a seeded sample of documents per (source, rule) to read what each curation rule does.

`sample` chooses the documents and builds their rows (pure), `html` renders the static page (pure), and
`driver` does all reading and writing (stage record under a key of the clean, dedup and scrub keys).
"""
