"""README.md of a transformers export: what the model is, where it came from, how well it does, and
what it is for. Built only from files: nothing is claimed that the checkpoint or a report does not
record.

Sources, each optional except config.json:
- config.json: the architecture;
- trainer.json (a training checkpoint): step, training settings, the instances it read;
- lineage.json + metrics.json (a registry version): corpus, vocabulary and instances manifests, code
  version, the metrics the promotion gate recorded;
- reports given with `albert export --eval FILE` (`albert evaluate --out` or `albert finetune --out`):
  accuracies with their 95% intervals, next to the baselines measured on the same data.
"""

from __future__ import annotations

import json

from core import storage
from core.figures import metric_change, metric_value, percent, points

LABELS = {"accuracy": "accuracy", "entity_f1": "entity F1"}
"""How a fine-tuning report's metric is named in text."""


def _read_json(folder: str, name: str) -> dict | None:
    path = storage.join(folder, name)
    if not storage.isfile(path):
        return None
    try:
        data = storage.read_json(path)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _acc(result: dict) -> str:
    lo, hi = result.get("ci95") or result.get("accuracy_ci95") or (None, None)
    interval = f" [{_pct(lo)}, {_pct(hi)}]" if lo is not None else ""
    count = f" (n={result['n']:,})" if "n" in result else ""
    return f"{_pct(result['accuracy'])}{interval}{count}"


def _eval_section(name: str, report: dict) -> list[str]:
    if {"masked_lm", "sentence_order"} <= set(report):  # albert evaluate
        baselines = report.get("baselines", {})
        lines = [
            f"Held-out pretraining metrics (`albert evaluate`, {name}, instances {report.get('instances')}):",
            "",
            "| metric | model | baseline (same data) |",
            "|---|---|---|",
            f"| masked-LM accuracy | {_acc(report['masked_lm'])} | most frequent train token: "
            + (
                _acc(baselines["masked_lm_most_frequent_train_token"])
                if "masked_lm_most_frequent_train_token" in baselines
                else "-"
            )
            + " |",
            f"| masked-LM loss (nats) | {report['masked_lm'].get('loss', float('nan')):.4f} | unigram: "
            + (
                f"{baselines['masked_lm_unigram_loss']:.4f}"
                if isinstance(baselines.get("masked_lm_unigram_loss"), float)
                else "-"
            )
            + " |",
            f"| sentence-order accuracy | {_acc(report['sentence_order'])} | chance: 50.00% |",
            "",
        ]
        return lines
    if {"models", "lift"} <= set(report):  # albert finetune
        split = report["lift"]["split"]
        lines = [f"Fine-tuning (`albert finetune`, task {report.get('task')}, {name}), {split} split:", ""]
        return lines + finetune_table(report) + [""]
    return [f"{name}: not an `albert evaluate` or `albert finetune` report; not shown.", ""]


def search_lines(report: dict) -> list[str]:
    """Each neural model's search as a markdown list: every setting tried on the first seed with its
    dev score, the chosen one in bold."""
    metric = report.get("metric", "accuracy")
    lines = []
    for name, rows in (report.get("search") or {}).items():
        tried = ", ".join(
            ("**{}**" if row["chosen"] else "{}").format(
                f"lr {row['lr']:g} / warm-up {row['warmup_fraction']:g}: {percent(row[f'dev_{metric}'])}"
            )
            for row in rows
        )
        lines.append(f"- {name} search, dev {LABELS.get(metric, metric)}: {tried}")
    return lines


