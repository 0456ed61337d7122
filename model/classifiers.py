"""Fine-tuning heads on the ALBERT backbone (model/albert.py): a linear classifier over the pooled
[CLS] output (sentences, sentence pairs) or over every token.

Module names follow transformers' `AlbertForSequenceClassification` / `AlbertForTokenClassification`,
so their backbone loads from a pretraining checkpoint by name (model.convert.load_pretrained) and
their new head starts at its init.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.albert import AlbertModel, AlbertPreTrainedModel
from model.config import AlbertConfig


@dataclass
class ClassifierOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # (B, num_labels) for sequences, (B, L, num_labels) for tokens


class AlbertClassifierBase(AlbertPreTrainedModel):
    """Backbone + dropout + linear to `num_labels`; the subclasses choose what the linear reads."""

    uses_pooler = True

    def __init__(self, config: AlbertConfig, num_labels: int = 2):
        super().__init__()
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.config = config
        self.num_labels = num_labels
        self.albert = AlbertModel(config, add_pooling_layer=self.uses_pooler, _init=False)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self.init_weights()


class AlbertForSequenceClassification(AlbertClassifierBase):
    """Pooled [CLS] -> dropout -> linear. One sentence (token types 0) or a pair (0 then 1).
    num_labels = 1 is regression (MSE on float labels), otherwise cross-entropy on class ids."""

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ClassifierOutput:
        pooled = self.albert(input_ids, attention_mask, token_type_ids).pooled_output  # (B, H)
        logits = self.classifier(self.dropout(pooled))  # (B, num_labels)
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1).float(), labels.float().reshape(-1))
            else:
                loss = F.cross_entropy(logits.float(), labels.long().reshape(-1))
        return ClassifierOutput(loss, logits)


class AlbertForTokenClassification(AlbertClassifierBase):
    """Per-token linear classifier. Labels (B, L); -100 and padded positions are ignored."""

    uses_pooler = False

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ClassifierOutput:
        seq = self.albert(input_ids, attention_mask, token_type_ids).sequence_output  # (B, L, H)
        logits = self.classifier(self.dropout(seq))  # (B, L, num_labels)
        loss = None
        if labels is not None:
            labels = labels.long()
            if attention_mask is not None:
                labels = labels.masked_fill(attention_mask == 0, -100)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        return ClassifierOutput(loss, logits)
