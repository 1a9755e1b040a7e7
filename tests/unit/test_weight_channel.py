"""The local weight channel hands published weights to its reader and keeps no copy after."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from sao.runtime.transport import LocalWeightChannel


def test_fetch_hands_the_weights_over_once() -> None:
    channel = LocalWeightChannel(version=3)
    assert channel.fetch() == (None, 3)
    channel.publish({"w": torch.ones(2)}, 4)
    state, version = channel.fetch()
    assert version == 4 and torch.equal(state["w"], torch.ones(2))
    assert channel.fetch() == (None, 4)
    assert channel.latest_version() == 4


def test_the_channel_holds_no_reference_once_fetched() -> None:
    channel = LocalWeightChannel()
    channel.publish({"w": torch.zeros(1000)}, 1)
    state, _ = channel.fetch()
    held = weakref.ref(state["w"])
    del state
    gc.collect()
    assert held() is None


def test_a_fetched_version_is_still_not_published_again() -> None:
    channel = LocalWeightChannel()
    channel.publish({"w": torch.zeros(1)}, 1)
    channel.fetch()
    with pytest.raises(ValueError, match="not newer"):
        channel.publish({"w": torch.zeros(1)}, 1)
    channel.publish({"w": torch.zeros(1)}, 2)
    assert channel.fetch()[1] == 2


def test_the_first_publish_may_repeat_the_starting_version() -> None:
    channel = LocalWeightChannel(version=5)
    channel.publish({"w": torch.zeros(1)}, 5)
    assert channel.fetch()[1] == 5