def finetune_table(report: dict, narrow: bool = False) -> list[str]:
    """An `albert finetune` report as markdown: each model's metric on the final split (the mean over
    its seeds, with the 95% interval over seeds and examples), its training-set value, and pretrained
    minus it with the paired 95% interval; then the from-scratch model's chosen setting and, when it
    did not fit its training set, a warning. narrow: the same cells as two tables of at most four
    columns (the fine-tuning flow's artifact, in a panel about 700 px wide)."""
    split = report["lift"]["split"]
    metric = report.get("metric", "accuracy")
    label = LABELS.get(metric, metric)
    seeds = report.get("seeds") or []
    differences = dict(report.get("differences") or {})
    rows = []  # per model: name, runs, value, spread, train value, difference
    for model_name, results in report["models"].items():
        scores = results[split]
        value = f"{metric_value(metric, scores[metric], *scores[f'{metric}_ci95'])} (n={scores['n']:,})"
        spread = points(scores["seed_sd"]).lstrip("+") if len(results.get("seeds") or []) > 1 else "-"
        difference = "-"
        if model_name in differences:
            d = differences[model_name]
            difference = metric_change(metric, d[metric], *d[f"{metric}_paired_ci95"])
        runs = len([seed for seed in results.get("seeds") or [] if seed is not None]) or "-"
        rows.append((model_name, runs, value, spread, _pct(results[f"train_{metric}"]), difference))
    if narrow:
        lines = [f"| model | {label} [95% interval] | train {label} |", "|---|---|---|"]
        lines += [f"| {r[0]} | {r[2]} | {r[4]} |" for r in rows]
        lines += ["", "| model | pretrained - model [paired 95%] | seeds | seed sd |", "|---|---|---|---|"]
        lines += [f"| {r[0]} | {r[5]} | {r[1]} | {r[3]} |" for r in rows]
    else:
        lines = [
            f"| model | seeds | {label} [95% interval] | seed sd | train {label} | pretrained - model [paired 95%] |",
            "|---|---|---|---|---|---|",
        ]
        lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} |" for r in rows]
    lines += [
        "",
        f"Seeds {seeds}: the intervals come from a bootstrap over seeds and test examples together.",
    ]
    scratch = report["models"]["scratch"]
    lines += ["", *search_lines(report)]
    lines += [
        "",
        "pretrained and scratch searched the same settings on the first seed, with the same epochs and "
        "early stopping, and each kept the one its dev score chose; scratch_same_recipe is the scratch "
        "run at the pretrained model's setting (first seed). The char_ngram models read character "
        "n-grams, no pretraining.",
    ]
    fit = scratch["fit"]
    if not fit["fits"]:
        lines += [
            "",
            f"**The from-scratch model did not fit its training set** (train {label} "
            f"{_pct(fit[f'train_{metric}'])}, {fit['floor_name']} {_pct(fit['floor'])}): the difference "
            "over it measures a failed training run, not what pretraining bought.",
        ]
    return lines


# A fine-tuned classifier's card: (pipeline tag, transformers Auto class, what its head reads).
CLASSIFIER_HEADS = {
    "AlbertForSequenceClassification": (
        "text-classification",
        "AutoModelForSequenceClassification",
        "a linear classifier over the pooled [CLS] output: one label per text (or text pair)",
    ),
    "AlbertForTokenClassification": (
        "token-classification",
        "AutoModelForTokenClassification",
        "a linear classifier over every token: one label per piece",
    ),
}


def _classifier_lines(hf_config: dict, out_dir: str) -> tuple[str, list[str]]:
    """(pipeline tag, the Use and Task head sections) of a fine-tuned classifier's card."""
    architecture = hf_config["architectures"][0]
    tag, auto_class, reads = CLASSIFIER_HEADS[architecture]
    names = hf_config.get("id2label") or {}
    labels = ", ".join(f"{i} `{names[i]}`" for i in sorted(names, key=int)) or "not named"
    return tag, [
        "## Use",
        "",
        "```python",
        f"from transformers import {auto_class}, AutoTokenizer",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{out_dir}")',
        f'model = {auto_class}.from_pretrained("{out_dir}")',
        "```",
        "",
        "## Task head",
        "",
        f"`{architecture}`, fine-tuned: {reads}. {hf_config.get('num_labels')} labels: {labels}.",
        "",
    ]


