"""The tokenizer files of a transformers export: spiece.model, tokenizer_config.json,
special_tokens_map.json and tokenizer.json.

With a vocabulary whose normalization is compiled into spm.model (`albert vocab`'s default), these
files make transformers tokenize exactly as pretraining did, by every route a user may take:

- `AutoTokenizer.from_pretrained(folder)` reads tokenizer_config.json (AlbertTokenizer, no lower
  casing, accents kept, a prefix space: the model's dummy prefix) and tokenizer.json's vocabulary and
  `Precompiled` normalizer, the model's compiled table;
- without tokenizer.json, transformers converts spiece.model and copies the same table;
- the sentencepiece library (what the slow, SentencePiece-backed tokenizers call) reads spiece.model
  and applies the table itself;
- tokenizer.json alone (`tokenizers.Tokenizer.from_file`, and transformers 4.x, which uses the file
  as written) runs: '``' and "''" to '"', the table, split on white space, "▁" before each word,
  the Unigram model, then [CLS] A [SEP] (B [SEP]).

Each of these is checked against `albert tokenize` in tests/model/test_hf_export.py. One gap, in
transformers' `Precompiled` normalizer and not in SentencePiece: a grapheme shorter than 6 bytes
whose first character has a rule is replaced as a whole ("Ａ" + a combining accent loses the accent).

An older identity vocabulary (`--normalization python`) has no table to carry: its text was
normalized in Python before SentencePiece, which transformers does not do, so the export writes the
same files with no prefix space and `identity_vocabulary()` is True (the model card says so).
"""

from __future__ import annotations

import base64
import json

SPIECE_NAME = "spiece.model"  # the name AlbertTokenizer looks for


def _normalizer_spec(proto: bytes):
    from sentencepiece import sentencepiece_model_pb2 as pb

    return pb.ModelProto.FromString(proto).normalizer_spec


def identity_vocabulary(proto: bytes) -> bool:
    return _normalizer_spec(proto).name == "identity"


def tokenizer_files(sp, proto: bytes, max_length: int) -> dict[str, bytes]:
    """{file name: bytes} for a SentencePieceProcessor `sp` of `proto`."""
    spec = _normalizer_spec(proto)
    prefix = bool(spec.add_dummy_prefix) and spec.name != "identity"

    def piece(i: int, default: str) -> str:
        return sp.id_to_piece(i) if 0 <= i < sp.get_piece_size() else default

    specials = {
        "unk_token": piece(sp.unk_id(), "<unk>"),
        "pad_token": piece(sp.pad_id(), "<pad>"),
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
        "bos_token": "[CLS]",
        "eos_token": "[SEP]",
    }
    tokenizer_config = {
        "tokenizer_class": "AlbertTokenizer",
        "do_lower_case": False,
        "keep_accents": True,
        "remove_space": True,
        "add_prefix_space": prefix,
        "model_max_length": max_length,
        **specials,
    }
    return {
        SPIECE_NAME: proto,
        "tokenizer_config.json": _json(tokenizer_config),
        "special_tokens_map.json": _json(specials),
        "tokenizer.json": _json(tokenizer_json(sp, spec, prefix), indent=None),
    }


def tokenizer_json(sp, spec, prefix: bool) -> dict:
    """The `tokenizers` serialization of the vocabulary (format version 1.0)."""
    piece_count = sp.get_piece_size()
    special_ids = [i for i in range(piece_count) if sp.is_control(i) or sp.is_unknown(i)]
    cls_id, sep_id = sp.piece_to_id("[CLS]"), sp.piece_to_id("[SEP]")
    scheme = "always" if prefix else "never"
    normalizers = [
        {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
        {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
    ]
    if spec.precompiled_charsmap:
        normalizers.append(
            {
                "type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(spec.precompiled_charsmap).decode(),
            }
        )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": sp.id_to_piece(i),
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in special_ids
        ],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "WhitespaceSplit"},
                {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": True},
            ],
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [_special("[CLS]", 0), _seq("A", 0), _special("[SEP]", 0)],
            "pair": [
                _special("[CLS]", 0),
                _seq("A", 0),
                _special("[SEP]", 0),
                _seq("B", 1),
                _special("[SEP]", 1),
            ],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [cls_id], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [sep_id], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": True},
        "model": {
            "type": "Unigram",
            "unk_id": sp.unk_id(),
            "vocab": [[sp.id_to_piece(i), sp.get_score(i)] for i in range(piece_count)],
            "byte_fallback": False,
        },
    }


def _special(token: str, type_id: int) -> dict:
    return {"SpecialToken": {"id": token, "type_id": type_id}}


def _seq(name: str, type_id: int) -> dict:
    return {"Sequence": {"id": name, "type_id": type_id}}


def _json(obj, indent: int | None = 2) -> bytes:
    return (json.dumps(obj, indent=indent, ensure_ascii=False) + "\n").encode()
