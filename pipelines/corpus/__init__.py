"""The corpus stage: raw sources -> cleaned, deduplicated, segmented documents (`albert corpus`).

Modules: sources (readers), wikitext / normalize / filters (cleaning rules), minhash + dedup
(deduplication), clean (per-record glue), pipeline (the Beam graph), stage (run + stats + manifest),
cli, staging (the Dataflow worker package). Its benchmark is benchmarks/corpus.py.
"""