def model_card(
    ckpt_dir: str,
    hf_config: dict,
    reports: dict[str, dict],
    identity_vocab: bool,
    out_dir: str = "THIS_FOLDER",
) -> str:
    """The README.md text. `reports`: {file name: parsed report JSON}; `out_dir`: the export folder,
    as the usage example names it."""
    trainer = _read_json(ckpt_dir, "trainer.json")
    lineage = _read_json(ckpt_dir, "lineage.json")
    metrics = _read_json(ckpt_dir, "metrics.json")
    classifier = (hf_config.get("architectures") or [""])[0] in CLASSIFIER_HEADS
    tag, use = _classifier_lines(hf_config, out_dir) if classifier else ("fill-mask", [])
    lines = [
        "---",
        "library_name: transformers",
        f"pipeline_tag: {tag}",
        "language: zh",
        f"tags: [albert, {tag}, {'fine-tuned' if classifier else 'pretraining'}]",
        "---",
        "",
        "# ALBERT (albert-factory export)",
        "",
        f"Exported from `{ckpt_dir}` by `albert export --format hf`.",
        "",
    ]
    lines += use or [
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{out_dir}")',
        f'model = AutoModelForMaskedLM.from_pretrained("{out_dir}")',
        f'fill = pipeline("fill-mask", model="{out_dir}")',
        'fill("中国的首都是[MASK]京。")',
        "```",
        "",
        "`AutoModelForPreTraining` gives the MLM and sentence-order heads; "
        "`AlbertForSequenceClassification.from_pretrained` starts a classifier from this backbone "
        "(its head is new and must be fine-tuned).",
        "",
    ]
    lines += [
        "## Model",
        "",
        "| | |",
        "|---|---|",
        f"| layers (parameter groups shared across them) | {hf_config.get('num_hidden_layers')} ({hf_config.get('num_hidden_groups', 1)}) |",
        f"| hidden size / embedding size | {hf_config.get('hidden_size')} / {hf_config.get('embedding_size')} |",
        f"| attention heads | {hf_config.get('num_attention_heads')} |",
        f"| intermediate size | {hf_config.get('intermediate_size')} |",
        f"| vocabulary | {hf_config.get('vocab_size')} pieces |",
        f"| max positions | {hf_config.get('max_position_embeddings')} |",
        "",
        "## Tokenization",
        "",
    ]
    if identity_vocab:
        lines += [
            "**Warning**: this vocabulary predates compiled normalization (`albert vocab "
            "--normalization python`). Pretraining text was normalized in Python (NFKC, control "
            "characters removed) before SentencePiece; transformers' tokenizer does not do that, so "
            "full-width characters and some punctuation tokenize differently (often as `<unk>`). "
            "Retrain the vocabulary with `albert vocab` for an export that tokenizes as training did.",
            "",
        ]
    else:
        lines += [
            "The vocabulary carries its own normalization (compiled into `spiece.model` and copied into "
            "`tokenizer.json`): full-width forms become ASCII, traditional characters become simplified, "
            "control characters are removed. `AutoTokenizer` gives the ids pretraining used "
            "(`albert tokenize` prints them).",
            "",
        ]
    lines += ["## Data lineage", ""]
    if trainer:
        cfg = trainer.get("train_config", {})
        data = trainer.get("data", {})
        lines += [
            f"- training step: {trainer.get('step')}",
            f"- instances: `{data.get('instances')}` (content id {data.get('content_id')})",
            f"- batch size {cfg.get('batch_size')}, learning rate {cfg.get('learning_rate')}, "
            f"{cfg.get('max_steps')} steps planned, seed {cfg.get('seed')}",
        ]
    if lineage:
        for key in ("corpus", "vocab", "instances", "run"):
            entry = lineage.get(key)
            if isinstance(entry, dict) and entry.get("path"):
                lines.append(f"- {key}: `{entry['path']}` (manifest sha256 {entry.get('manifest_sha256')})")
        lines += [
            f"- registry version {lineage.get('version')}, created {lineage.get('created_at')}",
            f"- code version {lineage.get('git_commit')}",
        ]
    if not trainer and not lineage:
        lines.append("- not recorded in the exported folder (neither trainer.json nor lineage.json)")
    lines += ["", "## Evaluation", ""]
    for name, report in reports.items():
        lines += _eval_section(name, report)
    if metrics:
        lines += [
            "Metrics recorded when this version was promoted:",
            "",
            "```json",
            json.dumps(metrics, indent=1, sort_keys=True)[:4000],
            "```",
            "",
        ]
    if not reports and not metrics:
        lines += [
            "No evaluation was recorded with this export. Run `albert evaluate --checkpoint DIR "
            "--instances DIR --out eval.json` and export again with `--eval eval.json`.",
            "",
        ]
    lines += [
        "## Intended use and limits",
        "",
        "- A pretrained encoder for Chinese (simplified) text, to fine-tune for classification, "
        "matching, tagging or extraction. It is not a text generator.",
        "- It knows only what its corpus holds: the domain, period and biases of that text. A model "
        "trained on a small corpus (such as the bundled 1998 People's Daily sample) is a demonstration, "
        "not a general-purpose model.",
        "- Inputs longer than the max positions are truncated. Characters outside the vocabulary "
        "become `<unk>`.",
        "- fill-mask with transformers puts a `▁` piece after `[MASK]` when text follows it (the "
        "tokenizer starts every text segment with one); pretraining never saw that, so predictions "
        "right before other text are slightly less reliable.",
        "",
    ]
    return "\n".join(lines)
