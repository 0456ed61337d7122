"""Fine-tuning heads on the ALBERT backbone (model/albert.py): a linear classifier over the pooled
[CLS] output (sentences, sentence pairs) or over every token, optionally with a linear-chain CRF over
the tokens' labels (AlbertForTokenClassificationCrf).

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
from model.linear_chain import Chains, TransitionScores, gold_score, log_partition, viterbi


@dataclass
class ClassifierOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # (B, num_labels) for sequences, (B, L, num_labels) for tokens


class AlbertClassifierBase(AlbertPreTrainedModel):
    """Backbone + dropout + linear to `num_labels`; the subclasses choose what the linear reads."""

    uses_pooler = True
    head_parameters: tuple[str, ...] = ("classifier.",)
    """Prefixes of the head's own parameters: what a pretraining checkpoint lacks (left at their init)."""

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
        loss = None if labels is None else self.loss(logits, labels, attention_mask)
        return ClassifierOutput(loss, logits)

    def loss(
        self, logits: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Mean cross-entropy over the labelled positions (labels not -100, inside the mask)."""
        labels = labels.long()
        if attention_mask is not None:
            labels = labels.masked_fill(attention_mask == 0, -100)
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)

    @torch.no_grad()
    def unit_labels(self, logits: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
        """The label of each position marked in `units` (B, L) bool, flat (N,), row by row, positions
        ascending: each position's most likely label."""
        return logits[units].argmax(-1)


class AlbertForTokenClassificationCrf(AlbertForTokenClassification):
    """The token classifier with a linear-chain CRF over each sequence's labelled positions (`--ner-head
    crf`): the linear layer's logits there are the emission scores, and learned transition scores tie
    neighbouring labels (model/linear_chain.py). The loss is the chain's negative log-likelihood per
    labelled position; decoding is Viterbi. The labelled positions are those whose label is not -100
    (NER: the first piece of each unit), which also delimit the chain at prediction (`unit_labels`).

    The transition scores start at 0 and train at `TRANSITION_LR_SCALE` times the run's learning rate:
    at a fine-tuning rate (1e-4) AdamW moves a parameter by about the rate per step, so a few hundred
    steps would leave transitions from 0 at almost 0, and the CRF would decode as the linear head."""

    TRANSITION_LR_SCALE = 100.0
    head_parameters = ("classifier.", "transitions", "start_transitions", "end_transitions")

    def __init__(self, config: AlbertConfig, num_labels: int = 2):
        super().__init__(config, num_labels)
        self.transitions = nn.Parameter(torch.zeros(num_labels, num_labels))  # (from, to)
        self.start_transitions = nn.Parameter(torch.zeros(num_labels))
        self.end_transitions = nn.Parameter(torch.zeros(num_labels))

    def lr_scales(self) -> dict[str, float]:
        """Parameter name -> multiple of the run's learning rate (finetune_train's optimizer)."""
        names = ("transitions", "start_transitions", "end_transitions")
        return dict.fromkeys(names, self.TRANSITION_LR_SCALE)

    def _chain(self) -> TransitionScores:
        return TransitionScores(self.transitions, self.start_transitions, self.end_transitions)

    def loss(
        self, logits: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """The chains' negative log-likelihood per labelled position (labels not -100, in the mask)."""
        labelled = labels != -100
        if attention_mask is not None:
            labelled &= attention_mask.bool()
        chains = Chains.of(labelled.sum(1).tolist())
        emissions = logits[labelled].float()  # (N, num_labels): row by row, positions ascending
        gold = labels[labelled].long()  # (N,)
        nll = log_partition(emissions, chains, self._chain()) - gold_score(
            emissions, chains, gold, self._chain()
        )
        return nll / max(1, int(gold.numel()))

    @torch.no_grad()
    def unit_labels(self, logits: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
        """The Viterbi labels of each row's chain of `units` (B, L) bool, flat (N,), row by row."""
        return viterbi(logits[units].float(), Chains.of(units.sum(1).tolist()), self._chain())
