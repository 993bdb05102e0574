"""Length-bucketed releases: buckets, segmentation, per-source caps, UUIDv5 ids, the dataset card.

Pure logic lives in the modules here; `driver.py` does all reading and writing.
"""
