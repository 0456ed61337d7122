"""The corpus stage: raw sources -> cleaned, deduplicated, segmented documents (`albert corpus`).

Modules: sources (planning the work) and readers (one per source format, and byte ranges),
wikitext / normalize / filters (cleaning rules), minhash + dedup (deduplication), clean (per-record
glue), pipeline (the Beam graph), stage (run + stats + manifest), options, cli, staging (the
Dataflow worker package). Its benchmark is benchmarks/corpus.py.
"""
