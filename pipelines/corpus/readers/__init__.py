"""The readers of the corpus stage: one module per source format, each turning a work item (a file, or
a byte range of one) into raw records (pure generators, no Beam):

    {"source", "id", "title", "url", "text", "markup": "wiki"|"plain", "where",
     "ns": int, "redirect": bool}                 (ns and redirect: zhwiki only)

or, for what cannot be read, error records `{"source", "where", "error", "detail", "raw"}` (the dead
letter, see error_records.py; with `lost`, and `id` and `title` where known, for records that damaged input
lost). Ids: ids.py. Memory is bounded by `max_record_bytes` whatever the file size, plus, in a `.bz2`
dump, the pages held until bz2 has checked them (at most a block's output, 46 MB: wiki.py).
ranges.py cuts files into byte ranges that workers read independently; bz2streams.py reads bz2
stream by stream; pipelines.corpus.sources plans the work and picks the reader of each item.
"""
