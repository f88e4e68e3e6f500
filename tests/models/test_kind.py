"""What a model folder is, from its config.json: the kind of a draft, the MTP modules of a target."""

from __future__ import annotations

import pytest

from autotune.models.kind import DRAFT_TARGET, EAGLE3, EAGLE_LEGACY, draft_kind, mtp_layers


@pytest.mark.parametrize(
    ("architectures", "kind"),
    [
        (["LlamaForCausalLMEagle3"], EAGLE3),
        (["Eagle3LlamaForCausalLM"], EAGLE3),
        (["EagleLlamaForCausalLM"], EAGLE_LEGACY),
        (["LlamaForCausalLM"], DRAFT_TARGET),
        ([], DRAFT_TARGET),
    ],
)
def test_draft_kind_from_architectures(architectures, kind) -> None:
    assert draft_kind({"architectures": architectures}) == kind


@pytest.mark.parametrize(
    ("config", "layers"),
    [({}, 0), ({"num_nextn_predict_layers": 2}, 2), ({"text_config": {"mtp_num_hidden_layers": 1}}, 1)],
)
def test_mtp_layers_from_either_key(config, layers) -> None:
    assert mtp_layers(config) == layers
